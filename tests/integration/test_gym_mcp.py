"""An agent over MCP (the real client on the SDK's in-memory transport) plays Gymnasium
environments through the gym wrapper, offline, each launched paused from a gamebridge.json
that ``gym --init`` wrote: ALE Breakout and Pong with named actions and keys, seen in
screenshots, an episode ended and reset with a seed; MiniGrid played from ``ui.text`` alone;
NetHack; ``check --launch`` passing on each; and nothing left running."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from gym_helpers import PEERS, require
from launch_helpers import PYTHON, ProcessGuard, free_range, wait_until
from mcp_harness import connect, data, is_error, text
from png_helpers import read_png

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def declare(tmp_path: Path, guard: ProcessGuard, name: str, *args: str) -> Path:
    """A project folder whose gamebridge.json ``gym --init`` wrote, on a free port range."""
    folder = tmp_path / name
    folder.mkdir()
    init = subprocess.run([PYTHON, "-m", "game_bridge_mcp", "gym", "--init", *args], cwd=folder,
                          capture_output=True, text=True, timeout=60, env=guard.env)
    assert init.returncode == 0, init.stderr
    path = folder / "gamebridge.json"
    doc = json.loads(path.read_text())
    low, high = free_range(8)
    doc["launch"]["portRange"] = f"{low}-{high}"
    path.write_text(json.dumps(doc))
    return path


class Agent:
    """The MCP client and the one game it launched."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.port = 0

    async def tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return data(await self.client.call_tool(name, arguments))

    async def call(self, name: str, arguments: dict[str, Any] | None = None, *, port: int | None = None) -> Any:
        return await self.tool("call_tool", {"port": port or self.port, "name": name, "arguments": arguments or {}})

    async def refused(self, name: str, arguments: dict[str, Any]) -> str:
        result = await self.client.call_tool("call_tool", {"port": self.port, "name": name, "arguments": arguments})
        assert is_error(result), text(result)
        return text(result)

    async def look(self) -> tuple[dict[str, Any], bytes | None]:
        result = await self.client.call_tool("call_tool", {"port": self.port, "name": "get_screenshot",
                                                           "arguments": {}})
        assert not is_error(result), text(result)
        image = result.content[1].data if len(result.content) > 1 else None
        return json.loads(text(result)), base64.b64decode(image) if image is not None else None


@asynccontextmanager
async def playing(path: Path, tmp_path: Path, guard: ProcessGuard) -> AsyncIterator[Agent]:
    env = dict(guard.env, GAME_BRIDGE_SCREENSHOTS=str(tmp_path / "shots"),
               PYTHONPATH=str(PEERS))
    config = Config(environ=env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(path), timeout_ms=60000)
    bridge = Bridge(config)  # a minute a command: 3000 Atari steps in one act take seconds on a loaded machine
    try:
        async with connect(BridgeServer(bridge)) as client:
            agent = Agent(client)
            launched = await agent.tool("launch_instance", {"paused": True, "timeoutMs": 120000})
            assert launched["paused"] is True
            agent.port = launched["port"]
            yield agent
            stopped = await agent.tool("stop_instance", {"port": agent.port, "graceMs": 10000})
            assert stopped["stopped"] is True and stopped["how"] == "closed cleanly", stopped
    finally:
        bridge.shutdown()


def check_launch(path: Path, guard: ProcessGuard) -> None:
    run = subprocess.run([PYTHON, "-m", "game_bridge_mcp", "check", "--launch", "--config", str(path)],
                         capture_output=True, text=True, timeout=180, env=guard.env, cwd=path.parent)
    assert run.returncode == 0 and " 0 failed" in run.stdout, run.stdout[-3000:] + run.stderr[-1500:]
    assert "GAME_BRIDGE_START_PAUSED=1 it starts paused" in run.stdout


