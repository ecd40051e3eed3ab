"""Command outcomes (docs/contract.md, ``results``): a refused command is
CommandFailed with the game's reason and the state after it, a result reaches the answer,
and a game without the feature (or with a broken list) is treated as before.

Through the real MCP client, against the kit's demo and the hand-made game."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest

from game_bridge_mcp.cli import call as call_cli
from game_bridge_mcp.core.outcome import MAX_RESULT, command_outcome
from game_bridge_mcp.errors import ERROR_TYPES, CommandFailed
from game_bridge_mcp.wire.client import GameClient, read_features
from loop_helpers import app_for, call, demo_game, error_text, handmade_game
from mcp_harness import connect, data, structured


def test_a_result_reaches_the_answer_kit() -> None:
    with demo_game() as (port, _game):
        async def main() -> None:
            async with connect(app_for(port)) as client:
                body = data(await call(client, "drop", {"x": 0}))
                assert body["applied"] is True
                assert body["result"]["column"] == 3 and "scoreGained" in body["result"]
        anyio.run(main)


def test_a_result_reaches_the_answer_handmade() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                body = data(await call(client, "move", {"dx": 2}))
                assert body["result"] == {"x": 2}
                nothing = data(await call(client, "noop"))
                assert "result" not in nothing and nothing["applied"] is True
        anyio.run(main)


def test_a_refusal_is_command_failed_with_the_reason_and_the_state_after_kit() -> None:
    with demo_game() as (port, _game):
        async def main() -> None:
            async with connect(app_for(port)) as client:
                data(await call(client, "hold"))
                refused = await call(client, "hold")
                message = error_text(refused)
                assert message.startswith(f"CommandFailed: 'hold' was applied on port {port}, but the game refused it: ")
                assert "one hold per drop" in message
                assert "State after it: " in message and '"screen":"GameScreen"' in message
                body = structured(refused)
                assert body["error"] == "CommandFailed" and body["after"]["game"]["held"] is not None
                # the bridge keeps serving
                assert data(await call(client, "drop", {"x": 1}))["applied"] is True
        anyio.run(main)


def test_a_refusal_is_command_failed_handmade_and_through_raw_command() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                refused = await call(client, "raw_command", {"command": "move", "args": {"dx": 9}})
                assert "must be between -3 and 3 (got 9)" in error_text(refused)
                assert structured(refused)["commandId"] >= 1
                # the schema's enum is checked by the bridge before sending; sent raw, the game refuses it
                refused = await call(client, "spawn", {"kind": "dragon"})
                assert error_text(refused).startswith("BridgeUsageError: spawn: the argument 'kind' must be one of")
                refused = await call(client, "raw_command", {"command": "spawn", "args": {"kind": "dragon"}})
                assert error_text(refused).startswith("CommandFailed: 'spawn' was applied")
        anyio.run(main)


def test_a_game_without_results_is_treated_as_before() -> None:
    with handmade_game(features=()) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                body = data(await call(client, "raw_command", {"command": "move", "args": {"dx": 9}}))  # refused, unsaid
                assert body["applied"] is True and "result" not in body and "resultNote" not in body
        anyio.run(main)


@pytest.mark.parametrize("lie,needle", [("results-not-list", "not a list"),
                                        ("results-bad-types", "not {id: number, ok: true/false}")])
def test_a_broken_command_results_is_ignored_with_a_note(lie: str, needle: str) -> None:
    with handmade_game(lies={lie}) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                body = data(await call(client, "raw_command", {"command": "move", "args": {"dx": 9}}))
                assert body["applied"] is True and needle in body["resultNote"]
        anyio.run(main)


def test_a_result_of_megabytes_is_capped() -> None:
    with handmade_game(lies={"huge-result"}) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                result = await call(client, "spawn", {"kind": "crate"})
                body = data(result)
                assert len(str(body["result"])) < MAX_RESULT and body["resultNote"].startswith("The result was cut")
                assert len(result.content[0].text) < 4000
        anyio.run(main)


def test_command_outcome_reads_only_well_formed_entries() -> None:
    entries = [{"id": 3, "ok": True, "result": {"a": 1}}, {"id": 4, "ok": False, "error": "no\x07 way\u202e"},
               {"id": 5, "ok": "yes"}, {"id": 6, "ok": False, "error": 42}, {"id": 7, "ok": True}]
    state = {"commandResults": entries}
    assert command_outcome(state, 3).result == {"a": 1}
    failed = command_outcome(state, 4)
    assert failed.ok is False and failed.reason == "no way"  # control and bidi characters removed
    assert command_outcome(state, 5).ok is None and "'ok' a string" in (command_outcome(state, 5).note or "")
    assert command_outcome(state, 6).reason == "the game gave no reason"
    assert command_outcome(state, 7).ok is True and not command_outcome(state, 7).has_result
    assert command_outcome(state, 8).ok is None and command_outcome(state, 8).note is None  # rolled past
    assert command_outcome({}, 3).ok is None and command_outcome(state, None).ok is None
    # result=False (advance's steps): the same verdict and reason, the result left unread
    unread = command_outcome(state, 3, result=False)
    assert unread.ok is True and not unread.has_result and unread.result is None and unread.note is None
    assert command_outcome(state, 4, result=False).reason == "no way"
    assert command_outcome(state, 5, result=False).ok is None


def test_features_are_read_from_every_health_and_forgotten_on_restart() -> None:
    assert read_features({"features": ["results", 3, "", "x" * 65, "events"]}) == {"results", "events"}
    assert read_features({"features": "results"}) == frozenset() and read_features({}) == frozenset()
    with handmade_game(features=("results",)) as game:
        client = GameClient(game.port)
        assert client.features is None and not client.has_feature("results")
        assert client.learn_features() == {"results"} and client.has_feature("results")
        client.forget()
        assert client.features is None


def test_call_exits_with_its_own_code_for_command_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert CommandFailed in ERROR_TYPES and len({e.exit_code for e in ERROR_TYPES}) == len(ERROR_TYPES)
    assert CommandFailed.exit_code == 6 and "6 CommandFailed" in call_cli.CALL_USAGE
    with handmade_game() as game:
        out, err = io.StringIO(), io.StringIO()
        code = call_cli.main(["raw_command", '{"command": "move", "args": {"dx": 9}}', "--port", str(game.port), "--no-registry", "--no-scan"],
                             stdout=out, stderr=err, environ={"GAME_BRIDGE_HOME": str(tmp_path)})
        assert code == 6, err.getvalue()
        assert err.getvalue().startswith("CommandFailed: 'move' was applied"), err.getvalue() and out.getvalue() == ""
