"""Answers an agent can take as they stand, through the real MCP client: every answer for
a command has the contract's documented fields (the first for a port and any later one),
on a game with no extensions and on fully extended ones (the kit's demo, the hand-made
reference game); and each answer's digest is whole, whatever earlier answers showed,
across commands interleaved with ``advance`` on a paused game."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import anyio
import pytest

from game_bridge_mcp.core.outcome import CONTRACT_FIELDS
from game_bridge_mcp.game.demo.fruit import FruitMerge
from game_bridge_mcp.game.demo import build
from kit_helpers import looping
from loop_helpers import app_for, call, demo_game, handmade_game
from mcp_harness import connect, data

pytestmark = pytest.mark.timeout(60)

#: A move in each game, repeated five times.
MOVES = {"plain": ("move", {"dx": 1}), "handmade": ("move", {"dx": 1}), "kit": ("drop", {"x": 0})}


@contextmanager
def game_of(kind: str) -> Iterator[int]:
    if kind == "kit":
        with demo_game() as (port, _game):
            yield port
    else:
        with handmade_game(**({"features": set()} if kind == "plain" else {})) as game:
            yield game.port


def contract_order(answer: dict[str, Any]) -> list[str]:
    return [key for key in answer if key in CONTRACT_FIELDS]


@pytest.mark.parametrize("kind", ["plain", "handmade", "kit"])
def test_every_answer_has_the_documented_fields(kind: str) -> None:
    tool, arguments = MOVES[kind]
    with game_of(kind) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                answers = [data(await call(client, tool, arguments)) for _ in range(5)]
                for answer in (answers[0], answers[4]):
                    assert contract_order(answer) == list(CONTRACT_FIELDS), answer
                    assert answer["port"] == port and answer["tool"] == tool and answer["command"] == tool
                    assert answer["via"] == "manifest" and answer["applied"] is True
                    assert isinstance(answer["commandId"], int) and isinstance(answer["frame"], int)
                    assert answer["screen"] and isinstance(answer["game"], dict) and answer["game"]
                    assert isinstance(answer["events"], list)
                    if kind == "plain":  # what only the extensions add is not made up
                        assert "result" not in answer and "eventsLeftOut" not in answer
                        assert answer["confirmation"] == "completedCommandId"
                    else:
                        assert "result" in answer and "simFrame" in answer and answer["paused"] is False
                        assert "text" in answer and "completedCommandId" in answer
                assert answers[4]["game"].keys() == answers[0]["game"].keys()  # the fifth as whole as the first
                until = {"path": "frame", "changes": True}
                settled = data(await call(client, tool, arguments, until=until))
                assert contract_order(settled) == list(CONTRACT_FIELDS) and settled["settled"] is True
                raw = data(await call(client, "raw_command", {"command": tool, "args": arguments}))
                assert contract_order(raw) == list(CONTRACT_FIELDS)
                assert raw["via"] == "raw" and raw["tool"] == tool and raw["command"] == tool
        anyio.run(main)


def test_a_game_that_serves_only_the_floor_still_gets_the_shape() -> None:
    """A /state with no ui, no game and no events: the contract's fields are there,
    empty, rather than missing."""
    from game_bridge_mcp.core.outcome import command_answer

    answer = command_answer({"port": 1, "tool": "t", "via": "raw", "command": "t", "applied": True,
                             "commandId": 3, "confirmation": "completedCommandId", "note": "n", "result": 1}, {})
    assert list(answer) == list(CONTRACT_FIELDS) + ["result", "note"]
    assert answer["frame"] is None and answer["screen"] is None and answer["game"] == {} and answer["events"] == []


@contextmanager
def paused_demo(seed: int = 7) -> Iterator[int]:
    game = FruitMerge(seed)
    kit = build(game, register=False, environ={"GAME_BRIDGE_START_PAUSED": "1"})
    with looping(kit, game.update, hz=300, render=game.frame_tick) as port:
        yield port


DIGEST_FIELDS = ("screen", "elements", "text", "game", "paused", "simFrame")


def test_each_digest_is_whole_across_commands_and_advance_on_a_paused_game() -> None:
    settle = {"until": {"path": "game.moving", "equals": 0}}
    with paused_demo() as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                steps = [("set_seed", {"seed": 7}), ("drop", {"x": 0}), ("advance", settle), ("drop", {"x": 0}),
                         ("advance", settle), ("hold", {}), ("get_state", {"summary": True}), ("restart", {})]
                answers: dict[str, dict[str, Any]] = {}
                for name, arguments in steps:
                    answer = data(await call(client, name, arguments))
                    look = data(await call(client, "get_state", {"summary": True}))
                    for field in DIGEST_FIELDS:  # what the answer shows is the state now, all of it
                        assert answer[field] == look[field], (name, field, answer[field], look[field])
                    assert answer.keys() >= set(look) - {"port"}, (name, set(look) - set(answer))
                    answers[name] = answer
                restarted = answers["restart"]["game"]
                assert restarted["score"] == 0 and restarted["drops"] == 0 and restarted["moving"] == 0
                whole = data(await call(client, "get_state"))
                assert whole["game"]["session"]["best"] == 3  # the round left early counts for the best
                assert answers["advance"]["value"] == 0 and answers["advance"]["path"] == "game.moving"
        anyio.run(main)


def test_a_flat_eager_tool_takes_until_as_call_tool_does(tmp_path: Any) -> None:
    from game_bridge_mcp.trace.reader import read_trace
    from mcp_harness import is_error, text

    with demo_game() as (port, _game):
        async def main() -> None:
            app = app_for(port, eager=True, record=tmp_path / "flat.trace")
            async with connect(app) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                flat = tools[f"p{port}_drop"]
                schema = getattr(flat, "input_schema", None) or getattr(flat, "inputSchema", {})
                assert "until" in schema["properties"] and "x" in schema["properties"]
                settled = data(await client.call_tool(f"p{port}_drop", {
                    "x": 0, "until": {"path": "game.moving", "equals": 0}}))
                assert settled["settled"] is True and settled["game"]["moving"] == 0
                assert contract_order(settled) == list(CONTRACT_FIELDS)
                bad = await client.call_tool(f"p{port}_drop", {"x": 0, "until": {"path": "game.moving", "eq": 0}})
                assert is_error(bad) and text(bad).startswith("BridgeUsageError: until: unknown key 'eq'")
                assert data(await client.call_tool(f"p{port}_drop", {"x": 1}))["applied"] is True  # still serving
            app.recorder.writer.close()
            calls = [c for c in read_trace(tmp_path / "flat.trace").calls if c.name == "drop"]
            assert calls[0].options == {"until": {"path": "game.moving", "equals": 0}}
            assert calls[0].arguments == {"x": 0}
        anyio.run(main)
