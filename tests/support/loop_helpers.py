"""Helpers for the agent-loop tests: the two games every test runs against, the
kit's demo and the hand-made reference game, and a bridge behind the real MCP client.

The kit and the bridge are written by the same project, so every wire behaviour is tested
against ``peers/handmade.py`` (written from docs/contract.md alone) as well.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.game.demo import FruitMerge, build
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from kit_helpers import looping
from mcp_harness import is_error, text
from peers.handmade import HandmadeGame

GAMES = ("kit", "handmade")


@contextmanager
def demo_game(seed: int = 7, *, hz: float = 500.0, start: bool = True) -> Iterator[tuple[int, FruitMerge]]:
    """The kit's demo game in this process on port 0: (port, game)."""
    game = FruitMerge(seed)
    bridge = build(game, register=False, environ={})
    if start:
        game.new_round()
    with looping(bridge, game.update, hz=hz, render=game.frame_tick) as port:
        yield port, game


@contextmanager
def handmade_game(**kw: Any) -> Iterator[HandmadeGame]:
    kw.setdefault("hz", 500.0)
    with HandmadeGame(**kw) as game:
        yield game


@contextmanager
def any_game(kind: str) -> Iterator[int]:
    """A port serving ``kind`` (``kit`` or ``handmade``), with every extension."""
    if kind == "kit":
        with demo_game() as (port, _game):
            yield port
    else:
        with handmade_game() as game:
            yield game.port


def bridge_for(port: int, **kw: Any) -> Bridge:
    kw.setdefault("environ", {})
    kw.setdefault("registry", False)
    kw.setdefault("scan", False)
    return Bridge(Config(port=port, **kw))


def app_for(port: int, **kw: Any) -> BridgeServer:
    return BridgeServer(bridge_for(port, **kw))


#: A move in each game: (tool, arguments, an until that it satisfies).
MOVE = {"kit": ("drop", {"x": 0}, {"path": "game.moving", "equals": 0}),
        "handmade": ("move", {"dx": 1}, {"path": "game.x", "equals": 1})}


async def call(client: Any, name: str, arguments: dict[str, Any] | None = None, **top: Any) -> Any:
    """``call_tool`` over MCP; the raw result (use ``data`` or ``text``)."""
    return await client.call_tool("call_tool", {"name": name, "arguments": arguments or {}, **top})


def error_text(result: Any) -> str:
    assert is_error(result), text(result)
    return text(result)


def answer_size(result: Any) -> int:
    return len(text(result))


def loads(result: Any) -> Any:
    return json.loads(text(result))
