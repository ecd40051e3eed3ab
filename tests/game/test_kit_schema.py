"""Exact schemas from the kit: bounds and choices declared with a command are published
(enum, minimum, maximum, an inputSchema with additionalProperties false) and enforced;
game.description in /tools."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

import pytest

from game_bridge_mcp.game import Arg, GameBridge, Range
from game_bridge_mcp.manifest.reader import normalise_manifest
from kit_helpers import fetch, looping, outcome, settled

pytestmark = pytest.mark.timeout(30)


def make() -> GameBridge:
    bridge = GameBridge("Schema Test", "1", register=False,
                        description="Move the cursor; reach the corner to win.")

    @bridge.command
    def move(x: Annotated[int, Range(-3, 3)], speed: Annotated[float, "How fast.", Arg(minimum=0.5)] = 1.0,
             mode: Literal["walk", "run"] = "walk", tag: Optional[str] = None) -> dict[str, Any]:
        """Move the cursor.

        Args:
            x: Column, left to right.
        """
        return {"x": x, "speed": speed, "mode": mode, "tag": tag}

    @bridge.command(args={"level": Arg("Which level.", choices=[1, 2, 3]), "zoom": Arg(maximum=4)})
    def load(level: int, zoom: float = 1) -> int:
        """Load a level."""
        return level

    @bridge.command
    def anything(**extra: str) -> dict[str, str]:
        """Pass whatever."""
        return dict(extra)

    return bridge


def tools(bridge: GameBridge) -> dict[str, Any]:
    return {tool["name"]: tool for ts in bridge.manifest()["toolsets"] for tool in ts["tools"]}


def test_declared_bounds_and_choices_are_published_on_args_and_in_an_exact_schema() -> None:
    bridge = make()
    move = tools(bridge)["move"]
    assert move["args"] == [
        {"name": "x", "type": "integer", "description": "Column, left to right.", "required": True,
         "default": None, "minimum": -3, "maximum": 3},
        {"name": "speed", "type": "number", "description": "How fast.", "required": False, "default": 1.0,
         "minimum": 0.5},
        {"name": "mode", "type": "string", "description": "", "required": False, "default": "walk",
         "enum": ["walk", "run"]},
        {"name": "tag", "type": "string", "description": "", "required": False, "default": None},
    ]
    assert move["inputSchema"] == {
        "type": "object",
        "properties": {
            "x": {"type": "integer", "description": "Column, left to right.", "minimum": -3, "maximum": 3},
            "speed": {"type": "number", "description": "How fast.", "minimum": 0.5, "default": 1.0},
            "mode": {"type": "string", "enum": ["walk", "run"], "default": "walk"},
            "tag": {"type": "string"},
        },
        "required": ["x"],
        "additionalProperties": False,
    }
    load = tools(bridge)["load"]["inputSchema"]
    assert load["properties"]["level"] == {"type": "integer", "description": "Which level.", "enum": [1, 2, 3]}
    assert load["properties"]["zoom"] == {"type": "number", "maximum": 4, "default": 1}
    assert tools(bridge)["anything"]["inputSchema"] == {"type": "object", "properties": {},
                                                        "additionalProperties": True}


def test_the_bridge_reads_the_schema_as_published() -> None:
    bridge = make()
    manifest = normalise_manifest(bridge.manifest())
    assert not manifest.dropped and not manifest.problems
    move = manifest.find("move")
    assert move is not None and move.input_schema == tools(bridge)["move"]["inputSchema"]


def test_the_description_is_game_description() -> None:
    assert make().manifest()["game"] == {"name": "Schema Test", "version": "1", "protocol": 1,
                                         "description": "Move the cursor; reach the corner to win."}
    assert "description" not in GameBridge(register=False).manifest()["game"]


@pytest.mark.parametrize("query, fragment", [
    ("cmd=move&x=10", "argument 'x' of 'move' must be between -3 and 3 (got 10)"),
    ("cmd=move&x=-4", "must be between -3 and 3 (got -4)"),
    ("cmd=move&x=0&speed=0.1", "argument 'speed' of 'move' must be at least 0.5 (got 0.1)"),
    ("cmd=move&x=0&mode=fly", "argument 'mode' of 'move' must be one of 'walk', 'run' (got 'fly')"),
    ("cmd=load&level=4", "must be one of 1, 2, 3 (got 4)"),
    ("cmd=load&level=1&zoom=4.5", "must be at most 4 (got 4.5)"),
    ("cmd=move&x=0&colour=red", "'move' has no argument 'colour'"),
])
def test_values_outside_the_declaration_are_refused_before_queueing(query: str, fragment: str) -> None:
    bridge = make()
    with looping(bridge) as port:
        status, body = fetch(port, "/command?" + query)
        assert status == 400 and body["accepted"] is False and fragment in body["error"], body
        assert bridge.completed_command_id == 0


def test_values_inside_the_declaration_reach_the_command() -> None:
    bridge = make()
    with looping(bridge) as port:
        state = settled(port, "cmd=move&x=-3&speed=0.5&mode=run")
        assert outcome(state, 1)["result"] == {"x": -3, "speed": 0.5, "mode": "run", "tag": None}
        assert outcome(settled(port, "cmd=load&level=3&zoom=4"), 2)["result"] == 3
        assert outcome(settled(port, "cmd=anything&a=1"), 3)["result"] == {"a": "1"}


def bad_bounds(x: Annotated[str, Range(0, 1)]) -> None: ...
def bad_order(x: Annotated[int, Range(5, 1)]) -> None: ...
def bad_default(x: Annotated[int, Range(0, 3)] = 9) -> None: ...
def bad_choice(x: Annotated[int, Arg(choices=["a"])]) -> None: ...
def bad_literal(x: Literal["a", 1]) -> None: ...
def bad_bound_type(x: Annotated[int, Arg(minimum="0")]) -> None: ...  # type: ignore[arg-type]


@pytest.mark.parametrize("func, error, fragment", [
    (bad_bounds, TypeError, "only numbers take a minimum or maximum"),
    (bad_order, ValueError, "minimum 5 is above maximum 1"),
    (bad_default, ValueError, "its default does not fit"),
    (bad_choice, TypeError, "choice 'a' is not of its type, integer"),
    (bad_literal, TypeError, "mixes types"),
    (bad_bound_type, TypeError, "a bound must be a finite number"),
])
def test_declarations_that_cannot_be_served_are_refused_at_registration(func: Any, error: type,
                                                                        fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        GameBridge(register=False).command(func)


def test_args_must_name_parameters() -> None:
    with pytest.raises(ValueError, match="not one of its parameters"):
        GameBridge(register=False).command(lambda x: None, name="f", args={"y": "why"})


def json_args() -> GameBridge:
    bridge = GameBridge("JSON Test", "1", register=False)

    @bridge.command
    def push(force: Annotated[list, "Newtons per axis.", Arg(schema={"items": {"type": "number"}, "minItems": 2,
                                                                      "maxItems": 2})],
             where: Annotated[dict, Arg(schema={"properties": {"room": {"type": "string"}}})] = None  # type: ignore[assignment]
             ) -> dict[str, Any]:
        """Push something."""
        return {"force": force, "where": where}

    return bridge


def test_list_and_dict_arguments_are_json_values_with_the_schema_the_command_gives() -> None:
    import urllib.parse

    from game_bridge_mcp.wire.client import _format_arg

    bridge = json_args()
    schema = tools(bridge)["push"]["inputSchema"]
    assert schema["properties"]["force"] == {"type": "array", "description": "Newtons per axis.",
                                             "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    assert schema["properties"]["where"] == {"type": "object", "properties": {"room": {"type": "string"}}}
    assert schema["required"] == ["force"]
    manifest = normalise_manifest(bridge.manifest())
    assert not manifest.dropped and not manifest.problems
    with looping(bridge) as port:
        # what the bridge's client puts on the wire for an array and an object
        query = "cmd=push&force=" + urllib.parse.quote_plus(_format_arg([1.5, -2])) + \
                "&where=" + urllib.parse.quote_plus(_format_arg({"room": "hall"}))
        assert outcome(settled(port, query), 1)["result"] == {"force": [1.5, -2], "where": {"room": "hall"}}
        for bad, fragment in (("force=3", "must be an array (JSON)"), ("force=%5B1%2C", "must be a JSON array"),
                              ("force=%5B1%5D&where=%5B%5D", "argument 'where' of 'push' must be an object"),
                              ("force=%5BNaN%5D", "must be a JSON array")):
            status, body = fetch(port, "/command?cmd=push&" + bad)
            assert status == 400 and fragment in body["error"], (bad, body)


def test_list_and_dict_arguments_may_say_their_items_as_typed_code_does() -> None:
    """``list[float]`` and ``dict[str, Any]`` (what mypy --strict asks for) are a JSON array and object."""
    def aim(force: list[float], where: dict[str, Any] | None = None) -> None: ...

    bridge = GameBridge(register=False)
    bridge.command(aim)
    schema = tools(bridge)["aim"]["inputSchema"]
    assert schema["properties"]["force"]["type"] == "array" and schema["properties"]["where"]["type"] == "object"
    assert schema["required"] == ["force"]


def wide_choice(x: Annotated[str, Arg(choices=[f"c{i}" for i in range(257)])]) -> None: ...
def json_choice(x: Annotated[list, Arg(choices=[1])]) -> None: ...
def json_type_in_schema(x: Annotated[list, Arg(schema={"type": "string"})]) -> None: ...


@pytest.mark.parametrize("func, error, fragment", [
    (wide_choice, ValueError, "give 1 to 256 choices, not 257"),
    (json_choice, TypeError, "only strings, numbers and booleans take choices"),
    (json_type_in_schema, ValueError, "may not set type"),
])
def test_json_arguments_and_choices_that_cannot_be_served(func: Any, error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        GameBridge(register=False).command(func)
    GameBridge(register=False).command(lambda x: x, name="many", args={"x": Arg(choices=[f"c{i}" for i in range(256)])})
