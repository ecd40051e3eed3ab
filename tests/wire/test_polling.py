"""How GameClient waits for a confirmation: once it has learned a game's frames it sleeps
until just before the next one and polls then, so a confirmed call costs a few tiny
requests and one /state; without a prediction it falls back to short polls. Against a
simulated game (an injected opener) on a simulated clock: counts, not wall-clock time."""

from __future__ import annotations

import json
import random
import statistics
import urllib.parse
from typing import Any

import pytest

from game_bridge_mcp.wire.client import GameClient
from game_bridge_mcp.wire.transport import HttpResponse

pytestmark = pytest.mark.timeout(30)


class SimGame:
    """A game whose frame ``f`` starts at ``phase + f * period``; a command queued during
    frame ``f`` is applied when frame ``f + 1`` starts. Each request advances the shared
    clock by its round trip; the game reads its state half way through."""

    def __init__(self, *, period: float = 1 / 60, health_ext: bool = True, rtt: float = 0.0003,
                 state_rtt: float | None = None, apply_between_frames: bool = False) -> None:
        self.now = 10.0
        self.period = period
        self.phase = 0.0041
        self.health_ext = health_ext
        self.rtt = rtt
        self.state_rtt = rtt if state_rtt is None else state_rtt
        self.apply_between_frames = apply_between_frames
        self.queued: list[tuple[int, int]] = []  # (command id, frame queued on)
        self.next_id = 0
        self.counts = {"/command": 0, "/health": 0, "/state": 0}
        self.stall_until = 0.0

    def frame(self, t: float) -> int:
        if t < self.stall_until:
            t = self.stall_until - self.period / 2
        return int((t - self.phase) // self.period)

    def frame_start(self, frame: int) -> float:
        return self.phase + frame * self.period

    def completed(self, t: float) -> int:
        if self.apply_between_frames:
            return self.next_id
        current = self.frame(t)
        done = [cid for cid, queued_on in self.queued if queued_on < current]
        return max(done, default=0)

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def __call__(self, url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        path = urllib.parse.urlsplit(url).path
        self.counts[path] += 1
        rtt = self.state_rtt if path == "/state" else self.rtt
        self.now += rtt / 2
        frame, completed = self.frame(self.now), self.completed(self.now)
        if path == "/command":
            self.next_id += 1
            self.queued.append((self.next_id, frame))
            doc: dict[str, Any] = {"accepted": True, "commandId": self.next_id, "frame": frame}
        elif path == "/health":
            doc = {"ok": True, "frame": frame}
            if self.health_ext:
                doc["completedCommandId"] = completed
        else:
            doc = {"frame": frame, "completedCommandId": completed, "game": {"n": completed}}
        self.now += rtt / 2
        return HttpResponse(200, json.dumps(doc).encode())


def run_calls(game: SimGame, client: GameClient, calls: int, *, seed: int = 3,
              max_gap: float = 0.3) -> list[dict[str, float]]:
    """Confirmed calls at random moments; per call the requests made and how long after
    the command became visible the confirmation came back (simulated seconds)."""
    rng = random.Random(seed)
    out = []
    for _ in range(calls):
        game.sleep(rng.uniform(0, max_gap))
        before = dict(game.counts)
        result = client.command_and_sync("bump", timeout_ms=5000)
        assert result["confirmation"] == "completedCommandId"
        assert result["state"]["completedCommandId"] >= result["commandId"]
        queued_on = result["answer"]["frame"]
        visible = game.now if game.apply_between_frames else game.frame_start(queued_on + 1)
        out.append({"health": game.counts["/health"] - before["/health"],
                    "state": game.counts["/state"] - before["/state"],
                    "late": game.now - visible})
    return out


def client_for(game: SimGame) -> GameClient:
    return GameClient(7777, opener=game, clock=game.clock, sleep=game.sleep)


#: A /state that costs more than a /health (0.6 ms against 0.3 ms): polled on /health.
STATE_RTT = 0.0006
#: A confirmation within a millisecond of the command being applied, plus what the final
#: /state costs over a /health.
LATE_S = 0.001 + STATE_RTT - 0.0003


def test_with_completed_id_in_health_a_call_costs_a_few_probes_and_one_state() -> None:
    game = SimGame(state_rtt=STATE_RTT)
    client = client_for(game)
    calls = run_calls(game, client, 60)[20:]
    assert client.frames.predictable
    assert all(c["state"] == 1 for c in calls)
    assert statistics.mean(c["health"] for c in calls) <= 3
    assert statistics.median(c["late"] for c in calls) <= LATE_S


def test_without_a_prediction_the_same_calls_poll_many_times() -> None:
    """The baseline the frame clock improves on (and proof the test above can fail)."""
    game = SimGame(state_rtt=STATE_RTT)
    client = client_for(game)
    client.frames.next_frame_at = lambda frame: None  # type: ignore[method-assign]
    calls = run_calls(game, client, 40)[10:]
    assert statistics.mean(c["health"] for c in calls) > 4


def test_a_state_as_small_as_health_is_polled_itself() -> None:
    """One round trip fewer: no /health then /state, the /state that shows the command
    done is the answer."""
    game = SimGame()  # /state costs what /health does
    client = client_for(game)
    calls = run_calls(game, client, 60)[20:]
    assert all(c["health"] == 0 for c in calls)
    assert statistics.mean(c["state"] for c in calls) <= 2.5
    assert statistics.median(c["late"] for c in calls) <= 0.001


def test_a_plain_health_game_gets_about_one_state_fetch_per_call() -> None:
    game = SimGame(health_ext=False)
    client = client_for(game)
    calls = run_calls(game, client, 60)[20:]
    assert max(c["state"] for c in calls) <= 2
    assert statistics.mean(c["state"] for c in calls) <= 1.2
    assert statistics.median(c["late"] for c in calls) <= 0.0015


def test_an_expensive_state_is_fetched_once_per_call() -> None:
    game = SimGame(health_ext=False, state_rtt=0.02)
    client = client_for(game)
    calls = run_calls(game, client, 40)[10:]
    assert all(c["state"] == 1 for c in calls)


@pytest.mark.parametrize("hz", [30.0, 144.0, 1000.0])
def test_other_frame_rates(hz: float) -> None:
    game = SimGame(period=1 / hz, state_rtt=STATE_RTT)
    client = client_for(game)
    calls = run_calls(game, client, 60)[20:]
    assert client.frames.period_s == pytest.approx(1 / hz, rel=0.02)
    assert all(c["state"] == 1 for c in calls)
    assert statistics.median(c["late"] for c in calls) <= LATE_S


def test_a_stalled_game_is_still_confirmed_and_then_relearned() -> None:
    """A 300 ms hitch: the prediction is contradicted, the client falls back to plain
    polls for that call, and later calls are cheap again."""
    game = SimGame()
    client = client_for(game)
    run_calls(game, client, 30)
    game.stall_until = game.now + 0.3
    game.phase += 0.3 + game.period / 3  # the loop resumes late, on a new phase
    during = run_calls(game, client, 1, max_gap=0.0)
    assert during[0]["state"] == 1
    after = run_calls(game, client, 40)[15:]
    assert statistics.mean(c["health"] for c in after) <= 3
    assert statistics.median(c["late"] for c in after) <= 0.001


def test_a_game_that_applies_between_frames_is_not_made_to_wait_for_one() -> None:
    game = SimGame(apply_between_frames=True)
    client = client_for(game)
    calls = run_calls(game, client, 40)[10:]
    assert client.known.applies_between_frames
    assert statistics.median(c["late"] for c in calls) <= 0.001
