"""The launcher through the MCP client: progress notifications during a slow boot, the
log cursor, stop_instance, and reaping at shutdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.config import Config
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import ProcessGuard, wait_until, write_declaration
from mcp_harness import connect, data, is_error, text

pytestmark = pytest.mark.timeout(60)


@pytest.mark.slow
def test_launch_reports_progress_then_drive_read_log_and_stop(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path, "--boot-delay", "0.9", "--lines", "3", "--version", "7.7.7")
    config = Config(environ=guard.env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(decl))
    bridge = Bridge(config)
    progress: list[tuple[float, Any, Any]] = []

    async def on_progress(done: float, total: Any, message: Any) -> None:
        progress.append((done, total, message))

    async def main() -> dict:
        async with connect(BridgeServer(bridge)) as client:
            launched = data(await client.call_tool("launch_instance", {"timeoutMs": 10000}, progress_callback=on_progress))
            port = launched["port"]
            assert launched["version"] == "7.7.7" and launched["readyInMs"] >= 900
            listed = data(await client.call_tool("list_instances", {}))
            mine = [e for e in listed["live"] if e["port"] == port]
            assert mine and mine[0]["launchedByThisBridge"] is True and mine[0]["pid"] == launched["pid"]
            log = data(await client.call_tool("instance_log", {"port": port}))
            assert log["lines"] and isinstance(log["next"], int)
            again = data(await client.call_tool("instance_log", {"port": port, "since": log["next"]}))
            assert again["lines"] == [] or again["next"] >= log["next"]
            stopped = data(await client.call_tool("stop_instance", {"port": port}))
            assert stopped["stopped"] is True and stopped["how"] == "closed cleanly"
            r = await client.call_tool("stop_instance", {"port": port})
            assert is_error(r) and "not launched by this bridge" in text(r)
            return launched
    try:
        launched = anyio.run(main)
    finally:
        bridge.shutdown()  # the server's one shutdown path; also lets the watcher go
    assert len(progress) >= 2
    assert all(total == 10000 for _d, total, _m in progress)
    assert [d for d, _t, _m in progress] == sorted(d for d, _t, _m in progress)
    assert not psutil.pid_exists(launched["pid"]) or psutil.Process(launched["pid"]).status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_shutdown_reaps_what_was_launched(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path, "--ignore-close")
    config = Config(environ=guard.env, registry_dir=tmp_path / "home" / "instances", declaration=load_declaration(decl))
    bridge = Bridge(config)
    launched = bridge.run_tool("launch_instance", {})
    assert psutil.pid_exists(launched["pid"])
    bridge.shutdown()
    wait_until(lambda: not psutil.pid_exists(launched["pid"]), 10)
