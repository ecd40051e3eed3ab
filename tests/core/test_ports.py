"""Ports that find the agent's instance: with no port anywhere, the one instance
this bridge launched is the port (several: an error naming them); GameOffline names the
live instances the bridge knows of; list_instances scans the declaration's portRange too.
Real child processes (the hand-made game) launched from a real gamebridge.json."""

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
from launch_helpers import ProcessGuard, free_range
from loop_helpers import handmade_game
from mcp_harness import connect, data, is_error, structured, text

pytestmark = pytest.mark.timeout(90)

REPO = Path(__file__).resolve().parents[2]
HANDMADE = REPO / "tests" / "peers" / "handmade.py"


def declared_bridge(tmp_path: Path, guard: ProcessGuard, *, port_range: tuple[int, int] | None = None,
                    **config: Any) -> Bridge:
    low, high = port_range or free_range(4)
    path = tmp_path / "gamebridge.json"
    path.write_text(json.dumps({"name": "Handmade", "launch": {
        "argv": [sys.executable, str(HANDMADE), "--port", "{port}", "--hz", "200"], "cwd": str(REPO),
        "portRange": f"{low}-{high}", "readyTimeoutMs": 20000}}))
    config.setdefault("environ", {k: v for k, v in guard.env.items() if k != "GAME_BRIDGE_PORT"})
    config.setdefault("registry_dir", tmp_path / "home" / "instances")
    config.setdefault("scan_range", (1,))
    return Bridge(Config(declaration=load_declaration(path), **config))


@pytest.mark.slow
def test_the_one_launched_instance_is_the_port_and_several_must_be_named(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = declared_bridge(tmp_path, guard)

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            first = data(await client.call_tool("launch_instance", {}))["port"]
            body = data(await client.call_tool("call_tool", {"name": "move", "arguments": {"dx": 1}}))
            assert body["port"] == first and body["applied"] is True
            assert data(await client.call_tool("list_toolsets", {}))["port"] == first
            second = data(await client.call_tool("launch_instance", {}))["port"]
            refused = await client.call_tool("call_tool", {"name": "get_state", "arguments": {"summary": True}})
            assert is_error(refused)
            assert text(refused) == (f"BridgeUsageError: This bridge launched 2 instances (ports {min(first, second)}, "
                                     f"{max(first, second)}) and the call names no port: say which one with port.")
            assert data(await client.call_tool("call_tool", {"port": second, "name": "noop"}))["port"] == second
            data(await client.call_tool("stop_instance", {"port": second}))
            assert data(await client.call_tool("call_tool", {"name": "noop"}))["port"] == first
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()


def test_a_configured_port_comes_before_the_launched_one(tmp_path: Path, guard: ProcessGuard) -> None:
    with handmade_game() as other:
        bridge = declared_bridge(tmp_path, guard, port=other.port)

        async def main() -> None:
            async with connect(BridgeServer(bridge)) as client:
                data(await client.call_tool("launch_instance", {}))
                assert data(await client.call_tool("call_tool", {"name": "noop"}))["port"] == other.port
        try:
            anyio.run(main)
        finally:
            bridge.shutdown()


@pytest.mark.slow
def test_game_offline_names_the_live_instances_the_bridge_knows_of(tmp_path: Path, guard: ProcessGuard) -> None:
    registry = tmp_path / "home" / "instances"
    dead_low, _ = free_range(1)
    with handmade_game(register=True, environ={"GAME_BRIDGE_INSTANCES": str(registry)}) as listed:
        bridge = declared_bridge(tmp_path, guard)

        async def main() -> None:
            async with connect(BridgeServer(bridge)) as client:
                launched = data(await client.call_tool("launch_instance", {}))["port"]
                offline = await client.call_tool("call_tool", {"port": dead_low, "name": "get_state"})
                message = text(offline)
                assert is_error(offline) and message.startswith(f"GameOffline: No game is answering on http://127.0.0.1:{dead_low}.")
                assert f"{launched} (launched by this bridge)" in message
                assert f"{listed.port} (in the registry: Handmade 1.0)" in message
                assert message.endswith("If you meant one of them, pass its port.")
                assert set(structured(offline)["liveInstances"]) == {launched, listed.port}
        try:
            anyio.run(main)
        finally:
            bridge.shutdown()


def test_game_offline_without_known_instances_is_as_before(tmp_path: Path) -> None:
    dead, _ = free_range(1)
    bridge = Bridge(Config(port=dead, environ={}, registry_dir=tmp_path / "none", scan=False))

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            offline = await client.call_tool("call_tool", {"name": "get_health"})
            assert is_error(offline) and "Live instances" not in text(offline)
    anyio.run(main)


def test_list_instances_scans_the_declared_port_range_too(tmp_path: Path, guard: ProcessGuard) -> None:
    low, high = free_range(4)
    with handmade_game(port=low + 2) as kept:  # started with `call launch_instance --keep`: nobody tracks it
        bridge = declared_bridge(tmp_path, guard, port_range=(low, high), registry=False)
        try:
            report = bridge.run_tool("list_instances", {})
            assert [e["port"] for e in report["live"]] == [kept.port]
            assert not set(range(low, high + 1)) & set(report["free"])  # the launcher's range, not listed as free
            explicit = bridge.run_tool("list_instances", {"range": "1"})
            assert explicit["live"] == []  # an explicit range is exactly that
            unscanned = bridge.run_tool("list_instances", {"scan": False})
            assert unscanned["live"] == []
        finally:
            bridge.shutdown()
