#!/usr/bin/env python3
"""What a move costs an agent: tool calls and characters read per move, playing the demo.

A fixed-policy agent plays Fruit Merge (seed 7) through the real MCP client over the SDK's
in-memory transport, launching the demo with ``launch_instance`` from a ``gamebridge.json``
made here (and stopped here). Each move is what an agent needs: do the drop, learn
whether it worked, wait for the board to settle, and see the board to choose the next
drop. Counted per move: the tool calls, and the characters of the text the agent reads
(every result's text content: a proxy for tokens, about 4 characters a token).

Two loops, chosen by what the bridge offers (its ``call_tool`` schema):

* **one call** (a bridge with ``until``): ``call_tool drop {x}, until {game.moving == 0}``;
  the board is read from the answer's ``text`` (``ui.text``), whether it worked from
  ``result`` / ``CommandFailed``;
* **three calls** (a bridge without them): ``call_tool drop``, then
  ``wait_for game.moving == 0``, then a full ``get_state`` for the board.

The policy is the demo's own (``choose_x``: onto an equal fruit, else the lowest column), so
both loops play the same game. Run it against an older checkout to compare::

    .venv/bin/python scripts/bench_agent_loop.py [--moves 20] [--json]
    git worktree add /tmp/before <commit> && PYTHONPATH=/tmp/before .venv/bin/python scripts/bench_agent_loop.py

No figure is a pass/fail target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: E402

import game_bridge_mcp  # noqa: E402
from game_bridge_mcp.config import Config  # noqa: E402
from game_bridge_mcp.core.bridge import Bridge  # noqa: E402
from game_bridge_mcp.launch.declaration import load_declaration  # noqa: E402
from game_bridge_mcp.mcp_server.adapter import _SDK2, BridgeServer  # noqa: E402

SYMBOLS = "CSGOAPHIMW"
PIECES = ("cherry", "strawberry", "grape", "orange", "apple", "pear", "peach", "pineapple", "melon", "watermelon")


@asynccontextmanager
async def connect(app: BridgeServer) -> AsyncIterator[Any]:
    if _SDK2:
        from mcp import Client

        async with Client(app.server, mode="legacy") as client:
            yield client
    else:
        from mcp.shared.memory import create_connected_server_and_client_session

        async with create_connected_server_and_client_session(app.server) as session:
            yield session


def choose_x(board: list[list[Any]], current: Any, columns: int = 7) -> int:
    """The demo's policy: onto an equal fruit topping a column, else the lowest column
    nearest the middle (as cli/demo.py's choose_x)."""
    tops = []
    for column in range(columns):
        filled = [row[column] for row in board if column < len(row) and row[column] is not None]
        tops.append((len(filled), filled[0] if filled else None))
    half = columns // 2
    matching = [c for c in range(columns) if tops[c][1] == current and tops[c][0] < len(board) - 1]
    if matching:
        return min(matching, key=lambda c: (tops[c][0], abs(c - half))) - half
    return min(range(columns), key=lambda c: (tops[c][0], abs(c - half))) - half


def board_from_text(text: str) -> list[list[Any]]:
    """The board rows of the demo's ``ui.text`` as piece names: ``..C....`` rows under a
    folded ``(7 empty rows)``, or, in older demos, ``|..C....|`` or ``|. . C . . . .|``.
    (Its own reader, not the CLI's: the bench also runs against older checkouts.)"""
    cells = set(SYMBOLS) | {"."}
    lines = [line.strip() for line in text.splitlines()]
    lines = [line if line.startswith("(") else line.strip("|").replace(" ", "") for line in lines]
    width = max((len(line) for line in lines if line and set(line) <= cells), default=7)
    rows: list[list[Any]] = []
    for line in lines:
        if line.startswith("(") and line.endswith("empty rows)"):
            rows += [[None] * width for _ in range(int(line[1:].split()[0]))]
        elif line and set(line) <= cells:
            rows.append([PIECES[SYMBOLS.index(c)] if c in SYMBOLS else None for c in line])
    return rows


class Agent:
    def __init__(self, client: Any, port: int) -> None:
        self.client, self.port = client, port
        self.calls = 0
        self.chars = 0

    async def call(self, name: str, arguments: dict[str, Any] | None = None, **top: Any) -> tuple[bool, Any]:
        result = await self.client.call_tool("call_tool", {"port": self.port, "name": name,
                                                            "arguments": arguments or {}, **top})
        text = result.content[0].text
        self.calls += 1
        self.chars += len(text)
        error = bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
        return error, (text if error else json.loads(text))


async def play(moves: int, hz: float, workdir: Path, show: int = 0) -> dict[str, Any]:
    root = Path(game_bridge_mcp.__file__).resolve().parents[1]
    path = workdir / "gamebridge.json"
    path.write_text(json.dumps({"name": "Fruit Merge (bench)", "launch": {
        "argv": [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}", "--seed", "7",
                 "--hz", f"{hz:g}", "--no-register", "--screenshot-dir", str(workdir / "shots")],
        "cwd": str(workdir), "readyTimeoutMs": 30000, "env": {"PYTHONPATH": str(root)}}}))
    config = Config(environ={k: v for k, v in os.environ.items() if k != "GAME_BRIDGE_PORT"},
                    registry_dir=workdir / "instances", scan_range=(1,), declaration=load_declaration(path))
    bridge = Bridge(config)
    per_move: list[tuple[int, int]] = []
    parts: dict[str, int] = {}
    shown: Any = None
    try:
        async with connect(BridgeServer(bridge)) as client:
            tools = (await client.list_tools()).tools
            call_tool = next(t for t in tools if t.name == "call_tool")
            schema = getattr(call_tool, "input_schema", None) or getattr(call_tool, "inputSchema", {})
            one_call = "until" in schema.get("properties", {})
            launched = json.loads((await client.call_tool("launch_instance", {})).content[0].text)
            agent = Agent(client, int(launched["port"]))
            _, started = await agent.call("restart")
            state = (await agent.call("get_state"))[1]  # the first look, not counted as a move
            board, current = state["game"]["board"], state["game"]["current"]
            known = dict(state["game"])
            score = 0
            for _ in range(moves):
                agent.calls = agent.chars = 0
                x = choose_x(board, current)
                if one_call:
                    failed, answer = await agent.call("drop", {"x": x}, until={"path": "game.moving", "equals": 0,
                                                                             "timeoutMs": 10000})
                    if failed:
                        break
                    if len(per_move) + 1 == show:
                        shown = answer
                    for key, value in answer.items():  # where the characters go
                        parts[key] = parts.get(key, 0) + len(json.dumps({key: value}, ensure_ascii=False,
                                                                         separators=(",", ":"))) - 1
                    if "text" in answer:  # (older bridges showed only what changed; the agent kept the rest)
                        board = board_from_text(answer["text"])
                    known.update(answer.get("game", {}))
                    game = known
                else:
                    failed, answer = await agent.call("drop", {"x": x})
                    if failed:
                        break
                    await agent.call("wait_for", {"path": "game.moving", "equals": 0, "timeoutMs": 10000})
                    full = (await agent.call("get_state"))[1]
                    board, game = full["game"]["board"], full["game"]
                per_move.append((agent.calls, agent.chars))
                current, score = game.get("current"), game.get("score", score)
                if game.get("state") != "RUNNING":
                    break
            await client.call_tool("stop_instance", {"port": agent.port})
    finally:
        bridge.shutdown()
    n = max(1, len(per_move))
    return {"loop": "one call (until)" if one_call else "three calls (drop, wait_for, get_state)",
            "moves": len(per_move), "score": score,
            "callsPerMove": round(sum(c for c, _ in per_move) / n, 2),
            "charsPerMove": round(sum(ch for _, ch in per_move) / n),
            "maxCharsPerMove": max((ch for _, ch in per_move), default=0),
            "charsPerMoveByField": {k: round(v / n) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])},
            "package": str(Path(game_bridge_mcp.__file__).resolve().parent),
            **({"shown": shown} if show else {})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--moves", type=int, default=20, help="drops to play (default 20; fewer if the round ends)")
    parser.add_argument("--hz", type=float, default=240.0, help="the demo's frame rate (default 240)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--show", type=int, default=0, metavar="N", help="also print the answer of move N (one call loop)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gb-agent-loop-") as tmp:
        report = anyio.run(play, args.moves, args.hz, Path(tmp), args.show)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['loop']}: {report['moves']} moves, score {report['score']}; "
              f"{report['callsPerMove']} calls and {report['charsPerMove']} characters a move "
              f"(at most {report['maxCharsPerMove']}); package {report['package']}")
        if report["charsPerMoveByField"]:
            print("  by field: " + ", ".join(f"{k} {v}" for k, v in report["charsPerMoveByField"].items()))
        if report.get("shown") is not None:
            print(f"  move {args.show}: " + json.dumps(report["shown"], ensure_ascii=False, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
