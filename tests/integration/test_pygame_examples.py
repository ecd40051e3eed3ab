"""Games nobody here wrote: pygame-ce's own example games, unmodified, run through the
pygame wrapper, launched and driven by the bridge over MCP (the real client on the SDK's
in-memory transport), from a gamebridge.json written by ``pygame --init``.

What is checked is what an agent would see (``get_screenshot`` over MCP): pictures of
real frames that change when input changes the game, a key press that moves the player,
a paused game that holds still and advances exactly N frames, and a clean close."""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import PYTHON, ProcessGuard, free_range, wait_until
from mcp_harness import connect, data, is_error, text
from png_helpers import read_png

pytestmark = pytest.mark.timeout(120)


def init_declaration(directory: Path, *target: str, paused: bool) -> Path:
    """``game-bridge-mcp pygame --init TARGET`` in ``directory``, then a free port range
    (and a paused start, what ``launch_instance {paused: true}`` asks for)."""
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([PYTHON, "-m", "game_bridge_mcp.game.pygame", "--init", *target], cwd=directory,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Wrote" in done.stdout, done.stderr
    path = directory / "gamebridge.json"
    doc = json.loads(path.read_text())
    assert doc["launch"]["argv"][1:6] == ["-m", "game_bridge_mcp.game.pygame", "--port", "{port}", target[0]]
    low, high = free_range(4)
    doc["launch"]["portRange"] = f"{low}-{high}"
    if paused:
        doc["launch"].setdefault("env", {})["GAME_BRIDGE_START_PAUSED"] = "1"
    path.write_text(json.dumps(doc))
    return path


class Shot:
    """A picture of the game as ``get_screenshot`` gives it over MCP: the text block's
    fields and the image block, decoded."""

    def __init__(self, block: dict[str, Any], png: bytes) -> None:
        self.block = block
        self.frame = int(block["frame"])
        window = block.get("window") or {}
        self.window = f"{window.get('width')}x{window.get('height')}" if window else None
        self.width, self.height, _colour, _depth, self.pixels = read_png(png)
        assert (self.width, self.height) == (block["width"], block["height"])

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        offset = (y * self.width + x) * 3
        return tuple(self.pixels[offset:offset + 3])  # type: ignore[return-value]

    def changed_columns(self, other: "Shot", rows: range) -> list[int]:
        return [x for x in range(self.width) if any(self.pixel(x, y) != other.pixel(x, y) for y in rows)]


def health(port: int) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request("GET", "/health")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def send(port: int, query: str) -> dict[str, Any]:
    """A command sent straight to the game, not waited for (input for a paused game,
    which completes only when frames are stepped)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request("GET", "/command?" + query)
        answer = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert answer["accepted"], answer
    return answer


def play(tmp_path: Path, guard: ProcessGuard, declaration: Path,
         script: Callable[[Any, int], Awaitable[None]]) -> None:
    """Launch the declared game over MCP, run ``script(client, port)``, stop it."""
    config = Config(environ=dict(guard.env, GAME_BRIDGE_SCREENSHOTS=str(tmp_path / "shots")),
                    registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(declaration))
    bridge = Bridge(config)

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            launched = data(await client.call_tool("launch_instance", {"timeoutMs": 60000}))
            port = launched["port"]
            await script(client, port)
            stopped = data(await client.call_tool("stop_instance", {"port": port, "graceMs": 10000}))
            assert stopped["stopped"] is True and stopped["how"] == "closed cleanly", stopped

    try:
        anyio.run(main)
    finally:
        bridge.shutdown()


async def look(client: Any, port: int, side: int = 1568) -> Shot:
    """A screenshot with its image (``always``: also when it is the same as the last)."""
    result = await client.call_tool("call_tool", {"port": port, "name": "get_screenshot",
                                                   "arguments": {"maxWidth": side, "maxHeight": side, "always": True}})
    assert not is_error(result), text(result)
    image = result.content[1]
    assert image.type == "image"
    return Shot(json.loads(text(result)), base64.b64decode(image.data))


async def call(client: Any, port: int, name: str, arguments: dict[str, Any] | None = None) -> Any:
    return data(await client.call_tool("call_tool", {"port": port, "name": name, "arguments": arguments or {}}))


async def state(client: Any, port: int) -> Any:
    return await call(client, port, "get_state")


@pytest.mark.slow
def test_aliens_holds_still_while_paused_steps_exactly_and_its_tank_moves_on_a_key(
        tmp_path: Path, guard: ProcessGuard) -> None:
    async def script(client: Any, port: int) -> None:
        first = await state(client, port)
        assert first["paused"] is True and first["pygame"]["caption"] == "Pygame Aliens"
        held = await look(client, port)
        assert (held.width, held.height, held.window) == (640, 480, "640x480")
        wait_until(lambda: health(port)["frame"] > held.frame + 5, 10)
        later = await look(client, port)
        assert later.frame > held.frame  # the loop turns, serving...
        assert later.block["changed"] is False and later.pixels == held.pixels  # ...but the picture holds

        before = (await state(client, port))["simFrame"]
        await call(client, port, "step", {"frames": 7})
        assert (await state(client, port))["simFrame"] == before + 7

        start = await look(client, port)
        send(port, "cmd=key&key=right&action=press&frames=15")  # held for 15 frames, then released
        await call(client, port, "step", {"frames": 16})
        moved = await look(client, port)
        assert moved.block["changed"] is True
        ground = range(400, 470)  # the tank's band, below where bombs can reach in 16 frames
        columns = start.changed_columns(moved, ground)
        assert columns and min(columns) > 250 and max(columns) > 420, columns[:5]  # it drove right
        after = await state(client, port)
        assert after["simFrame"] == before + 7 + 16
        assert [e["m"] for e in after["events"] if e["m"].startswith("key")][-2:] == ["keydown:right", "keyup:right"]

    play(tmp_path, guard, init_declaration(tmp_path / "aliens", "-m", "pygame.examples.aliens", paused=True), script)


def ball_pixels(shot: Shot, xs: range, ys: range) -> int:
    return sum(1 for y in ys for x in xs if shot.pixel(x, y) == (118, 207, 145))


@pytest.mark.slow
def test_go_over_there_follows_a_click_with_its_clock_in_fixed_steps(tmp_path: Path, guard: ProcessGuard) -> None:
    async def script(client: Any, port: int) -> None:
        start = await look(client, port)
        assert start.window == "1000x600"
        corner = (range(0, 200, 2), range(0, 200, 2))
        assert ball_pixels(start, *corner) > 50
        send(port, "cmd=mouse&x=900&y=500")  # a click: down in one frame, up (the game reads it) in the next
        await call(client, port, "step", {"frames": 62})
        gathered = await look(client, port)
        assert ball_pixels(gathered, *corner) < ball_pixels(start, *corner) // 5  # they left the corner
        assert gathered.pixel(900, 500) == (118, 207, 145)                        # for the click
        everywhere = (range(0, 1000, 4), range(0, 600, 4))
        assert ball_pixels(gathered, *everywhere) < ball_pixels(start, *everywhere) // 2  # piled up there

    play(tmp_path, guard, init_declaration(tmp_path / "balls", "-m", "pygame.examples.go_over_there", paused=True),
         script)


def text_pixels(shot: Shot) -> int:
    return sum(1 for y in range(15, 60) for x in range(0, 640, 2) if shot.pixel(x, y) != (0, 0, 0))


@pytest.mark.slow
def test_textinput_types_what_call_tool_sends(tmp_path: Path, guard: ProcessGuard) -> None:
    async def script(client: Any, port: int) -> None:
        before = await look(client, port)
        answer = await call(client, port, "text", {"text": "hello from the bridge"})
        assert answer["applied"] is True and answer["confirmation"] == "completedCommandId"
        typed = await look(client, port)
        assert typed.frame > before.frame
        assert text_pixels(typed) > text_pixels(before) + 200  # the words are drawn
        answer = await call(client, port, "key", {"key": "backspace", "frames": 2})
        assert answer["result"]["key"] == "backspace"
        # a refusal the game reports in commandResults is CommandFailed, with its reason
        refused = await client.call_tool("call_tool", {"port": port, "name": "key", "arguments": {"key": "no such key"}})
        assert is_error(refused) and text(refused).startswith(f"CommandFailed: 'key' was applied on port {port}")
        assert "unknown key name 'no such key'" in text(refused)
        results = (await state(client, port))["commandResults"]
        assert results[-2]["ok"] is True and results[-2]["result"]["key"] == "backspace"
        assert results[-1]["ok"] is False and "unknown key name 'no such key'" in results[-1]["error"]

    play(tmp_path, guard, init_declaration(tmp_path / "text", "-m", "pygame.examples.textinput", paused=False),
         script)
