"""One call per move: ``call_tool``'s ``until`` waits after the confirmation for
a condition and answers with the state that met it; ``wait_for`` carries that digest too;
a composite's context gets the same. Through the real MCP client, against the kit's demo
and the hand-made game."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from game_bridge_mcp import Composite
from game_bridge_mcp.core.waiting import Condition
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from loop_helpers import GAMES, MOVE, any_game, app_for, bridge_for, call, demo_game, error_text, handmade_game
from mcp_harness import connect, data


@pytest.mark.parametrize("kind", GAMES)
def test_until_matched_answers_with_the_state_that_met_it(kind: str) -> None:
    tool, arguments, until = MOVE[kind]
    with any_game(kind) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                body = data(await call(client, tool, arguments, until=until))
                assert body["applied"] is True and body["settled"] is True
                path = until["path"].split(".")[1]
                assert body["game"][path] == until["equals"]  # the digest is of the state that met it
                assert "result" in body and "lastValue" not in body
        anyio.run(main)


@pytest.mark.parametrize("kind", GAMES)
def test_until_timed_out_says_settled_false_with_the_last_value(kind: str) -> None:
    tool, arguments, _until = MOVE[kind]
    with any_game(kind) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                body = data(await call(client, tool, arguments,
                                       until={"path": "game.state", "equals": "WON", "timeoutMs": 150}))
                assert body["settled"] is False and body["lastValue"] == "RUNNING"
                assert body["note"] == "game.state equals 'WON' did not happen within 150ms."
        anyio.run(main)


def test_until_a_path_that_never_appears_says_so() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                body = data(await call(client, "noop", until={"path": "game.nothing.here", "equals": 1, "timeoutMs": 100}))
                assert body["settled"] is False and body["pathFound"] is False and body["lastValue"] is None
                assert "game.nothing.here was not in the state" in body["note"]
        anyio.run(main)


def test_until_changes_compares_with_the_state_before_the_command() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                # game.x changes within the command itself: still a change from before it
                body = data(await call(client, "move", {"dx": 2}, until={"path": "game.x", "changes": True}))
                assert body["settled"] is True and body["value"] == 2
                body = data(await call(client, "noop", until={"path": "game.x", "changes": True, "timeoutMs": 100}))
                assert body["settled"] is False and body["lastValue"] == 2
        anyio.run(main)


def test_until_changes_on_the_kit_waits_for_the_merge() -> None:
    with demo_game() as (port, _game):
        async def main() -> None:
            async with connect(app_for(port)) as client:
                first = data(await call(client, "drop", {"x": 0}, until={"path": "game.moving", "equals": 0}))
                assert first["game"]["score"] == 0 and first["game"]["current"] == "cherry"
                # seed 7 drops cherry, cherry: the second lands on the first and merges, later
                body = data(await call(client, "drop", {"x": 0}, until={"path": "game.score", "changes": True}))
                assert body["settled"] is True and body["value"] == 3 and body["game"]["score"] == 3
        anyio.run(main)


@pytest.mark.parametrize("kind", GAMES)
def test_until_event_counts_only_events_after_the_command(kind: str) -> None:
    tool, arguments, _until = MOVE[kind]
    needle = {"kit": "drop:", "handmade": "moved"}[kind]
    with any_game(kind) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                body = data(await call(client, tool, arguments, until={"event": needle}))
                assert body["settled"] is True and needle in body["value"]
                # that event is still among the recent ones, but it is not new: no match
                quiet = {"kit": ("set_seed", {"seed": 7}), "handmade": ("noop", {})}[kind]
                body = data(await call(client, *quiet, until={"event": needle, "timeoutMs": 150}))
                assert body["settled"] is False
        anyio.run(main)


def test_a_refusal_is_not_waited_on() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                refused = await call(client, "raw_command", {"command": "move", "args": {"dx": 9}},
                                     until={"path": "game.x", "equals": 99, "timeoutMs": 600000})
                assert error_text(refused).startswith("CommandFailed:")
                body = data(await call(client, "raw_command", {"command": "move", "args": {"dx": 1}},
                                       until={"path": "game.x", "equals": 1}))
                assert body["settled"] is True and body["via"] == "raw"
        anyio.run(main)


@pytest.mark.parametrize("until,needle", [
    ({"path": "game.x"}, "exactly one condition"),
    ({"path": "game.x", "equals": 1, "event": "x"}, "exactly one condition"),
    ({"equals": 1}, "'path' is required"),
    ({"path": "game.x", "equal": 1}, "unknown key 'equal'"),
    ({"path": "game.x", "changes": "yes"}, "'changes' must be true"),
    ({"event": ""}, "non-empty text"),
    ({"event": "x", "timeoutMs": 0}, "'timeoutMs' must be a whole number"),
    ("game.x", "must be of type object"),
])
def test_an_until_of_an_unknown_shape_is_a_clear_error(until: Any, needle: str) -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                message = error_text(await call(client, "move", {"dx": 1}, until=until))
                assert message.startswith("BridgeUsageError:") and needle in message
                assert game.x == 0  # nothing was sent
                assert data(await call(client, "move", {"dx": 1}))["applied"] is True
        anyio.run(main)


def test_until_belongs_to_commands_not_to_bridge_tools() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                message = error_text(await call(client, "get_state", {}, until={"path": "frame", "changes": True}))
                assert "'until' waits after a command; get_state is not one" in message
        anyio.run(main)


@pytest.mark.parametrize("kind", GAMES)
def test_wait_for_carries_the_digest_of_the_matching_state(kind: str) -> None:
    tool, arguments, until = MOVE[kind]
    with any_game(kind) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                data(await call(client, tool, arguments))
                body = data(await call(client, "wait_for", {**until, "timeoutMs": 5000}))
                assert body["matched"] is True
                assert body["game"][until["path"].split(".")[1]] == until["equals"] and "screen" in body
        anyio.run(main)


def _settle_drop(ctx: Any) -> dict[str, Any]:
    done = ctx.command_and_sync("drop", {"x": ctx.args["x"]}, until={"path": "game.moving", "equals": 0})
    return {"settled": done["settled"], "score": done["state"]["game"]["score"], "moving": done["game"]["moving"]}


def test_a_composite_context_waits_the_same_way() -> None:
    settle = Composite(name="drop_settled", description="Drop and wait for the board to settle.",
                       args=[{"name": "x", "type": "number", "required": True}], run=_settle_drop)
    with demo_game() as (port, _game):
        bridge = bridge_for(port, )
        bridge.composites = (settle,)

        async def main() -> None:
            async with connect(BridgeServer(bridge)) as client:
                body = data(await call(client, "drop_settled", {"x": 0}))
                assert body == {"port": port, "tool": "drop_settled", "via": "composite", "settled": True,
                                "score": 0, "moving": 0}
                body = data(await call(client, "drop_settled", {"x": 0}, until={"path": "game.moving", "equals": 0}))
                assert body["settled"] is True and body["score"] == 3
        anyio.run(main)


def test_a_condition_evaluates_one_state_at_a_time() -> None:
    condition, timeout = Condition.from_spec({"path": "game.x", "changes": True}, what="advance", timeout=False)
    assert timeout is None and condition.needs_baseline
    watch = condition.watch(baseline={"game": {"x": 1}})
    assert watch.observe({"game": {"x": 1}}) is False and watch.report() == {"lastValue": 1}
    assert watch.observe({"game": {"x": 2}}) is True and watch.report() == {"value": 2}
    event, _ = Condition.from_spec({"event": "merge"}, timeout=False)
    watch = event.watch(baseline={"events": [{"seq": 4, "m": "merge:a"}]})
    assert watch.observe({"events": [{"seq": 4, "m": "merge:a"}]}) is False
    assert watch.observe({"events": [{"seq": 4, "m": "merge:a"}, {"seq": 5, "m": "merge:b"}]}) is True
    assert watch.report() == {"value": "merge:b"}
    with pytest.raises(BridgeUsageError, match="advance: unknown key 'timeoutMs'"):
        Condition.from_spec({"event": "x", "timeoutMs": 5}, what="advance", timeout=False)


def test_the_demo_plays_a_full_game_in_one_call_per_move() -> None:
    """Each move is one call that says whether it worked, what it did, what happened and how
    the board looks, until the round is over (every drop in the middle column fills it)."""
    from game_bridge_mcp.cli.demo import board_from_text

    with demo_game(seed=11, hz=2000) as (port, _game):
        app = app_for(port)

        async def main() -> None:
            async with connect(app) as client:
                known = data(await call(client, "get_state", {"summary": True}))
                game, board = dict(known["game"]), board_from_text(known["text"])
                assert len(board) == 10 and all(len(row) == 7 for row in board)
                moves = 0
                while game["state"] == "RUNNING" and moves < 300:
                    x = 0
                    calls_before = app.bridge.client(port).stats["requests"]
                    answer = data(await call(client, "drop", {"x": x}, until={"path": "game.moving", "equals": 0,
                                                                            "timeoutMs": 20000}))
                    moves += 1
                    assert answer["applied"] is True and answer["settled"] is True  # it worked, and settled
                    result = answer["result"]  # what it did: where it went, what it scored (or that it ended the round)
                    assert "column" in result and ("scoreGained" in result or result.get("gameOver") is True), result
                    assert answer["events"], answer  # what happened
                    game.update(answer.get("game", {}))
                    if "text" in answer:  # how the board looks (left out only when unchanged)
                        board = board_from_text(answer["text"])
                    assert board[-1][3] is not None
                    assert app.bridge.client(port).stats["requests"] > calls_before
                assert game["state"] == "GAME_OVER", (moves, game)
                assert moves >= 5
                refused = await call(client, "drop", {"x": 0})
                assert error_text(refused).startswith("CommandFailed: 'drop' was applied")
        anyio.run(main)
