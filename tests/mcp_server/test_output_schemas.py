"""Every tool advertises an outputSchema, and real answers match it: the structuredContent
of calls to a fully extended game (the demo, on the kit), a plain one (FakeGame), one whose
state is hostile (wrong types, nesting past any sane depth) and a real launch, read through
the MCP client (which validates it too) and checked here with jsonschema, each call_tool
answer also against the one shape it should have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.mcp_server.encoding import TOO_DEEP
from game_bridge_mcp.core.tools.calls import COMMAND_ANSWER
from game_bridge_mcp.core.tools.clock import ADVANCE_ANSWER
from game_bridge_mcp.core.tools.events import EVENTS_ANSWER
from game_bridge_mcp.core.tools.instances import CLOSE_ANSWER
from game_bridge_mcp.core.tools.screenshots import SCREENSHOT_ANSWER
from game_bridge_mcp.core.tools.shapes import DEFS, admitting_errors
from game_bridge_mcp.core.tools.state import HEALTH_ANSWER, STATE_DIGEST, WAIT_ANSWER
from game_bridge_mcp.core.tools.table import FLAT_TOOL_OUTPUT, TOOL_NAMES
from kit_helpers import demo
from launch_helpers import ProcessGuard
from loop_helpers import bridge_for
from mcp_harness import connect, dump, is_error, structured, text
from peers.fakegame import FakeGame

pytestmark = pytest.mark.timeout(120)


def check(schema: dict[str, Any], value: Any, what: str) -> None:
    schema = schema if "$defs" in schema else {**schema, "$defs": DEFS}  # a shape alone, with its definitions
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"{what}: {errors[0].message} at {list(errors[0].path)}\n{json.dumps(value)[:1500]}"


class Session:
    """A client session that validates every answer against the advertised outputSchema."""

    def __init__(self, client: Any, schemas: dict[str, Any]) -> None:
        self.client = client
        self.schemas = schemas
        self.checked: list[str] = []

    async def call(self, name: str, arguments: dict[str, Any], shape: dict[str, Any] | None = None) -> Any:
        result = await self.client.call_tool(name, arguments)
        assert not is_error(result), text(result)
        value = structured(result)
        assert isinstance(value, dict), f"{name}: no structuredContent"
        check(self.schemas[name], value, name)
        if shape is not None:
            check(shape, value, f"{name} {arguments.get('name')}")
        assert json.loads(text(result)) == value or TOO_DEEP in json.dumps(value)
        self.checked.append(f"{name} {arguments.get('name', '')}".strip())
        return value


async def session(app: BridgeServer, body: Any) -> list[str]:
    async with connect(app) as client:
        listed = await client.list_tools()
        schemas = {tool.name: dump(tool)["outputSchema"] for tool in listed.tools}
        s = Session(client, schemas)
        await body(s)
        return s.checked


def test_every_tool_advertises_a_valid_object_schema() -> None:
    with FakeGame() as game:
        async def body(s: Session) -> None:
            assert set(s.schemas) == TOOL_NAMES

        anyio.run(session, BridgeServer(bridge_for(game.port)), body)
        eager = BridgeServer(bridge_for(game.port, eager=True))

        async def eager_tools() -> list[Any]:
            async with connect(eager) as client:
                return [dump(t) for t in (await client.list_tools()).tools]

        tools = anyio.run(eager_tools)
    assert len(tools) > len(TOOL_NAMES) + 8  # the advertised ones, the bridge toolset and the game's flat tools
    for tool in tools:
        schema = tool.get("outputSchema")
        assert isinstance(schema, dict) and schema.get("type") == "object", tool["name"]
        Draft202012Validator.check_schema(schema)
    flat = [t for t in tools if t["name"].startswith("p")]
    assert flat and all(t["outputSchema"] == admitting_errors(FLAT_TOOL_OUTPUT) for t in flat)


def test_a_fully_extended_games_answers_match() -> None:
    with demo() as port:
        async def body(s: Session) -> None:
            p = {"port": port}
            await s.call("list_toolsets", p)
            for toolset in ("play", "bridge", "passthrough", "clock"):
                await s.call("describe_toolset", {**p, "name": toolset})
            await s.call("call_tool", {**p, "name": "restart"}, COMMAND_ANSWER)
            await s.call("call_tool", {**p, "name": "drop", "arguments": {"x": 0}}, COMMAND_ANSWER)
            await s.call("call_tool", {**p, "name": "drop", "arguments": {"x": 1}}, COMMAND_ANSWER)  # pending, paused
            await s.call("call_tool", {**p, "name": "advance", "arguments": {"until": {"path": "game.moving", "equals": 0}}},
                         ADVANCE_ANSWER)
            await s.call("call_tool", {**p, "name": "advance", "arguments": {"frames": 3}}, ADVANCE_ANSWER)
            await s.call("call_tool", {**p, "name": "get_state", "arguments": {"summary": True}}, STATE_DIGEST)
            await s.call("call_tool", {**p, "name": "get_state"})
            await s.call("call_tool", {**p, "name": "get_health"}, HEALTH_ANSWER)
            await s.call("call_tool", {**p, "name": "get_events", "arguments": {"limit": 5}}, EVENTS_ANSWER)
            await s.call("call_tool", {**p, "name": "get_screenshot", "arguments": {"maxWidth": 64}}, SCREENSHOT_ANSWER)
            await s.call("call_tool", {**p, "name": "resume"}, COMMAND_ANSWER)
            await s.call("call_tool", {**p, "name": "drop", "arguments": {"x": -1},
                                       "until": {"path": "game.moving", "equals": 0, "timeoutMs": 10000}}, COMMAND_ANSWER)
            await s.call("call_tool", {**p, "name": "wait_for", "arguments": {"path": "game.moving", "changes": True,
                                                                              "timeoutMs": 200}}, WAIT_ANSWER)
            await s.call("call_tool", {**p, "name": "raw_command", "arguments": {"command": "noop"}}, COMMAND_ANSWER)
            await s.call("call_tool", {**p, "name": "close"}, CLOSE_ANSWER)

        checked = anyio.run(session, BridgeServer(bridge_for(port)), body)
    assert len(checked) == 20


def test_a_plain_game_and_a_hostile_state_match() -> None:
    with FakeGame() as plain, FakeGame() as hostile:
        deep: Any = "bottom"
        for _ in range(200):
            deep = {"d": deep}

        def state(handler: Any) -> None:  # every field the bridge reads, of the wrong type, and a deep tree
            handler.send_json(200, {"frame": "soon", "screen": 5, "ui": {"text": ["not", "text"]}, "game": [1, 2],
                                    "events": "none", "completedCommandId": "x", "paused": "maybe", "deep": deep,
                                    "tool": 7, "applied": "yes", "port": "mine"})

        hostile.overrides["/state"] = state

        async def plain_calls(s: Session) -> None:
            await s.call("list_instances", {"range": str(plain.port)})
            await s.call("list_toolsets", {})
            await s.call("call_tool", {"name": "add_score", "arguments": {"n": 2}}, COMMAND_ANSWER)
            await s.call("call_tool", {"name": "hidden_cmd"}, COMMAND_ANSWER)  # passthrough
            await s.call("call_tool", {"name": "get_state", "arguments": {"summary": True}}, STATE_DIGEST)
            await s.call("call_tool", {"name": "wait_for", "arguments": {"path": "game.score", "equals": -5,
                                                                         "timeoutMs": 100}}, WAIT_ANSWER)

        async def hostile_calls(s: Session) -> None:
            whole = await s.call("call_tool", {"name": "get_state"})
            assert whole["port"] == "mine" and TOO_DEEP in json.dumps(whole)  # the game's own document, cut deep
            await s.call("call_tool", {"name": "get_state", "arguments": {"summary": True}})
            await s.call("call_tool", {"name": "get_health"}, HEALTH_ANSWER)

        assert len(anyio.run(session, BridgeServer(bridge_for(plain.port)), plain_calls)) == 6
        assert len(anyio.run(session, BridgeServer(bridge_for(hostile.port)), hostile_calls)) == 3


@pytest.mark.slow
def test_a_launch_its_log_and_its_stop_match(tmp_path: Path, guard: ProcessGuard) -> None:  # noqa: F811
    from game_bridge_mcp.cli.demo import write_declaration
    from game_bridge_mcp.launch.declaration import apply_project_config
    from launch_helpers import free_range

    path = write_declaration(tmp_path, hz=200)
    doc = json.loads(path.read_text())
    low, high = free_range(4)
    doc["launch"]["portRange"] = f"{low}-{high}"
    path.write_text(json.dumps(doc))
    config = Config(config_file=path, environ={**guard.env, "GAME_BRIDGE_HOME": str(tmp_path / "gb")}, scan_range=(1,))
    apply_project_config(config)
    bridge = Bridge(config)

    async def body(s: Session) -> None:
        launched = await s.call("launch_instance", {"paused": True})
        await s.call("instance_log", {"port": launched["port"], "lines": 5})
        listed = await s.call("list_instances", {})
        assert any(e["port"] == launched["port"] for e in listed["live"])
        await s.call("stop_instance", {"port": launched["port"]})

    try:
        assert len(anyio.run(session, BridgeServer(bridge), body)) == 4
    finally:
        bridge.shutdown()


def test_a_large_answer_still_carries_its_structured_content() -> None:
    with FakeGame(padding_bytes=400 * 1024) as game:
        async def body(s: Session) -> None:
            whole = await s.call("call_tool", {"name": "get_state"})
            assert len(json.dumps(whole)) > 400 * 1024

        anyio.run(session, BridgeServer(bridge_for(game.port)), body)


def test_every_tools_errors_match_its_schema(tmp_path: Path) -> None:
    """An error's structuredContent matches the advertised outputSchema too: the TypeScript
    SDK's client checks it on errors (the Python SDK's does not), and a mismatch would turn
    the bridge's own words into a protocol error. One real error of each tool, with the name
    and message in the text block as before."""
    config = Config(environ={"GAME_BRIDGE_HOME": str(tmp_path / "gb")}, scan_range=(1,), port=1,
                    registry_dir=tmp_path / "instances")
    (tmp_path / "instances").mkdir()
    calls = {
        "launch_instance": {},  # no declaration here
        "list_instances": {"port": 70000},  # an argument it does not take
        "stop_instance": {"port": 1},  # not launched by this bridge
        "instance_log": {"port": 1},
        "list_toolsets": {"port": 1},  # nothing answers there
        "describe_toolset": {"port": 1, "name": "core"},
        "call_tool": {"port": 1, "name": "get_state"},
    }
    assert set(calls) == TOOL_NAMES

    async def body() -> None:
        async with connect(BridgeServer(Bridge(config))) as client:
            schemas = {tool.name: dump(tool)["outputSchema"] for tool in (await client.list_tools()).tools}
            for name, arguments in calls.items():
                result = await client.call_tool(name, arguments)
                assert is_error(result), f"{name}: {text(result)}"
                value = structured(result)
                assert isinstance(value, dict) and value["error"] == text(result).split(":", 1)[0], (name, value)
                assert value.get("message", "") in text(result)
                check(schemas[name], value, f"{name}'s error")

    anyio.run(body)
