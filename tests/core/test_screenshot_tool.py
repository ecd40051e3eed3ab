"""``get_screenshot``: the game's screen as an MCP image block plus a text block, against the
hand-made reference game (written from docs/contract.md, not the kit) and the kit's demo;
``changed``, the private saved copies and their pruning, Pillow's scaling and its absence,
and every bad input and lying game with a clear error while the bridge keeps serving."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.core.screenshot import IMAGE_KEY, ImagePayload, prune
from game_bridge_mcp.errors import BridgeError, BridgeUsageError, GameOffline, NotAGameSurface
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from mcp_harness import connect, dump, is_error, run, structured, text
from peers.handmade import HandmadeGame
from peers.kitfakes import REPO, demo_process
from png_helpers import read_png

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return tmp_path / "shots"


def bridge_for(port: int, shots: Path, **config: Any) -> Bridge:
    return Bridge(Config(port=port, scan=False, registry=False, environ={"GAME_BRIDGE_SCREENSHOTS": str(shots)},
                         **config))


def screenshot(bridge: Bridge, **arguments: Any) -> dict[str, Any]:
    return bridge.run_tool("call_tool", {"name": "get_screenshot", "arguments": arguments})


def files(directory: Path) -> list[Path]:
    return sorted(directory.iterdir()) if directory.exists() else []


# --------------------------------------------------------------------------- what it returns

def test_the_picture_and_its_text_block(shots: Path) -> None:
    with HandmadeGame(hz=200, size=(400, 300)) as game:
        bridge = bridge_for(game.port, shots)
        before = bridge.run_tool("call_tool", {"name": "get_health"})["frame"]
        result = screenshot(bridge)
        image = result.pop(IMAGE_KEY)
        assert isinstance(image, ImagePayload) and image.mime == "image/png"
        width, height, _colour, _depth, _pixels = read_png(image.data)
        assert (width, height) == (400, 300)  # within the default 768x768: never scaled up
        assert result["frame"] > before
        assert result == {"port": game.port, "frame": result["frame"], "width": 400, "height": 300, "format": "png",
                          "bytes": len(image.data), "changed": True, "file": result["file"],
                          "window": {"width": 400, "height": 300}}
        saved = Path(result["file"])
        assert saved.read_bytes() == image.data and saved.parent == shots
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and stat.S_IMODE(shots.stat().st_mode) == 0o700
        small = screenshot(bridge, maxWidth=100, maxHeight=100)
        assert (small["width"], small["height"]) == (100, 75)
        assert any("maxWidth=100&maxHeight=100" in path for path in game.requests)
        assert [p.name for p in files(shots) if p.name.startswith(".")] == []


def test_changed_is_false_for_the_same_picture_and_reset_by_a_restart(shots: Path) -> None:
    game = HandmadeGame(hz=200).start()
    port = game.port
    try:
        bridge = bridge_for(port, shots)
        assert IMAGE_KEY in screenshot(bridge)
        same = screenshot(bridge)
        assert same["changed"] is False and IMAGE_KEY not in same  # nothing new to look at: no image
        assert "no image was sent" in same["note"] and Path(same["file"]).is_file()
        forced = screenshot(bridge, always=True)
        assert forced["changed"] is False and IMAGE_KEY in forced
        bridge.run_tool("call_tool", {"name": "move", "arguments": {"dx": 2}})  # the red block moves
        assert screenshot(bridge)["changed"] is True
        assert screenshot(bridge)["changed"] is False
    finally:
        game.stop()
    with HandmadeGame(hz=200, port=port) as again:  # a new process on the port: frame starts over
        again.x = 2
        assert again.frame < 1000
        assert screenshot(bridge)["changed"] is True


def test_a_game_without_the_feature_is_told_how_to_add_it(shots: Path) -> None:
    with HandmadeGame(features={"results"}) as game:
        bridge = bridge_for(game.port, shots)
        with pytest.raises(BridgeUsageError) as caught:
            screenshot(bridge)
        message = caught.value.render()
        assert "does not serve screenshots" in message and "GameBridge(..., screenshot=capture)" in message
        assert not any(path.startswith("/screenshot") for path in game.requests)  # never asked
        assert files(shots) == []


def test_a_game_that_cannot_render_says_why(shots: Path) -> None:
    with HandmadeGame(unavailable="the window is minimised") as game:
        bridge = bridge_for(game.port, shots)
        with pytest.raises(BridgeUsageError) as caught:
            screenshot(bridge)
        assert "cannot show its screen right now: the window is minimised" in caught.value.render()
        assert caught.value.fields["reason"] == "the window is minimised"


@pytest.mark.parametrize("arguments, message", [
    ({"maxWidth": -1}, "'maxWidth' must be between 1 and 1568, not -1"),
    ({"maxWidth": 0}, "'maxWidth' must be between 1 and 1568, not 0"),
    ({"maxHeight": 1569}, "'maxHeight' must be between 1 and 1568, not 1569"),
    ({"maxWidth": 10 ** 12}, "'maxWidth' must be between 1 and 1568"),
    ({"maxWidth": "wide"}, "'maxWidth' must be of type integer, not 'wide'"),
    ({"maxWidth": 1.5}, "'maxWidth' must be of type integer, not 1.5"),
    ({"maxWidth": True}, "'maxWidth' must be of type integer, not True"),
    ({"scale": 2}, "unknown argument 'scale'"),
])
def test_bad_limits_are_refused_naming_the_argument(shots: Path, arguments: dict[str, Any], message: str) -> None:
    with HandmadeGame() as game:
        bridge = bridge_for(game.port, shots)
        with pytest.raises(BridgeUsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
            screenshot(bridge, **arguments)
        assert not any(path.startswith("/screenshot") for path in game.requests)


# --------------------------------------------------------------------------- lying games

@pytest.mark.slow
@pytest.mark.parametrize("lie, error, message", [
    ("screenshot-not-image", NotAGameSurface, "did not answer a usable image: the body is not a PNG or JPEG image"),
    ("screenshot-wrong-type", NotAGameSurface, "the answer is text/plain, not image/png or image/jpeg"),
    ("screenshot-truncated", NotAGameSurface, "the PNG is truncated"),
    ("screenshot-ihdr-mismatch", NotAGameSurface, "IHDR says 640x480"),
    ("screenshot-huge", NotAGameSurface, "sent an image over the bridge's 20 MB cap"),
    ("screenshot-503-bad", NotAGameSurface, "answered 503 without"),
    ("screenshot-never", GameOffline, "GET /screenshot did not complete within 1000ms"),
])
def test_each_lying_answer_is_a_clear_error_and_the_bridge_keeps_serving(
        shots: Path, lie: str, error: type[BridgeError], message: str) -> None:
    with HandmadeGame(hz=200, lies={lie}) as game:
        bridge = bridge_for(game.port, shots, timeout_ms=1000)
        with pytest.raises(error) as caught:
            screenshot(bridge)
        assert message in caught.value.render(), caught.value.render()
        assert bridge.run_tool("call_tool", {"name": "get_health"})["ok"] is True
        assert files(shots) == []  # nothing saved, nothing half-written


def test_no_frame_header_is_a_note_not_a_failure(shots: Path) -> None:
    with HandmadeGame(lies={"screenshot-no-frame"}) as game:
        result = screenshot(bridge_for(game.port, shots))
    assert result["frame"] is None and "no X-Game-Frame header" in result["note"]


def test_an_image_larger_than_asked_is_scaled_by_pillow(shots: Path) -> None:
    with HandmadeGame(size=(640, 480), lies={"screenshot-oversize"}) as game:
        result = screenshot(bridge_for(game.port, shots), maxWidth=200, maxHeight=200)
    assert (result["width"], result["height"]) == (200, 150)
    assert read_png(result[IMAGE_KEY].data)[:2] == (200, 150)
    assert "The game sent 640x480, larger than the 200x200 asked for; the bridge scaled it down." == result["note"]


def test_without_pillow_it_is_returned_as_sent_with_a_note(shots: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL now raises ImportError
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with HandmadeGame(size=(640, 480), lies={"screenshot-oversize"}) as game:
        result = screenshot(bridge_for(game.port, shots), maxWidth=200, maxHeight=200)
    assert (result["width"], result["height"]) == (640, 480)
    assert "it is returned as sent" in result["note"] and "game-bridge-mcp[images]" in result["note"]


def test_without_a_private_directory_there_is_no_file_and_a_note(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the directory should be")
    with HandmadeGame() as game:
        result = screenshot(bridge_for(game.port, blocker))
    assert result["file"] is None and "No copy was saved" in result["note"]
    assert result[IMAGE_KEY].data.startswith(b"\x89PNG")


def test_prune_keeps_the_newest_within_count_size_and_age(tmp_path: Path) -> None:
    now = time.time()

    def make(name: str, size: int, age_s: float) -> Path:
        path = tmp_path / name
        path.write_bytes(b"x" * size)
        os.utime(path, (now - age_s, now - age_s))
        return path

    old = make("screenshot-1-old.png", 10, 8 * 24 * 3600)
    newest = [make(f"screenshot-1-{i}.png", 100, i) for i in range(6)]
    partial_old, partial_new = make(".partial-a.png", 5, 7200), make(".partial-b.png", 5, 1)
    other = make("notes.txt", 10, 9 * 24 * 3600)
    prune(tmp_path, keep=newest[5], max_files=4, max_bytes=350)
    left = {p.name for p in tmp_path.iterdir()}
    # age drops the old one; size (350 bytes) keeps the newest three; keep= survives any rule
    assert left == {newest[0].name, newest[1].name, newest[2].name, newest[5].name, partial_new.name, other.name}
    assert not old.exists() and not partial_old.exists()


# --------------------------------------------------------------------------- over MCP, --eager, call --out

def test_over_mcp_an_image_block_follows_the_text_block(shots: Path) -> None:
    async def go() -> None:
        with HandmadeGame(hz=200) as game:
            app = BridgeServer(bridge_for(game.port, shots))
            async with connect(app) as client:
                result = await client.call_tool("call_tool", {"name": "get_screenshot",
                                                               "arguments": {"maxWidth": 160}})
                assert not is_error(result), text(result)
                block = json.loads(text(result))
                assert IMAGE_KEY not in block and (block["width"], block["height"]) == (160, 120)
                assert structured(result) == block
                assert Path(block["file"]).is_file()  # a client that shows no images still has these
                image = result.content[1]
                assert image.type == "image"
                mime = getattr(image, "mimeType", None) or getattr(image, "mime_type", None)
                assert mime == "image/png"
                data = base64.b64decode(image.data)
                assert data == Path(block["file"]).read_bytes() and read_png(data)[:2] == (160, 120)
                failed = await client.call_tool("call_tool", {"name": "get_screenshot", "arguments": {"maxWidth": 0}})
                assert is_error(failed) and "'maxWidth' must be between 1 and 1568" in text(failed)
                assert len(failed.content) == 1

    run(go)


def test_eager_advertises_it_flat(shots: Path) -> None:
    async def go() -> None:
        with HandmadeGame(hz=200) as game:
            app = BridgeServer(bridge_for(game.port, shots, eager=True))
            async with connect(app) as client:
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert "get_screenshot" in listed
                schema = dump(listed["get_screenshot"])["inputSchema"]
                assert schema["properties"]["maxWidth"]["maximum"] == 1568
                result = await client.call_tool("get_screenshot", {"maxHeight": 60})
                assert not is_error(result), text(result)
                assert json.loads(text(result))["height"] == 60 and result.content[1].type == "image"

    run(go)


def call(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GAME_BRIDGE_HOME": str(tmp_path / "home"),
           "GAME_BRIDGE_SCREENSHOTS": str(tmp_path / "shots")}
    env.pop("GAME_BRIDGE_PORT", None)
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)


def test_call_out_writes_the_image(tmp_path: Path) -> None:
    with HandmadeGame(hz=200) as game:
        out = call(tmp_path, "get_screenshot", '{"maxWidth": 64}', "--port", str(game.port), "--out",
                   str(tmp_path / "shot.png"))
        assert out.returncode == 0, out.stderr
        body = json.loads(out.stdout)
        assert body["out"] == str(tmp_path / "shot.png") and IMAGE_KEY not in body
        assert read_png((tmp_path / "shot.png").read_bytes())[:2] == (64, 48)
        refused = call(tmp_path, "get_health", "--port", str(game.port), "--out", str(tmp_path / "h.png"))
        assert refused.returncode == 2 and "'get_health' returned none" in refused.stderr
        assert not (tmp_path / "h.png").exists()


# --------------------------------------------------------------------------- the kit's demo

@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Any]:
    with demo_process("--hz", "120", env={"GAME_BRIDGE_HOME": str(tmp_path / "home")}) as running:
        yield running


def test_the_kits_demo_shows_its_board(demo: Any, shots: Path) -> None:
    async def go() -> None:
        app = BridgeServer(bridge_for(demo.port, shots))
        async with connect(app) as client:
            result = await client.call_tool("call_tool", {"name": "get_screenshot"})
            assert not is_error(result), text(result)
            block = json.loads(text(result))
            assert block["format"] == "png" and block["width"] <= 768 and block["height"] <= 768
            assert block["frame"] is not None and block["changed"] is True
            data = base64.b64decode(result.content[1].data)
            assert read_png(data)[:2] == (block["width"], block["height"])
            again = json.loads(text(await client.call_tool("call_tool", {"name": "get_screenshot"})))
            assert again["changed"] is False  # a menu that does not move

    run(go)


def test_pillow_scales_a_jpeg_as_a_jpeg(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    import pygame

    from game_bridge_mcp.core.screenshot import scale_down
    from game_bridge_mcp.wire.images import inspect_image

    surface = pygame.Surface((400, 300))
    surface.fill((30, 90, 200))
    out = io.BytesIO()
    pygame.image.save(surface, out, "x.jpg")
    body = out.getvalue()
    scaled = scale_down(body, inspect_image(body, "image/jpeg"), 100, 100)
    assert scaled is not None
    data, info = scaled
    assert (info.format, info.width, info.height) == ("jpeg", 100, 75) and data.startswith(b"\xff\xd8\xff")


def test_the_demos_screenshot_says_the_window(shots: Path) -> None:
    from loop_helpers import demo_game

    with demo_game() as (port, _game):
        result = screenshot(bridge_for(port, shots))
        assert result["window"] == {"width": 384, "height": 616} and result[IMAGE_KEY].data.startswith(b"\x89PNG")
