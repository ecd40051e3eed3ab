"""The confirmation strategies on their own: each is given the endpoints it asks (a
recording stand-in for the GameClient here), what is known of the port, a frame clock and
a clock, and nothing else; what each asks, and what it answers, is checked call by call."""

from __future__ import annotations

from typing import Any

import pytest

from game_bridge_mcp.contract import CONFIRMED_BY_FRAMES, CONFIRMED_BY_ID
from game_bridge_mcp.errors import CommandTimeout
from game_bridge_mcp.wire.frames import FrameClock
from game_bridge_mcp.wire.held import MAX_WAIT_MS, Held
from game_bridge_mcp.wire.known import Known
from game_bridge_mcp.wire.polls import HEALTH, STATE, Polling
from game_bridge_mcp.wire.strategy import Job


class Clock:
    """Time that moves only when slept through or when a request takes ``cost`` seconds."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class Endpoints:
    """The Requests a strategy is given: answers scripted per endpoint, every call recorded."""

    def __init__(self, clock: Clock, *, health: list[dict] | None = None, state: list[dict] | None = None,
                 held: list[tuple[dict, float]] | None = None) -> None:
        self.clock = clock
        self.health_answers = list(health or [])
        self.state_answers = list(state or [])
        self.held_answers = list(held or [])
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def health(self, *, timeout_ms: int | None = None) -> dict:
        self.calls.append(("health", {"timeout_ms": timeout_ms}))
        return self.health_answers.pop(0) if len(self.health_answers) > 1 else self.health_answers[0]

    def state(self, *, timeout_ms: int | None = None, max_bytes: int = 0, digest: bool = False) -> dict:
        self.calls.append(("state", {"digest": digest}))
        return self.state_answers.pop(0) if len(self.state_answers) > 1 else self.state_answers[0]

    def held_state(self, command_id: int, wait_ms: int, *, view: bool, timeout_s: float) -> dict:
        self.calls.append(("held", {"command_id": command_id, "wait_ms": wait_ms, "view": view}))
        answer, takes_s = self.held_answers.pop(0)
        self.clock.now += takes_s
        return answer

    def command(self, cmd: str, args: Any = None, *, timeout_ms: int | None = None) -> dict:
        raise AssertionError("a strategy never sends the command")

    def kinds(self) -> list[str]:
        return [name for name, _ in self.calls]


def job(clock: Clock, *, command_id: int | None = 7, queued_frame: int | None = 10, total_ms: int = 1000,
        digest: bool = False) -> Job:
    return Job("move", command_id, queued_frame, clock() + total_ms / 1000, total_ms, {"accepted": True},
               digest=digest)


def known_with(*features: str, health_has_completed_id: bool | None = None) -> Known:
    known = Known(9999)
    known.features = frozenset(features)
    known.health_has_completed_id = health_has_completed_id
    return known


def test_held_asks_once_and_answers_with_the_state_that_shows_the_command_done() -> None:
    clock = Clock()
    known = known_with("after", "view")
    endpoints = Endpoints(clock, held=[({"frame": 11, "completedCommandId": 7}, 0.004)])
    outcome = Held(endpoints, known, clock=clock).confirm(job(clock, digest=True))
    assert outcome is not None and outcome["confirmation"] == CONFIRMED_BY_ID
    assert outcome["state"] == {"frame": 11, "completedCommandId": 7}
    ((name, args),) = endpoints.calls
    assert name == "held" and args["command_id"] == 7 and args["view"] is True
    assert 0 < args["wait_ms"] < 1000 and args["wait_ms"] <= MAX_WAIT_MS  # some of the deadline kept back


def test_held_gives_up_on_a_game_that_answers_early_without_the_command() -> None:
    clock = Clock()
    known = known_with("after")
    endpoints = Endpoints(clock, held=[({"frame": 10, "completedCommandId": 6}, 0.001)])
    assert Held(endpoints, known, clock=clock).confirm(job(clock)) is None  # the caller polls instead
    assert "after" in known.broken_features and not known.uses("after")


def test_held_says_the_deadline_passed() -> None:
    clock = Clock()
    known = known_with("after")
    endpoints = Endpoints(clock, held=[({"frame": 10, "completedCommandId": 6}, 1.0)])
    with pytest.raises(CommandTimeout):
        Held(endpoints, known, clock=clock).confirm(job(clock))


def test_polling_asks_the_tiny_health_until_it_reports_the_command_then_state_once() -> None:
    clock = Clock()
    known = known_with(health_has_completed_id=True)
    known.state_cost_s = 0.004  # a /state costs far more than a /health here
    known.health_cost_s = 0.0002
    endpoints = Endpoints(clock, health=[{"frame": 10, "completedCommandId": 6}, {"frame": 10, "completedCommandId": 6},
                                         {"frame": 11, "completedCommandId": 7}],
                          state=[{"frame": 11, "completedCommandId": 7}])
    polling = Polling(endpoints, known, FrameClock(), clock=clock, sleep=clock.sleep)
    assert polling.poll_for(7) is HEALTH and polling.poll_for(None) is STATE
    outcome = polling.confirm(job(clock))
    assert outcome["confirmation"] == CONFIRMED_BY_ID
    assert endpoints.kinds() == ["health", "health", "health", "state"]


def test_polling_without_completed_id_in_health_polls_state_and_confirms_by_frames() -> None:
    clock = Clock()
    known = known_with(health_has_completed_id=False)
    endpoints = Endpoints(clock, health=[{"frame": 10}], state=[{"frame": 10}, {"frame": 11}, {"frame": 12}])
    polling = Polling(endpoints, known, FrameClock(), clock=clock, sleep=clock.sleep)
    outcome = polling.confirm(job(clock, command_id=None))
    assert outcome["confirmation"] == CONFIRMED_BY_FRAMES
    assert endpoints.kinds() == ["state", "state", "state"]  # a cheap /state is polled itself


def test_polling_reports_a_restart_while_the_command_was_pending() -> None:
    clock = Clock()
    known = known_with(health_has_completed_id=False)
    endpoints = Endpoints(clock, health=[{"frame": 10}], state=[{"frame": 3}])
    polling = Polling(endpoints, known, FrameClock(), clock=clock, sleep=clock.sleep)
    with pytest.raises(CommandTimeout, match="restarted"):
        polling.confirm(job(clock, command_id=None))
