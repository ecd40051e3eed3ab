"""The browser wrapper on a page of our own (tests/peers/web), in real headless Chromium:
the page's clock held and stepped exactly (animation frames, Date, performance.now,
setInterval, a CSS animation), real key and pointer input on frames, screenshots,
state, the console and misbehaviour as events. One wrapper serves the tests of this
file in order (a browser launch is the expensive part); the guard checks at the end
that nothing of it is left."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Iterator

import pytest

from launch_helpers import ProcessGuard, wait_until
from web_helpers import PAGES, Wrapped, wrapped

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wrapped]:
    guard = ProcessGuard(tmp_path_factory.mktemp("browser-guard"))
    with wrapped(guard, "--size", "320x240", str(PAGES)) as running:
        yield running
    guard.check()


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def game_state(game: Wrapped) -> dict[str, Any]:
    return dict(game.doc("/state")["game"])


@pytest.mark.slow
def test_a_paused_page_stands_still_in_real_time(game: Wrapped) -> None:
    start = game.doc("/state")
    assert start["paused"] is True and start["simFrame"] == 0
    assert start["browser"]["title"] == "Web Peer" and start["browser"]["url"] == "http://game-bridge.localhost/index.html"
    assert start["game"]["frames"] == 0  # paused before the page's first frame
    assert start["browser"]["canvases"][0]["width"] == 200 and start["browser"]["window"] == {"width": 320, "height": 240}
    assert "frames 0" in start["ui"]["text"]
    # half a second of the wrapper's loop later (frame is its liveness counter), nothing moved
    assert wait_until(lambda: game.doc("/health")["frame"] >= start["frame"] + 30, 20)
    later = game_state(game)
    for clock in ("frames", "dateMs", "perfMs", "ticks", "bar"):
        assert later[clock] == start["game"][clock], clock


def test_step_runs_exactly_its_frames_of_page_time(game: Wrapped) -> None:
    first = game.run("cmd=step&frames=1")  # the page loaded a few ms into its first frame
    assert first["game"]["frames"] == 1 and first["game"]["dateMs"] <= 17
    before = game.doc("/state")
    after = game.run("cmd=step&frames=12")
    assert after["simFrame"] == before["simFrame"] + 12
    assert after["game"]["frames"] == before["game"]["frames"] + 12
    assert after["game"]["stampSteps"][-1] == pytest.approx(1000 / 60, abs=0.01)  # frames 1/60 s apart
    assert after["game"]["dateMs"] - before["game"]["dateMs"] == 200  # 12 frames of Date
    assert after["game"]["ticks"] - before["game"]["ticks"] == 2  # setInterval(100) fired twice in 200 ms
    assert "frames 13" in after["ui"]["text"]  # state is read after the frames, before the step completes
    assert after["paused"] is True
    # a long step: the same exactness in chunks
    long = game.run("cmd=step&frames=700")
    assert long["game"]["frames"] == after["game"]["frames"] + 700
    assert long["simFrame"] == after["simFrame"] + 700


def test_css_animations_follow_the_page_clock(game: Wrapped) -> None:
    # the bar grows 300 px over 1000 ms of its own time; after 713 frames (11.9 s) it is done
    assert game_state(game)["bar"] == 300
    # (its start was frozen while paused: that it reached the end through steps is the check)


def test_a_held_key_moves_the_mover_one_pixel_a_frame(game: Wrapped) -> None:
    x0 = game_state(game)["x"]
    press = game.send("cmd=key&key=right&frames=5")
    assert wait_until(lambda: game.doc("/state")["browser"]["keysDown"] == ["right"], 10)
    assert game.doc("/health")["completedCommandId"] < press  # held: waits for frames
    game.run("cmd=step&frames=8")
    assert game.outcome(press)["result"] == {"key": "right", "action": "press", "frames": 5}
    assert game_state(game)["x"] == x0 + 5
    assert game.doc("/state")["browser"]["keysDown"] == []
    down = game.send("cmd=key&key=ArrowRight&action=down")
    game.run("cmd=step&frames=3")
    assert game.outcome(down)["ok"] is True
    up = game.send("cmd=key&key=right&action=up")  # a paused page: the up completes once a frame ran
    game.run("cmd=step&frames=1")
    assert game.outcome(up)["ok"] is True
    assert game_state(game)["x"] == x0 + 5 + 3
    events = [e for e in game.events() if e["m"] == "console:log"]
    assert any(e["text"] == "keydown ArrowRight ArrowRight" for e in events)


def test_bad_input_is_refused_with_what_is_valid(game: Wrapped) -> None:
    bad = game.outcome(game.send("cmd=key&key=nosuchkey"))
    assert bad["ok"] is False and "unknown key name 'nosuchkey'" in bad["error"]
    assert "left shift" in bad["error"] and "ArrowLeft" in bad["error"]
    outside = game.outcome(game.send("cmd=mouse&x=500&y=10"))
    assert outside["ok"] is False and "outside the 320x240 window" in outside["error"]
    assert game.doc("/command?cmd=mouse&x=1&y=1&button=7")["accepted"] is False


def test_mouse_and_text_arrive_as_browser_input(game: Wrapped) -> None:
    click = game.send("cmd=mouse&x=30&y=45")
    game.run("cmd=step&frames=2")
    assert game.outcome(click)["ok"] is True
    assert game_state(game)["clicks"][-1] == [30, 45, 0]
    field = game.doc("/state")["browser"]
    assert field["pointer"] == [30, 45]
    # focus the text field (below the canvas and the text) by clicking it, then type
    state = game.doc("/state")
    assert state["browser"]["viewport"]["width"] == 320
    typed = game.send("cmd=mouse&x=60&y=160")
    game.run("cmd=step&frames=2")
    game.outcome(typed)
    text = game.send("cmd=text&text=Hi%20you")
    game.run("cmd=step&frames=1")
    assert game.outcome(text)["result"] == {"characters": 6}
    assert game_state(game)["field"] == "Hi you", game.doc("/state")["game"]


def test_screenshots_are_the_page_scaled_to_fit_and_change_with_it(game: Wrapped) -> None:
    status, headers, body = game.get("/screenshot")
    assert status == 200 and headers["content-type"] == "image/png"
    assert png_size(body) == (320, 240) and headers["x-game-window"] == "320x240"
    assert int(headers["x-game-frame"]) >= 1
    _s, _h, again = game.get("/screenshot")
    assert again == body  # paused: the same picture
    small = game.get("/screenshot?maxWidth=160&maxHeight=160")[2]
    assert png_size(small) == (160, 120)
    game.send("cmd=key&key=right&frames=20")
    game.run("cmd=step&frames=22")
    assert game.get("/screenshot")[2] != body  # the mover moved


def test_misbehaviour_is_reported_as_events(game: Wrapped, tmp_path: Path) -> None:
    for key in ("d", "e", "w"):
        game.send(f"cmd=key&key={key}")
    game.run("cmd=step&frames=3")  # (the error is thrown from a timer: it needs page time too)
    assert wait_until(lambda: {"dialog:alert", "pageerror", "console:warning"}
                      <= {e["m"] for e in game.events()}, 10), game.events()
    events = game.events()
    dialog = next(e for e in events if e["m"] == "dialog:alert")
    assert dialog["text"] == "hello from the page" and dialog["dismissed"] is True
    assert "boom from a timer" in next(e for e in events if e["m"] == "pageerror")["error"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    browser = game.doc("/state")["browser"]
    assert browser["pageErrors"] >= 1 and browser["dialogs"] == 1 and browser["consoleWarnings"] == 1
    assert game.run("cmd=step&frames=1")["paused"] is True  # and the page plays on


def test_the_pages_own_commands_are_published_and_run_in_the_page(game: Wrapped) -> None:
    tools = game.doc("/tools")
    page = next(t for t in tools["toolsets"] if t["name"] == "page")
    teleport = next(c for c in page["tools"] if c["name"] == "teleport")
    assert teleport["description"] == "Put the mover at x."
    assert teleport["inputSchema"]["properties"]["x"] == {"type": "integer", "minimum": 0, "maximum": 199}
    assert teleport["inputSchema"]["required"] == ["x"]
    moved = game.outcome(game.send("cmd=teleport&x=50"))
    assert moved["result"] == {"x": 50} and game_state(game)["x"] == 50  # done, and seen done
    assert game.doc("/command?cmd=teleport&x=500")["accepted"] is False  # its bounds, at the door
    failed = game.outcome(game.send("cmd=boom"))
    assert failed["ok"] is False and failed["error"] == "no such luck"
    later = game.outcome(game.send("cmd=later"))
    assert later["ok"] is True and "returned a promise" in later["result"]


@pytest.mark.slow
def test_running_the_page_runs_its_frames_and_pause_holds_it(game: Wrapped) -> None:
    start = game_state(game)["frames"]
    game.run("cmd=resume")
    assert wait_until(lambda: game_state(game)["frames"] >= start + 30, 20)
    assert wait_until(lambda: game.doc("/state")["browser"]["fps"] >= 20, 10)
    paused = game.run("cmd=pause")
    held = paused["game"]["frames"]
    assert wait_until(lambda: game.doc("/health")["frame"] >= paused["frame"] + 20, 20)
    assert game_state(game)["frames"] == held
    assert game.doc("/state")["browser"]["fps"] == 0  # held: no frames of its own (the same every run)


@pytest.mark.slow
def test_a_canvas_move_ends_when_its_picture_holds_still(game: Wrapped) -> None:
    """advance until the picture (the page's canvas: the mover moves while right is held)
    holds still, through the bridge: the hash of the canvas, every frame."""
    import anyio

    from game_bridge_mcp.mcp_server.adapter import BridgeServer
    from loop_helpers import bridge_for
    from mcp_harness import connect, data

    async def main() -> None:
        async with connect(BridgeServer(bridge_for(game.port))) as client:
            async def call(name: str, **arguments: Any) -> Any:
                return data(await client.call_tool("call_tool", {"name": name, "port": game.port,
                                                                 "arguments": arguments}))

            still = await call("advance", until={"screen": "stable", "frames": 3})
            assert still["matched"] is True and still["framesAdvanced"] == 3  # nothing moves: 3 frames
            x0 = game_state(game)["x"]
            await call("key", key="right", frames=6)
            moved = await call("advance", until={"screen": "stable", "frames": 4})
            assert moved["matched"] is True and moved["framesAdvanced"] == 6 + 4, moved  # moved 6, then held 4
            assert game_state(game)["x"] == x0 + 6
            # a region the mover is not in: nothing there changes
            await call("key", key="right", frames=3)
            away = await call("advance", until={"screen": "changes", "region": {"x": 0, "y": 0, "width": 200,
                                                                                   "height": 30}}, maxFrames=5)
            assert away["matched"] is False and away["framesAdvanced"] == 5

    anyio.run(main)


@pytest.mark.slow
def test_a_cancelled_advance_stops_at_the_next_chunk_and_lets_go_of_keys(game: Wrapped) -> None:
    """advance {frames: 10000} with a key held down, cancelled: the page stops within a
    chunk of frames (not 10000 later), the key is released, and step:interrupted says where."""
    import time

    import anyio

    from game_bridge_mcp.game.browser._page import MAX_CHUNK
    from game_bridge_mcp.mcp_server.adapter import BridgeServer
    from loop_helpers import bridge_for
    from mcp_harness import connect, data, start_call

    app = BridgeServer(bridge_for(game.port))

    async def main() -> None:
        async with connect(app) as client:
            async def call(name: str, **arguments: Any) -> Any:
                return data(await client.call_tool("call_tool", {"name": name, "port": game.port,
                                                                 "arguments": arguments}))

            await call("key", key="right", action="down")
            start = (await call("advance", frames=1))["simFrame"]
            assert game.doc("/state")["browser"]["keysDown"] == ["right"]
            async with anyio.create_task_group() as tasks:
                running = await start_call(client, tasks, "call_tool", {
                    "name": "advance", "port": game.port, "arguments": {"frames": 10000}})
                deadline = time.monotonic() + 20
                while game.doc("/state")["simFrame"] < start + 30:
                    assert time.monotonic() < deadline, "advance did not start stepping"
                    await anyio.sleep(0.01)
                cancelled_at = game.doc("/state")["simFrame"]
                await running.cancel()
                while app.calls_in_flight:
                    assert time.monotonic() < deadline, "the cancelled advance did not end"
                    await anyio.sleep(0.005)
            assert wait_until(lambda: game.doc("/state")["browser"]["keysDown"] == [], 10)
            stopped = game.doc("/state")
            assert stopped["simFrame"] <= cancelled_at + 2 * MAX_CHUNK, (cancelled_at, stopped["simFrame"])
            x = stopped["game"]["x"]
            await call("advance", frames=5)
            assert game_state(game)["x"] == x  # the key is up: the mover stays
            cut = [e for e in game.events() if e["m"] == "step:interrupted"]
            assert cut and cut[-1]["simFrame"] <= stopped["simFrame"]

    anyio.run(main)


def test_close_ends_the_wrapper_and_its_browser(game: Wrapped) -> None:
    game.doc("/command?cmd=close")
    assert game.proc is not None and game.proc.wait(30) == 0
