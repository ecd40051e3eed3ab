"""A page that misbehaves (issue 38, the web-game wrapper's items 2, 3, 5, 6 and 8): frames
without a JavaScript context, downloads, popups, console and error floods, megabytes of
title, address and text, its hooks tampered with; each bounded, said, and the wrapper
serving throughout, nothing kept in the user's home. One wrapper on tests/peers/web/hostile
(copied, with a payload to download) serves the tests in order; memory held and hard-ended
wrappers' folders are test_browser_limits.py's."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from game_bridge_mcp.game.browser._chromium import SCRATCH_PREFIX
from launch_helpers import ProcessGuard, wait_until
from web_helpers import PAGES, Wrapped, wrapped

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def short_dir() -> Path:
    """A TMPDIR with a short path (the browser puts Unix sockets in it: at most 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="gbt-"))


@pytest.fixture(scope="module")
def scratch_tmp() -> Iterator[Path]:
    path = short_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory, scratch_tmp: Path) -> Iterator[Wrapped]:
    root = tmp_path_factory.mktemp("hostile") / "game"
    shutil.copytree(PAGES / "hostile", root)
    (root / "payload.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    guard = ProcessGuard(tmp_path_factory.mktemp("hostile-guard"))
    home = scratch_tmp / "home"
    home.mkdir()
    with wrapped(guard, "--size", "320x240", str(root), env={"TMPDIR": str(scratch_tmp), "HOME": str(home)}) as running:
        yield running
    guard.check()


def run(game: Wrapped, command: str) -> Any:
    done = game.outcome(game.send(f"cmd={command}"))
    assert done["ok"] is True, done
    return done["result"]


def steps_still(game: Wrapped, frames: int = 3) -> dict[str, Any]:
    """The page still steps, each step ending, and the state answers, small."""
    started = time.monotonic()
    before = game.doc("/state")["game"]["frames"]
    state = game.run(f"cmd=step&frames={frames}")
    assert state["game"]["frames"] == before + frames
    assert time.monotonic() - started < 30
    return state


def events(game: Wrapped, kind: str) -> list[dict[str, Any]]:
    return [e for e in game.events() if e["m"] == kind]


def test_an_events_frame_is_the_pages_simulation_frame_not_the_loops(game: Wrapped) -> None:
    """(issue 37: event frames were the wrapper's loop count, 273 while simFrame was 0-30.)"""
    sim = steps_still(game, 4)["simFrame"]
    assert wait_until(lambda: game.doc("/health")["frame"] > sim + 20, 20)  # the loop turns while paused
    said = run(game, "say")
    event = next(e for e in reversed(game.events()) if e["m"] == "console:log" and e["text"] == f"said at {said}")
    assert event["frame"] == game.doc("/state")["simFrame"] == sim


def test_a_wheel_where_nothing_scrolls_and_waits_on_a_picture_that_never_holds(game: Wrapped) -> None:
    """Issue 37's bad input: a wheel on a page that cannot scroll is delivered and changes
    nothing; a picture that changes every frame under {screen: stable} ends honestly at
    maxFrames with the last change's frame; a region outside the picture is a clear error."""
    import anyio

    from game_bridge_mcp.mcp_server.adapter import BridgeServer
    from loop_helpers import bridge_for
    from mcp_harness import connect, data, is_error, text

    wheel = game.send("cmd=mouse&x=50&y=50&action=wheel&dy=1200")
    state = steps_still(game, 2)
    assert game.outcome(wheel)["ok"] is True and state["game"]["scrollY"] == 0

    async def main() -> None:
        async with connect(BridgeServer(bridge_for(game.port))) as client:
            async def call(name: str, **arguments: Any) -> Any:
                return await client.call_tool("call_tool", {"name": name, "port": game.port, "arguments": arguments})

            never = data(await call("advance", until={"screen": "stable", "frames": 5}, maxFrames=12))
            assert never["matched"] is False and never["framesAdvanced"] == 12, never
            assert never["lastChangeFrame"] == never["simFrame"], never  # it changed at the last frame too
            outside = await call("advance", until={"screen": "changes",
                                                   "region": {"x": 400, "y": 0, "width": 10, "height": 10}})
            assert is_error(outside) and "not inside the 320x240 picture" in text(outside), text(outside)
            assert data(await call("advance", frames=2))["framesAdvanced"] == 2  # still serving

    anyio.run(main)


def test_frames_without_a_javascript_context_leave_the_steps_going(game: Wrapped) -> None:
    assert run(game, "frames") == "framed"
    for _ in range(3):
        steps_still(game)
    started = time.monotonic()  # input goes on being delivered too (key and advance timed out)
    pressed, clicked = game.send("cmd=key&key=a&frames=2"), game.send("cmd=mouse&x=10&y=10")
    steps_still(game)
    assert game.outcome(pressed)["ok"] is True and game.outcome(clicked)["ok"] is True
    assert game.doc("/state")["browser"]["keysDown"] == [] and time.monotonic() - started < 30


def test_a_download_is_refused_and_said_and_nothing_is_written(game: Wrapped, scratch_tmp: Path) -> None:
    assert run(game, "download") == "asked"
    steps_still(game)
    assert wait_until(lambda: events(game, "download:refused"), 10), game.events()
    refused = events(game, "download:refused")[-1]
    assert refused["url"].endswith("/payload.bin") and refused["name"] == "payload.bin"
    assert game.doc("/state")["browser"]["downloadsRefused"] == 1
    written = [p for p in scratch_tmp.rglob("*") if p.is_file() and p.stat().st_size >= 1024 * 1024]
    assert written == [], written


def test_popups_are_refused_in_the_page(game: Wrapped) -> None:
    assert run(game, "popups") == 0  # window.open gave nothing back
    steps_still(game)
    assert wait_until(lambda: sum(e["count"] for e in events(game, "popup:refused")) == 1001, 10), game.events()
    assert not events(game, "popup")  # none was opened (and closed) at all


def test_console_and_error_floods_are_cut_and_summarised(game: Wrapped) -> None:
    started = time.monotonic()
    assert run(game, "flood") == "flooded"
    state = steps_still(game, 5)
    assert time.monotonic() - started < 30
    logged = [e for e in game.events() if e["m"] == "console:log" and e["text"].startswith("line ")]
    assert 0 < len(logged) <= 50
    dropped = events(game, "console:dropped")
    assert sum(e["messages"] for e in dropped) >= 100000 - 50
    assert sum(e["errors"] for e in dropped) >= 2000 - 3 * 20  # (the rejections at once, the timers in a frame)
    assert state["browser"]["dropped"]["console"] >= 100000 - 50
    assert len(json.dumps(game.doc("/events?since=0&limit=1000"))) < 500_000


def test_megabytes_of_title_address_and_text_are_capped_in_every_answer(game: Wrapped) -> None:
    # (10 MB of visible text: laying it out is the browser's own work, seconds under load, once)
    huge = game.send("cmd=huge")
    assert wait_until(lambda: game.doc(f"/state?after={huge}&waitMs=5000")["completedCommandId"] >= huge, 120)
    assert game.outcome(huge) == {"id": huge, "ok": True, "result": "huge"}
    steps_still(game, 1)
    started = time.monotonic()  # then every look reads a bounded part of it: steps as before
    for _ in range(5):
        steps_still(game, 1)
    assert time.monotonic() - started < 30
    status, _headers, body = game.get("/state")
    assert status == 200 and len(body) < 200_000, len(body)
    state = json.loads(body)
    browser = state["browser"]
    assert state["game"]["title"] == 10 * 1024 * 1024  # (the page's own)
    assert len(browser["title"]) <= 303 and len(browser["url"]) <= 2003
    assert len(state["ui"]["text"]) <= 603 and len(browser["text"]) <= 20_003
    assert browser["pageTextLength"] > 20_000 and len(state["events"][-1].get("url", "")) <= 503


def test_the_wrappers_hooks_cannot_be_replaced_or_faked(game: Wrapped) -> None:
    took = run(game, "tamper")
    assert took == {"replaced": False, "run": False, "deleted": False, "open": False, "title": "Fake Title"}
    state = steps_still(game)
    assert state["browser"]["title"] != "Fake Title" and state["browser"]["url"].startswith(
        "http://game-bridge.localhost/index.html")
    status, headers, png = game.get("/screenshot")
    assert status == 200 and png[:4] == b"\x89PNG"


def test_nothing_of_the_browser_is_kept_in_the_users_home(game: Wrapped, scratch_tmp: Path) -> None:
    steps_still(game)
    left = [p.name for p in (scratch_tmp / "home").iterdir() if p.name != ".game-bridge"]  # (the kit's registry)
    assert left == []  # no ~/.config/chromium (its Crash Reports), no ~/.cache, no ~/.pki
    kept = [p.name for p in scratch_tmp.iterdir() if p.name != "home"]
    assert len(kept) == 1 and kept[0].startswith(SCRATCH_PREFIX), kept  # everything of the run in one folder