def test_an_agent_plays_breakout_and_pong_paused_by_name_and_by_key(tmp_path: Path, guard: ProcessGuard) -> None:
    require("ale_py")
    breakout = declare(tmp_path, guard, "breakout", "--seed", "3", "ALE/Breakout-v5")
    pong = declare(tmp_path, guard, "pong", "--seed", "4", "ALE/Pong-v5")

    async def play_breakout() -> None:
        async with playing(breakout, tmp_path, guard) as agent:
            toolsets = await agent.tool("list_toolsets", {"port": agent.port})
            assert "ALE/Breakout-v5" in json.dumps(toolsets) and "act" in json.dumps(toolsets)
            state = await agent.call("get_state")
            assert state["paused"] is True and state["game"]["lives"] == 5 and state["game"]["seed"] == 3
            shot, png = await agent.look()
            assert png is not None and read_png(png)[:2] == (160, 210) and shot["frame"] >= 0
            fired = await agent.call("act", {"action": "FIRE", "frames": 2})
            assert fired["applied"] is True and fired["result"]["steps"] == 2 and fired["result"]["action"] == "FIRE"
            pressed = await agent.call("key", {"key": "left", "frames": 4})
            assert pressed["pending"] is True  # a key waits for the clock
            advanced = await agent.call("advance", {"frames": 5})
            assert [(d["tool"], d["ok"]) for d in advanced["delivered"]] == [("key", True)], advanced
            assert (await agent.call("get_state"))["game"]["step"] == 7
            moved, picture = await agent.look()
            assert moved["changed"] is True and picture is not None
            lost = await agent.call("advance", {"until": {"event": "life:lost"}, "maxFrames": 2000})
            assert lost["matched"] is True and (await agent.call("get_state"))["game"]["lives"] == 4
            assert "JUMP" in await agent.refused("act", {"action": "JUMP"})  # the enum, checked before sending
            for _ in range(12):  # to the episode's end, 500 steps a call, each answer checked
                played = await agent.client.call_tool("call_tool", {"port": agent.port, "name": "act",
                                                                    "arguments": {"action": "FIRE", "frames": 500}})
                assert not is_error(played), text(played)
                ended = data(played)
                assert "result" in ended, ended
                if ended["result"]["terminated"]:
                    break
            assert ended["result"]["terminated"] is True and ended["result"]["lives"] == 0
            refusal = await agent.refused("act", {"action": "NOOP"})
            assert "terminated at step" in refusal and "reset" in refusal
            reset = await agent.call("reset", {"seed": 5})
            assert reset["result"] == {"episode": 2, "seed": 5}
            events = await agent.call("get_events", {"since": 0, "limit": 1000})
            kinds = [e["m"] for e in events["events"]]
            assert kinds.count("episode:start") == 2 and "episode:end" in kinds and kinds.count("life:lost") == 5

    async def play_pong() -> None:
        async with playing(pong, tmp_path, guard) as agent:
            toolsets = json.dumps(await agent.tool("describe_toolset", {"port": agent.port, "name": "actions"}))
            for name in ("NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"):
                assert f'"{name}"' in toolsets
            up = await agent.call("key", {"key": "right", "action": "down"})
            assert up["pending"] is True
            await agent.call("advance", {"frames": 30})
            state = await agent.call("get_state")
            assert state["game"]["held"] == "RIGHT" and state["game"]["keysDown"] == ["right"]
            await agent.call("key", {"key": "space", "action": "down"})
            await agent.call("advance", {"frames": 1})
            assert (await agent.call("get_state"))["game"]["held"] == "RIGHTFIRE"
            await agent.call("key", {"key": "right", "action": "up"})
            await agent.call("key", {"key": "space", "action": "up"})
            await agent.call("advance", {"frames": 1})
            scored = await agent.call("advance", {"until": {"event": "reward"}, "maxFrames": 3000})
            assert scored["matched"] is True
            state = await agent.call("get_state")
            assert state["game"]["reward"] in (-1.0, 1.0) and state["game"]["totalReward"] == state["game"]["reward"]

    anyio.run(play_breakout)
    anyio.run(play_pong)
    check_launch(pong, guard)
    assert wait_until(lambda: not guard.tagged(), 10), [p.cmdline()[:3] for p in guard.tagged()]


GOAL, WALL = "GG", "W"
FACING = {">>": (1, 0), "VV": (0, 1), "<<": (-1, 0), "^^": (0, -1)}


