"""A game that explains itself (the contract extensions' manifest and state conventions):
``game.description`` in list_toolsets, ``enum`` / ``minimum`` / ``maximum`` in schemas,
``ui.text`` and ``paused`` in the digest. Through the real MCP client, against the kit's
demo and the hand-made game; hostile sizes are capped and the bridge keeps serving."""

from __future__ import annotations

import anyio

from game_bridge_mcp.core.digest import MAX_UI_TEXT, summarise
from game_bridge_mcp.manifest.reader import normalise_manifest
from game_bridge_mcp.manifest.sanitise import GAME_DESCRIPTION_LIMIT
from game_bridge_mcp.manifest.schema import args_to_schema
from loop_helpers import app_for, call, demo_game, error_text, handmade_game
from mcp_harness import connect, data


def test_list_toolsets_shows_the_rules_kit() -> None:
    with demo_game() as (port, _game):
        async def main() -> None:
            async with connect(app_for(port)) as client:
                listed = data(await client.call_tool("list_toolsets", {}))
                assert "cherry > strawberry > grape" in listed["description"]
                assert list(listed)[:3] == ["port", "game", "version"]
        anyio.run(main)


def test_list_toolsets_shows_the_rules_handmade_sanitised() -> None:
    with handmade_game(description="Move\u202e the block.\x07 Nothing ends it.") as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                listed = data(await client.call_tool("list_toolsets", {}))
                assert listed["description"] == "Move the block. Nothing ends it."
        anyio.run(main)


def test_a_description_of_megabytes_is_capped_and_noted() -> None:
    with handmade_game(lies={"huge-description"}) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                result = await client.call_tool("list_toolsets", {})
                listed = data(result)
                assert len(listed["description"]) <= GAME_DESCRIPTION_LIMIT
                assert any("game.description has 3000000 characters" in p for p in listed["diagnostics"]["problems"])
                assert len(result.content[0].text) < 10_000
                assert data(await call(client, "move", {"dx": 1}))["applied"] is True
        anyio.run(main)


def test_a_description_that_is_not_text_is_ignored_with_a_note() -> None:
    manifest = normalise_manifest({"game": {"name": "G", "description": {"rules": 1}}, "toolsets": []})
    assert "description" not in manifest.game
    assert any("game.description is an object" in p for p in manifest.problems)
    assert "description" not in normalise_manifest({"game": {"name": "G"}}).game


def test_ranges_and_choices_reach_the_schema_handmade() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                play = data(await client.call_tool("describe_toolset", {"name": "play"}))
                tools = {t["name"]: t["inputSchema"]["properties"] for t in play["tools"]}
                assert tools["move"]["dx"]["minimum"] == -3 and tools["move"]["dx"]["maximum"] == 3
                assert tools["spawn"]["kind"]["enum"] == ["crate", "barrel"]
                assert tools["emit"]["n"] == {"type": "integer", "description": "how many (default: 1)",
                                              "minimum": 1, "maximum": 1000}
                # the bridge holds the game to its own schema before sending anything
                message = error_text(await call(client, "move", {"dx": 9}))
                assert "'dx' must be between -3 and 3, not 9" in message and game.x == 0
        anyio.run(main)


def test_ranges_and_choices_reach_the_schema_kit() -> None:
    with demo_game() as (port, _game):
        async def main() -> None:
            async with connect(app_for(port)) as client:
                play = data(await client.call_tool("describe_toolset", {"name": "play"}))
                tools = {t["name"]: t["inputSchema"] for t in play["tools"]}
                assert tools["drop"]["properties"]["x"]["minimum"] == -3 and tools["drop"]["properties"]["x"]["maximum"] == 3
                assert "Start" in tools["click"]["properties"]["label"]["enum"]
                assert tools["drop"]["additionalProperties"] is False
                assert "must be one of" in error_text(await call(client, "click", {"label": "Nowhere"}))
        anyio.run(main)


def test_bounds_that_are_not_numbers_or_out_of_order_are_ignored_with_a_note() -> None:
    schema, problems = args_to_schema([{"name": "a", "type": "integer", "minimum": "0"},
                                       {"name": "b", "type": "number", "minimum": 5, "maximum": 1},
                                       {"name": "c", "type": "number", "maximum": 2.5}])
    assert "minimum" not in schema["properties"]["a"] and "minimum" not in schema["properties"]["b"]
    assert schema["properties"]["c"]["maximum"] == 2.5
    assert any("minimum is a string" in p for p in problems) and any("above maximum" in p for p in problems)


def test_the_digest_shows_ui_text_and_paused_kit() -> None:
    with demo_game() as (port, _game):
        async def main() -> None:
            async with connect(app_for(port)) as client:
                body = data(await call(client, "drop", {"x": 0}, until={"path": "game.moving", "equals": 0}))
                assert body["text"] == "(9 empty rows)\n...C..."  # the board, its empty rows folded
                assert body["paused"] is False
                again = data(await call(client, "drop", {"x": 1}, until={"path": "game.moving", "equals": 0}))
                assert again["paused"] is False and again["screen"] == "GameScreen"  # every answer whole
                paused = data(await call(client, "pause"))
                assert paused["paused"] is True
                summary = data(await call(client, "get_state", {"summary": True}))
                assert summary["paused"] is True and "text" in summary
                data(await call(client, "resume"))
        anyio.run(main)


def test_the_digest_shows_ui_text_capped_handmade() -> None:
    with handmade_game(ui_text="#" * 10_000 + "\x1b[31m") as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                body = data(await call(client, "noop"))
                assert len(body["text"]) <= MAX_UI_TEXT and body["text"].startswith("####")
                assert "\x1b" not in body["text"]
        anyio.run(main)


def test_summarise_reads_ui_text_only_when_it_is_text() -> None:
    assert "text" not in summarise({"ui": {"text": 42}}) and "text" not in summarise({"ui": {"text": "  "}})
    assert summarise({"ui": {"text": "a\nb"}})["text"] == "a\nb"


#: What a running game moves between two reads: the frame counters (and what came since).
_MOVING = ("frame", "simFrame", "events", "completedCommandId")


def test_a_commands_answer_is_whole_and_compact() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                answer = await call(client, "move", {"dx": 1})
                assert '": ' not in answer.content[0].text and '", "' not in answer.content[0].text  # compact JSON
                first = data(answer)
                assert first["screen"] == "PlayScreen" and first["game"]["x"] == 1 and first["game"]["spawned"] == 0
                assert first["tool"] == "move" and first["via"] == "manifest" and first["command"] == "move"
                second = data(await call(client, "move", {"dx": 1}))
                assert second["game"]["x"] == 2 and second["game"]["spawned"] == 0  # unchanged fields too
                assert second["screen"] == "PlayScreen" and second["text"] != first["text"]
                noop = data(await call(client, "noop"))
                assert noop["game"] == second["game"] and noop["screen"] == "PlayScreen"  # nothing changed, all shown
                whole = data(await call(client, "get_state", {"summary": True}))
                assert {k: v for k, v in whole.items() if k not in _MOVING} == {
                    k: v for k, v in noop.items() if k in whole and k not in _MOVING}
                raw = data(await call(client, "raw_command", {"command": "spawn"}))
                assert raw["via"] == "raw" and raw["tool"] == "spawn" and raw["game"]["spawned"] == 1
                assert raw["game"]["x"] == 2
        anyio.run(main)
