"""The toolsets tools: ``list_toolsets`` and ``describe_toolset``, what an instance is and
can do, from its manifest (the Bridge fetches and caches it), the composites that suit the
game and the bridge's own toolset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import BridgeUsageError
from ...manifest.reader import Manifest, Toolset
from ..composites import Composite, composite_schema, suited
from ..host import Host
from .shapes import INT, STR, STR_OR_NULL, answer, from_game
from .unit import BRIDGE_LIST, PORT, ToolDef, schema


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


def toolsets_report(port: int, manifest: Manifest, composites: Sequence[Composite],
                    toolset: Sequence[ToolDef]) -> dict[str, Any]:
    """The ``list_toolsets`` answer: the game's toolsets, then ``bridge`` and ``passthrough``."""
    toolsets: list[dict[str, Any]] = [
        {"name": ts.name, "description": ts.description, "tools": [t.name for t in ts.tools]}
        for ts in manifest.toolsets]
    toolsets.append({"name": "bridge", "description": "The bridge's own tools, for every conforming game"
                     + (", and composites registered for this game." if composites else "."),
                     "tools": [t.name for t in toolset] + [c.name for c in composites]})
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


def bridge_toolset(port: int, composites: Sequence[Composite], toolset: Sequence[ToolDef]) -> dict[str, Any]:
    tools = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema,
              "readOnly": t.read_only} for t in toolset]
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


# ----------------------------------------------------------------------------- list_toolsets

LIST_TOOLSETS_ANSWER = answer("list_toolsets' answer", {
    "port": INT, "game": from_game("Its name"), "version": from_game("Its version"), "protocol": from_game("Its protocol"),
    "manifest": STR_OR_NULL, "description": from_game("Its rules, in its own words"),
    "toolsets": {"type": "array", "items": answer("a toolset (passthrough lists examples, not tools)", {
        "name": STR, "description": STR_OR_NULL, "tools": {"type": "array", "items": STR},
        "examples": {"type": "array", "items": STR}}, ("name",))},
    "next": STR,
}, ("port", "toolsets"))


def list_toolsets(bridge: Host, *, port: Any = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    manifest = bridge.manifest(target)
    return toolsets_report(target, manifest, suited(bridge.composites, manifest), bridge.toolset)


LIST_TOOLSETS = ToolDef(
    "list_toolsets", "List an instance's toolsets",
    "What this game instance is and can do, as it describes itself: its description (the rules, how to "
    "win or lose), its toolsets with their tool names, the bridge's own toolset ('bridge') and "
    "'passthrough'. Call describe_toolset next for exact argument schemas (ranges and choices included).",
    schema({"port": PORT}),
    list_toolsets, LIST_TOOLSETS_ANSWER, read_only=True, idempotent=True)

# ----------------------------------------------------------------------------- describe_toolset

DESCRIBE_ANSWER = answer("describe_toolset's answer", {
    "port": INT, "name": STR, "description": STR_OR_NULL,
    "tools": {"type": "array", "items": answer("a tool", {"name": STR, "description": STR_OR_NULL,
                                                           "inputSchema": {"type": "object"}}, ("name",))},
}, ("port", "name"))


def describe_toolset(bridge: Host, *, name: str, port: Any = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    manifest = bridge.manifest(target)
    if name == "bridge":
        return bridge_toolset(target, suited(bridge.composites, manifest), bridge.toolset)
    if name == "passthrough":
        return passthrough_toolset(target, manifest)
    toolset = manifest.toolset(name)
    if toolset is None:
        toolset = bridge.refetch_for(target, "toolset " + name, lambda m: m.toolset(name))
        manifest = bridge.manifest(target)
    if toolset is None:
        raise no_such_toolset(target, name, manifest)
    return game_toolset(target, toolset)


DESCRIBE_TOOLSET = ToolDef(
    "describe_toolset", "Describe one toolset",
    "Full JSON Schemas of the tools in one toolset of this instance. 'bridge' gives the bridge's own "
    f"tools ({BRIDGE_LIST} and composites); 'passthrough' explains "
    "how to send commands the game does not publish.",
    schema({"port": PORT, "name": {"type": "string", "description": "The toolset's name, from list_toolsets."}}, ("name",)),
    describe_toolset, DESCRIBE_ANSWER, read_only=True, idempotent=True)