def read_grid(text: str) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], set[tuple[int, int]]]:
    """Where the agent is, which way it faces, where the goal is and the walls, from MiniGrid's
    text: two letters a cell, the grid's lines before "Mission:"."""
    rows = text.split("\nMission:")[0].split("\n")
    agent = facing = goal = None
    walls = set()
    for y, row in enumerate(rows):
        for x in range(len(row) // 2):
            cell = row[2 * x:2 * x + 2]
            if cell in FACING:
                agent, facing = (x, y), FACING[cell]
            elif cell == GOAL:
                goal = (x, y)
            elif cell.startswith(WALL):
                walls.add((x, y))
    assert agent is not None and facing is not None and goal is not None, text
    return agent, facing, goal, walls


def next_action(text: str) -> str:
    """Breadth-first from the agent to the goal; turn toward the first cell, or go forward."""
    agent, facing, goal, walls = read_grid(text)
    came: dict[tuple[int, int], tuple[int, int]] = {agent: agent}
    frontier = [agent]
    while frontier and goal not in came:
        cell = frontier.pop(0)
        for dx, dy in FACING.values():
            nxt = (cell[0] + dx, cell[1] + dy)
            if nxt not in came and nxt not in walls:
                came[nxt] = cell
                frontier.append(nxt)
    step = goal
    while came[step] != agent:
        step = came[step]
    wanted = (step[0] - agent[0], step[1] - agent[1])
    if wanted == facing:
        return "forward"
    right = (-facing[1], facing[0])
    return "right" if wanted == right else "left"


def test_an_agent_plays_minigrid_from_its_text_alone_and_nethack(tmp_path: Path, guard: ProcessGuard) -> None:
    require("minigrid", "nle")
    grid = declare(tmp_path, guard, "grid", "--seed", "1", "MiniGrid-FourRooms-v0")
    hack = declare(tmp_path, guard, "hack", "--seed", "2", "NetHackScore-v0")

    async def play_grid() -> None:
        async with playing(grid, tmp_path, guard) as agent:
            digest = await agent.call("get_state", {"summary": True})
            for _ in range(200):
                action = next_action(digest["text"])
                moved = await agent.call("act", {"action": action})
                assert moved["applied"] is True, moved
                if moved["result"]["terminated"]:
                    break
                digest = await agent.call("get_state", {"summary": True})
            assert moved["result"]["terminated"] is True and moved["result"]["totalReward"] > 0, moved

    async def play_hack() -> None:
        async with playing(hack, tmp_path, guard) as agent:
            digest = await agent.call("get_state", {"summary": True})
            assert "Dlvl:1" in digest["text"] and digest["game"]["depth"] == 1 and digest["game"]["hp"] > 0
            searched = await agent.call("type", {"text": "sss"})
            assert searched["result"]["steps"] == 3
            north = await agent.call("act", {"action": "N"})
            assert north["applied"] is True and (await agent.call("get_state"))["game"]["step"] == 4

    anyio.run(play_grid)
    anyio.run(play_hack)
    check_launch(grid, guard)
    assert wait_until(lambda: not guard.tagged(), 10), [p.cmdline()[:3] for p in guard.tagged()]


def test_an_agent_saves_restores_and_forks_atari_exactly(tmp_path: Path, guard: ProcessGuard) -> None:
    require("ale_py")
    breakout = declare(tmp_path, guard, "forks", "--seed", "6", "ALE/Breakout-v5")

    async def explore() -> None:
        async with playing(breakout, tmp_path, guard) as agent:
            await agent.call("act", {"action": "FIRE", "frames": 5})
            saved = await agent.call("save_state", {"label": "ball in play"})
            assert saved["how"] == "snapshot" and saved["exact"] is True and saved["simFrame"] == 5, saved
            at_save = await agent.call("get_state", {"summary": True})
            shot, _png = await agent.look()
            await agent.call("act", {"action": "LEFT", "frames": 30})
            restored = await agent.call("restore_state", {"state": saved["state"]})
            assert restored["exact"] is True and restored["simFrame"] == 5, restored
            again = await agent.call("get_state", {"summary": True})
            assert again["game"] == at_save["game"]
            forks = [await agent.call("fork_instance", {"state": saved["state"]}) for _ in range(3)]
            ports = [agent.port] + [fork["port"] for fork in forks]
            assert all(fork["exact"] is True for fork in forks) and len(set(ports)) == 4, forks
            seen: dict[int, list[Any]] = {port: [] for port in ports}
            for action in ("RIGHT", "LEFT", "FIRE", "NOOP", "LEFT"):
                for port in ports:
                    moved = await agent.call("act", {"action": action, "frames": 4}, port=port)
                    digest = await agent.call("get_state", {"summary": True}, port=port)
                    seen[port].append((moved["result"], digest["game"], digest["simFrame"]))
            assert all(seen[port] == seen[agent.port] for port in ports), "the forks went their own ways"
            listed = await agent.call("list_states")
            assert [state["state"] for state in listed["states"]][:1] == [saved["state"]]
            for fork in forks:
                stopped = await agent.tool("stop_instance", {"port": fork["port"], "graceMs": 10000})
                assert stopped["stopped"] is True

    anyio.run(explore)
    assert wait_until(lambda: not guard.tagged(), 10), [p.cmdline()[:3] for p in guard.tagged()]
