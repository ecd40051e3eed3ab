"""The same inputs at the same frames give the same page (issue 35): a page of our own
(tests/peers/web/same) that draws from Math.random and crypto, shows its date and
performance.now, and runs CSS animations and a transition whose events change what it
shows, launched twice paused and driven alike: byte-identical screenshots and state at
every checkpoint, whether the frames come one step at a time or in one step; its date is
today's; another seed gives another page."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from launch_helpers import ProcessGuard
from web_helpers import PAGES, Wrapped, frames_until, wrapped

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SAME = PAGES / "same"
#: Frames at which both runs are compared, and the input sent there.
CHECKPOINTS = (1, 17, 42, 43, 60, 97, 130, 160)
INPUTS = {17: "cmd=key&key=space", 60: "cmd=key&key=a&frames=4", 97: "cmd=key&key=t"}


@pytest.fixture
def guard(tmp_path: Path) -> Iterator[ProcessGuard]:
    guard = ProcessGuard(tmp_path)
    yield guard
    guard.check()


def drive(game: Wrapped, *, singles: bool) -> list[tuple[bytes, dict[str, Any]]]:
    """Run to each checkpoint (one frame per step, or one step per stretch), then look."""
    seen = []
    frame = 0
    for checkpoint in CHECKPOINTS:
        while frame < checkpoint:
            frames = 1 if singles else checkpoint - frame
            game.send(f"cmd=step&frames={frames}")  # (a key press completes some frames on: not waited for)
            frame += frames
            assert frames_until(game, lambda state: state["simFrame"] >= frame)
            assert game.doc("/state")["simFrame"] == frame
        status, _headers, png = game.get("/screenshot")
        assert status == 200
        seen.append((png, game.doc("/state")["game"]))
        if checkpoint in INPUTS:
            game.send(INPUTS[checkpoint])
    return seen


def test_two_launches_driven_alike_are_the_same_page_at_every_checkpoint_whatever_the_steps(
        guard: ProcessGuard) -> None:
    before = time.time()
    with wrapped(guard, "--size", "320x240", str(SAME)) as first:
        browser = first.doc("/state")["browser"]
        start_ms = browser["startMs"]
        assert browser["seed"] == 0 and browser["url"] == "http://game-bridge.localhost/index.html"
        singles = drive(first, singles=True)
    with wrapped(guard, "--size", "320x240", "--date", str(start_ms), str(SAME)) as second:
        assert second.doc("/state")["browser"]["startMs"] == start_ms
        stretches = drive(second, singles=False)

    # the page's date is today's: the launch's wall-clock time (not a number read as seconds)
    game = singles[0][1]
    assert before * 1000 - 1000 <= start_ms <= time.time() * 1000
    assert game["started"]["date"] == dt.datetime.fromtimestamp(start_ms / 1000, dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    assert game["started"]["now"] == 0  # performance.now is 0 before the first frame
    # the time grid: frame k at ceil(k * 1000 / 60) ms of page time, Date with it
    for (_png, state), checkpoint in zip(singles, CHECKPOINTS):
        if checkpoint > 97:
            break  # (the page reloads after that)
        assert state["perf"] == (1000 * checkpoint + 59) // 60
        assert state["date"] == start_ms + (1000 * checkpoint + 59) // 60
    # CSS animation events happened, and changed the page (the transition they start)
    before_reload = singles[CHECKPOINTS.index(97)][1]
    assert any(line.startswith("end grow @") for line in before_reload["log"]), before_reload["log"]
    assert any(line.startswith("moved @") for line in before_reload["log"]), before_reload["log"]
    assert before_reload["spins"] >= 2

    for index, ((png_a, state_a), (png_b, state_b)) in enumerate(zip(singles, stretches)):
        assert state_a == state_b, f"checkpoint {CHECKPOINTS[index]}: the pages' states differ"
        assert png_a == png_b, f"checkpoint {CHECKPOINTS[index]}: the screenshots differ"
    assert len({png for png, _state in singles}) == len(CHECKPOINTS)  # and the page did change between them

    # the page reloaded itself 100 ms after T (sent at frame 97: in frame 103, at 1717 ms): the
    # new document's Date goes on from there, its performance.now starts at 0, its frames at
    # 104, its random numbers are new ones
    reloaded = singles[-2][1]
    assert reloaded["reloads"] == 1 and reloaded["frames"] == 130 - 103
    assert reloaded["started"]["date"] == dt.datetime.fromtimestamp(
        (start_ms + 1717) / 1000, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert reloaded["perf"] == (1000 * 27 + 59) // 60
    assert reloaded["date"] == start_ms + 1717 + reloaded["perf"]
    assert reloaded["started"]["random"] != game["started"]["random"]


def test_the_seed_and_the_date_are_the_launchs(guard: ProcessGuard) -> None:
    with wrapped(guard, "--size", "320x240", "--date", "2024-10-31T18:30:00Z", str(SAME),
                 env={"GAME_BRIDGE_SEED": "7", "GAME_BRIDGE_DATE": "2001-01-01"}) as game:
        state = game.doc("/state")
        assert state["browser"]["seed"] == 7 and state["browser"]["startDate"] == "2024-10-31T18:30:00.000Z"
        # the seed is in the version: a state or trace of another seed is another build to the bridge
        assert game.doc("/tools")["game"]["version"].endswith(", seed 7")
        seven = state["game"]
        assert seven["started"]["date"] == "2024-10-31T18:30:00.000Z"
    with wrapped(guard, "--size", "320x240", str(SAME)) as game:
        zero = game.doc("/state")["game"]
    assert seven["started"]["random"] != zero["started"]["random"]
    assert seven["bytes"] != zero["bytes"] and seven["uuid"] != zero["uuid"]
    assert len(seven["uuid"]) == 36 and seven["uuid"][14] == "4"
