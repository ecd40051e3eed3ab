"""A launched game that exits because of the agent's move is reported as what happened:
``GameOffline`` saying it exited with its code, and its last output, not a generic
"nothing answers". Through the real MCP client, against the demo built to crash on its
second drop (tests/peers/demo_variant.py), launched from a declaration."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import ProcessGuard, declaration
from mcp_harness import connect, data, is_error, text

pytestmark = pytest.mark.timeout(120)


def test_a_launched_game_that_exits_on_a_move_is_reported_with_its_exit_code(tmp_path: Path,
                                                                             guard: ProcessGuard) -> None:
    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    decl = declaration(tmp_path / "crash", variant="crash-on-drop:2")
    config = Config(environ=env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(decl))
    bridge = Bridge(config)

    async def agent() -> None:
        async with connect(BridgeServer(bridge)) as client:
            port = data(await client.call_tool("launch_instance", {}))["port"]
            await client.call_tool("call_tool", {"port": port, "name": "click", "arguments": {"label": "Start"}})
            assert data(await client.call_tool("call_tool", {"port": port, "name": "drop",
                                                             "arguments": {"x": 0}}))["applied"] is True
            crashed = await client.call_tool("call_tool", {"port": port, "name": "drop", "arguments": {"x": 0}})
            assert is_error(crashed)
            message = text(crashed)
            assert message.startswith(f"GameOffline: The game on port {port}, launched by this bridge, exited with "
                                      "code 70"), message
            assert "fatal error in drop #2" in message  # its last output
            assert "launch_instance starts it again" in message
            again = await client.call_tool("call_tool", {"port": port, "name": "get_state"})
            assert is_error(again) and "exited with code 70" in text(again)  # said again, the bridge serving
    try:
        anyio.run(agent)
    finally:
        bridge.shutdown()
