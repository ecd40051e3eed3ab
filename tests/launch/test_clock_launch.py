"""``launch_instance {paused: true}`` through the launcher and a gamebridge.json, over the
real MCP client: the demo starts paused, a game without ``clock`` is refused and
stopped, a game that ignores GAME_BRIDGE_START_PAUSED is paused and the answer says so;
and determinism shown: two paused demo instances with the same seed, driven by the same
moves with ``advance``, are identical frame for frame (the way to compare two builds)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import GAME, ProcessGuard, free_range
from mcp_harness import connect, data, is_error, text

pytestmark = pytest.mark.timeout(90)

REPO = Path(__file__).resolve().parents[2]
HANDMADE = REPO / "tests" / "peers" / "handmade.py"
DEMO = [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}", "--seed", "5", "--start",
        "--no-register", "--hz", "120"]


def bridge_for(tmp_path: Path, guard: ProcessGuard, argv: list[str]) -> Bridge:
    low, high = free_range(4)
    path = tmp_path / "gamebridge.json"
    path.write_text(json.dumps({"name": "Clocked", "launch": {
        "argv": argv, "cwd": str(REPO), "portRange": f"{low}-{high}", "readyTimeoutMs": 20000,
        "env": {"PYTHONPATH": str(REPO)}}}))
    config = Config(environ=guard.env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(path))
    return Bridge(config)


async def call(client: Any, name: str, port: int, **arguments: Any) -> Any:
    return await client.call_tool("call_tool", {"name": name, "port": port, "arguments": arguments})


def test_the_demo_launches_paused_and_holds_still(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, DEMO)

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            launched = data(await client.call_tool("launch_instance", {"paused": True}))
            port = launched["port"]
            assert launched["paused"] is True and launched["simFrame"] == 0 and "note" not in launched
            state = data(await call(client, "get_state", port, summary=True))
            assert state["paused"] is True and state["simFrame"] == 0 and state["game"]["state"] == "RUNNING"
            stepped = data(await call(client, "advance", port, frames=10))
            assert stepped["simFrame"] == 10
            plain = data(await client.call_tool("launch_instance", {}))
            assert "paused" not in plain
            assert data(await call(client, "get_state", plain["port"], summary=True))["paused"] is False
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()


def test_a_game_without_clock_is_refused_and_stopped(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, [sys.executable, str(GAME), "--port", "{port}"])

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            r = await client.call_tool("launch_instance", {"paused": True})
            assert is_error(r) and text(r).startswith("BridgeUsageError"), text(r)
            assert "does not advertise 'clock'" in text(r) and "it has been stopped" in text(r)
            assert bridge.launched_ports() == []
            listed = data(await client.call_tool("list_instances", {}))
            assert not [e for e in listed.get("live", []) if e.get("launchedByThisBridge")]
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()
    assert not [p for p in guard.tagged() if p.pid != psutil.Process().pid]


def test_a_game_that_ignores_start_paused_is_paused_and_the_answer_says_so(tmp_path: Path, guard: ProcessGuard) -> None:
    argv = [sys.executable, str(HANDMADE), "--port", "{port}", "--hz", "300", "--lie", "start-paused-ignored"]
    bridge = bridge_for(tmp_path, guard, argv)

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            launched = data(await client.call_tool("launch_instance", {"paused": True}))
            assert launched["paused"] is True and "GAME_BRIDGE_START_PAUSED=1 is not honoured" in launched["note"]
            state = data(await call(client, "get_state", launched["port"], summary=True))
            assert state["paused"] is True and state["simFrame"] == launched["simFrame"]
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()


def comparable(state: dict[str, Any]) -> dict[str, Any]:
    """A /state without ``frame``, the process's loop counter (it runs on while paused and
    differs between processes; the kit also stamps each event with it): everything else
    is the world."""
    out = {k: v for k, v in state.items() if k != "frame"}
    out["events"] = [{k: v for k, v in e.items() if k != "frame"} if isinstance(e, dict) else e
                     for e in state.get("events", [])]
    return out


@pytest.mark.slow
def test_two_paused_instances_with_the_same_seed_and_moves_are_identical_frame_for_frame(
        tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, DEMO)
    moves = [0.5, 0.5, -2.0, 0.5, 2.5, -1.0]

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            a = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
            b = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
            assert a != b
            frames_compared = 0
            for i, x in enumerate(moves):
                for port in (a, b):
                    assert not is_error(await call(client, "drop", port, x=x))
                if i % 2:  # frame by frame, comparing every frame
                    while True:
                        states = [data(await call(client, "advance", port)) for port in (a, b)]
                        full = [comparable(data(await call(client, "get_state", port))) for port in (a, b)]
                        assert full[0] == full[1], f"move {i}: the instances differ at simFrame {full[0]['simFrame']}"
                        frames_compared += 1
                        if states[0]["game"]["moving"] == 0:
                            break
                else:  # in one call each: the same frame count and the same world
                    settled = [data(await call(client, "advance", port, until={"path": "game.moving", "equals": 0}))
                               for port in (a, b)]
                    assert settled[0]["matched"] and settled[0]["framesAdvanced"] > 0
                    assert {k: v for k, v in settled[0].items() if k not in ("port", "frame")} == \
                        {k: v for k, v in settled[1].items() if k not in ("port", "frame")}
                    full = [comparable(data(await call(client, "get_state", port))) for port in (a, b)]
                    assert full[0] == full[1]
                if i == 1:
                    after_two = {k: v for k, v in full[0]["game"].items() if k != "seed"}
            assert frames_compared > 30 and full[0]["game"]["drops"] == len(moves)
            other = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
            data(await call(client, "set_seed", other, seed=6))
            for x in moves[:2]:
                data(await call(client, "drop", other, x=x))
                data(await call(client, "advance", other, until={"path": "game.moving", "equals": 0}))
            # The comparison can fail: another seed, the same two moves, another world.
            game = data(await call(client, "get_state", other))["game"]
            assert {k: v for k, v in game.items() if k != "seed"} != after_two
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()
