"""What ``list_toolsets`` and ``describe_toolset`` say about an instance: pure functions over its
normalised manifest and the composites that suit it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

from .composites import Composite
from ..errors import BridgeUsageError
from ..manifest.reader import Manifest, Toolset
from ..tools import BRIDGE_TOOLS

NEXT_STEP = "describe_toolset {port, name} gives exact schemas; call_tool {port, name, arguments} runs a tool."
FALLBACK_NOTE = ("This game publishes no command list (GET /tools). Send commands with call_tool name "
                 "'raw_command' (or any name: unknown names pass straight through) and read the results "
                 "with get_state.")
PASSTHROUGH_USAGE = ("call_tool {port, name: '<command>', arguments: {...}} sends any command the game accepts, "
                     "published or not; arguments become query parameters. If the game rejects the name you "
                     "get the list of what it accepts.")


def identity(manifest: Manifest) -> dict[str, Any]:
    """``game``, ``version``, ``protocol`` (when known) and ``manifest`` (its source)."""
    game = manifest.game if isinstance(manifest.game, Mapping) else {}
    out: dict[str, Any] = {}
    for key in ("name", "version", "protocol"):
        if game.get(key) is not None:
            out["game" if key == "name" else key] = game[key]
    out["manifest"] = manifest.source
    return out


def toolsets_report(port: int, manifest: Manifest, composites: Sequence[Composite]) -> dict[str, Any]:
    """The ``list_toolsets`` answer: the game's toolsets, then ``bridge`` and ``passthrough``."""
    toolsets: list[dict[str, Any]] = [
        {"name": ts.name, "description": ts.description, "tools": [t.name for t in ts.tools]}
        for ts in manifest.toolsets]
    toolsets.append({"name": "bridge", "description": "The bridge's own tools, for every conforming game"
                     + (", and composites registered for this game." if composites else "."),
                     "tools": [t.name for t in BRIDGE_TOOLS] + [c.name for c in composites]})
    toolsets.append({"name": "passthrough", "description": manifest.passthrough.get("description", ""),
                     "examples": list(manifest.passthrough.get("examples", []))})
    result: dict[str, Any] = {"port": port, **identity(manifest)}
    game = manifest.game if isinstance(manifest.game, Mapping) else {}
    if game.get("description"):
        result["description"] = game["description"]  # the game's rules, in its own words (sanitised, capped)
    result.update({"toolsets": toolsets, "next": NEXT_STEP})
    if manifest.source == "fallback":
        result["note"] = FALLBACK_NOTE
    diagnostics = manifest.to_diagnostics()
    if diagnostics.get("dropped") or diagnostics.get("problems"):
        result["diagnostics"] = diagnostics
    return result


def bridge_toolset(port: int, composites: Sequence[Composite],
                   composite_schema: Callable[[Composite], dict[str, Any]]) -> dict[str, Any]:
    tools = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema,
              "readOnly": t.read_only} for t in BRIDGE_TOOLS]
    tools += [{"name": c.name, "description": c.description, "inputSchema": composite_schema(c),
               "composite": True} for c in composites]
    return {"port": port, "name": "bridge",
            "description": "The bridge's own tools. Call them with call_tool {port, name, arguments}.",
            "tools": tools}


def passthrough_toolset(port: int, manifest: Manifest) -> dict[str, Any]:
    return {"port": port, "name": "passthrough", **manifest.passthrough, "usage": PASSTHROUGH_USAGE}


def game_toolset(port: int, toolset: Toolset) -> dict[str, Any]:
    return {"port": port, "name": toolset.name, "description": toolset.description,
            "tools": [{"name": t.name, "description": t.description, "inputSchema": t.input_schema,
                       **({"command": t.command} if t.command != t.name else {}),
                       **({"sync": False} if not t.sync else {})} for t in toolset.tools]}


def no_such_toolset(port: int, name: str, manifest: Manifest) -> BridgeUsageError:
    known = ", ".join(manifest.toolset_names() + ["bridge", "passthrough"])
    return BridgeUsageError(f"Port {port} has no toolset '{name}'. Its toolsets are: {known}.", port=port)
