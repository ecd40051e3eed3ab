"""The advertised surface: one table drives it, every entry has a method that takes exactly
its arguments, and a snapshot pins what a client sees (``tools/list`` over the real MCP
client, the ``--eager`` list, the bridge toolset's schemas and the server's instructions),
so a change to the surface is always deliberate.

After a deliberate change, accept it with: ``UPDATE_SNAPSHOTS=1 python -m pytest tests/mcp_server/test_surface.py``
and review the diff of ``tests/mcp_server/snapshots/surface.json``."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

from game_bridge_mcp.config import Config
from game_bridge_mcp.contract import BRIDGE_TOOLSET
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.core.tools.table import BRIDGE_TOOLS, INSTRUCTIONS, TOOLS
from game_bridge_mcp.core.tools.toolsets import describe_toolset
from game_bridge_mcp.core.tools.unit import python_name
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from mcp_harness import connect, dump, run
from peers.fakegame import FakeGame

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "surface.json"


def test_every_table_entry_has_a_handler_that_takes_exactly_its_arguments() -> None:
    for tool in TOOLS + BRIDGE_TOOLS:
        handler = tool.handler
        assert callable(handler), f"{tool.name}: its handler is not callable"
        signature = inspect.signature(handler)
        first = next(iter(signature.parameters.values()))
        assert first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, f"{tool.name}: the handler takes the Bridge first"
        params = {name for name, p in signature.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert len(signature.parameters) == len(params) + 1, f"{tool.name}: the handler takes only keywords after the Bridge"
        declared = {python_name(arg) for arg in tool.input_schema.get("properties", {})}
        expected = declared | ({"progress"} if tool.progress else set())
        assert params == expected, f"{tool.name}: {handler.__name__} takes {sorted(params)}, the table gives {sorted(expected)}"
        for arg in tool.input_schema.get("required", []):
            assert signature.parameters[python_name(arg)].default is inspect.Parameter.empty, \
                f"{tool.name}: '{arg}' is required by the schema but has a default in the handler"


def test_tool_names_are_unique_across_the_table() -> None:
    names = [t.name for t in TOOLS + BRIDGE_TOOLS]
    assert len(names) == len(set(names))


def test_the_names_a_game_may_not_use_are_the_bridge_toolset() -> None:
    """The contract reserves the bridge toolset's names (a game's tool of one is dropped):
    the table's bridge tools, in its order."""
    assert BRIDGE_TOOLSET == tuple(t.name for t in BRIDGE_TOOLS)


async def _surface() -> dict[str, Any]:
    out: dict[str, Any] = {"instructions": INSTRUCTIONS}
    with FakeGame() as game:
        plain = BridgeServer(Bridge(Config(port=game.port, scan=False, registry=False, environ={})))
        async with connect(plain) as client:
            out["tools/list"] = [dump(t) for t in (await client.list_tools()).tools]
        eager = BridgeServer(Bridge(Config(port=game.port, scan=False, registry=False, eager=True, environ={})))
        async with connect(eager) as client:
            listed = [dump(t) for t in (await client.list_tools()).tools]
        # Flat game tools carry the port, which differs run to run.
        out["tools/list --eager (bridge part)"] = [t for t in listed if not t["name"].startswith(f"p{game.port}_")]
        bridge = Bridge(Config(port=game.port, environ={}))
        toolset = describe_toolset(bridge, name="bridge")
        toolset.pop("port", None)
        out["describe_toolset bridge"] = toolset
    return out


def test_what_a_client_sees_matches_the_snapshot() -> None:
    surface = json.loads(json.dumps(run(_surface)))
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(surface, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    pinned = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    for key in sorted(set(pinned) | set(surface)):
        assert surface.get(key) == pinned.get(key), (
            f"The advertised surface changed ({key}). If that is deliberate, run "
            "UPDATE_SNAPSHOTS=1 python -m pytest tests/mcp_server/test_surface.py and review the snapshot's diff.")
