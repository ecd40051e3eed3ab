"""The calls tools: ``call_tool``, which runs any tool on an instance (the bridge's, a
composite, the game's manifest, then passthrough), and the bridge toolset's ``raw_command``.
A command's way through the bridge is core/tools/commands.py's."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ...config import check_port
from ...contract import BRIDGE_TOOLSET, condition_properties
from ...errors import BridgeError, BridgeUsageError, CommandRejected
from ...manifest.reader import Manifest, ToolSpec
from ...wire.client import GameClient
from .commands import run_command, settle
from ..composites import Composite, CompositeContext, composite_schema, suited
from ..host import Host, Progress
from ..waiting import Until
from .shapes import INT, STR, STR_OR_NULL, answer, from_game, rooted, with_digest
from .unit import BRIDGE_LIST, PORT, ToolDef, check_arguments, schema

log = logging.getLogger(__name__)

_BRIDGE_NAMES = frozenset(BRIDGE_TOOLSET)
#: Bridge tools for which no port means something of its own (every session's states; a
#: fork from a state), not the default instance.
_NO_DEFAULT_PORT = frozenset({"list_states", "fork_instance"})

#: ``call_tool``'s ``until`` (and, with ``--eager``, every flat game tool's).
UNTIL = {
    "type": "object", "additionalProperties": False,
    "description": ("After the command is confirmed, wait until this holds and answer with the state that met it "
                    "(settled: true), or settled: false with the last value at the deadline. One of "
                    "{path, equals}, {path, changes: true}, {event}, or on the picture {screen: 'changes'} / "
                    "{screen: 'stable', frames} with an optional region; plus timeoutMs (default 5000)."),
    "properties": condition_properties(
        path="Dotted path into /state, e.g. 'game.moving'.",
        equals="Wait until the value at path equals this (any JSON).",
        changes="Wait until the value at path differs from before the command.",
        event="Wait for a new event whose text contains this.",
        timeout="How long to wait (default 5000).")}


#: A command's answer: the contract's fields in its order, then what the extensions add.
COMMAND_ANSWER = with_digest(answer("a command's answer", {
    "port": INT, "tool": STR, "via": STR, "command": STR,
    "applied": {"type": ["boolean", "null"], "description": "Whether the command was applied (null: not known)"},
    "commandId": from_game("The id the game gave the command"),
    "confirmation": STR_OR_NULL,
    "result": from_game("What the command returned (commandResults)"),
    "settled": {"type": "boolean", "description": "With until: whether the condition held in time"},
    "pending": {"type": "boolean", "description": "The command waits for the clock: advance delivers it"},
    "lastValue": from_game("With until not met: the value at the deadline"),
    "screenHash": STR, "lastChangeFrame": INT,
}, ("port", "tool", "via", "command", "applied", "commandId", "confirmation", "frame", "screen", "game", "events")))

COMPOSITE_ANSWER = answer("a composite's answer", {"port": INT, "tool": STR, "via": {"const": "composite"}},
                          ("port", "tool", "via"))

# ----------------------------------------------------------------------------- raw_command


def raw_command(bridge: Host, *, command: str, args: Mapping[str, Any] | None = None, sync: bool | None = None,
                timeout_ms: int | None = None, port: Any = None) -> dict[str, Any]:
    return run_command(bridge, bridge.resolve_port(port), command, args or {}, sync=sync is not False,
                       timeout_ms=timeout_ms, via="raw")


RAW_COMMAND = ToolDef(
    "raw_command", "Send any command by name",
    "Send any command by name, published in the manifest or not, with its arguments as query "
    "parameters; waits for the game to confirm it ran unless sync is false.",
    schema({"port": PORT, "command": {"type": "string", "description": "The command (the contract's cmd)."},
             "args": {"type": "object", "description": "Arguments, sent as query parameters."},
             "sync": {"type": "boolean", "description": "Wait for the game to apply it (default true)."},
             "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "How long to wait for confirmation (default --timeout)."}}, ("command",)),
    raw_command, rooted(COMMAND_ANSWER), destructive=True)

# ----------------------------------------------------------------------------- call_tool


def call_tool(bridge: Host, *, name: Any, arguments: Any = None, until: Any = None, port: Any = None,
              progress: Progress | None = None) -> dict[str, Any]:
    """The resolution order (docs/tools.md): bridge tools and composites, the manifest (one
    re-fetch on a miss), then passthrough. ``until``: after the command is confirmed,
    wait for a condition and answer with the state that satisfied it."""
    if not isinstance(name, str) or not name.strip():
        raise BridgeUsageError("call_tool needs 'name': the tool to run (see list_toolsets).")
    wait = Until.parse(until)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, (dict, Mapping)):
        raise BridgeUsageError(f"call_tool: 'arguments' must be a JSON object, not {type(arguments).__name__}.")
    args = dict(arguments)
    inner_port = args.pop("port", None)
    if port is not None and inner_port is not None and check_port(port) != check_port(inner_port):
        raise BridgeUsageError(f"call_tool got two different ports ({port} and arguments.port {inner_port}); give one.")
    given = port if port is not None else inner_port
    if given is None and name in _NO_DEFAULT_PORT:  # its port says which instance, when given: no default
        tool = next(t for t in bridge.toolset if t.name == name)
        return tool.run(bridge, check_arguments(name, tool.input_schema, args))
    target = bridge.resolve_port(given)
    if name in _BRIDGE_NAMES:
        if wait is not None and name == "advance":
            raise BridgeUsageError("call_tool: advance takes its condition among its arguments: "
                                   "{\"name\": \"advance\", \"arguments\": {\"until\": {...}}}.")
        if wait is not None and name != "raw_command":
            raise BridgeUsageError(f"call_tool: 'until' waits after a command; {name} is not one. "
                                   "Use it with a game tool or raw_command (or call wait_for).")
        if wait is not None:
            raw = check_arguments(name, RAW_COMMAND.input_schema, args)
            return run_command(bridge, target, raw["command"], raw.get("args") or {}, sync=raw.get("sync") is not False,
                               timeout_ms=raw.get("timeoutMs"), via="raw", until=wait)
        tool = next(t for t in bridge.toolset if t.name == name)
        return tool.run(bridge, check_arguments(name, tool.input_schema, args), port=target)
    composite = next((c for c in bridge.composites if c.name == name), None)
    if composite is not None:
        manifest = bridge.manifest(target)
        if composite.suits(manifest.game.get("name")):
            return _run_composite(bridge, composite, target, args, until=wait)
    spec = _find_tool(bridge, target, name)
    if spec is not None:
        check_arguments(name, spec.input_schema, args)
        return run_command(bridge, target, spec.command, args, sync=spec.sync, tool=name, via="manifest", until=wait)
    return _passthrough(bridge, target, name, args, until=wait)


def _find_tool(bridge: Host, port: int, name: str) -> ToolSpec | None:
    spec = bridge.manifest(port).find(name)
    return spec if spec is not None else bridge.refetch_for(port, name, lambda m: m.find(name))


def _passthrough(bridge: Host, port: int, name: str, args: dict[str, Any], *,
                 until: Until | None = None) -> dict[str, Any]:
    try:
        return run_command(bridge, port, name, args, tool=name, via="passthrough", until=until)
    except CommandRejected as exc:
        manifest = bridge.manifest(port)
        rejected = exc.answer
        listed = rejected.get("commands") if isinstance(rejected, (dict, Mapping)) else None
        accepted = sorted({t.name for t in manifest.tools()}
                          | {str(c) for c in (listed if isinstance(listed, list) else []) if isinstance(c, (str, int))}
                          | _BRIDGE_NAMES | {c.name for c in suited(bridge.composites, manifest)})
        raise BridgeUsageError(
            f"{exc.message} It is not in the game's manifest either. This instance accepts: "
            f"{', '.join(accepted)[:2000]}. Call list_toolsets for descriptions.",
            port=port, command=name, accepted=accepted) from None


class _Calls:
    """What a composite's context calls on (core/composites.py's BridgeCalls), for one Bridge."""

    def __init__(self, bridge: Host) -> None:
        self._bridge = bridge

    def client(self, port: int) -> GameClient:
        return self._bridge.client(port)

    def run_command(self, port: int, command: str, args: Mapping[str, Any] | None = None, *,
                    timeout_ms: int | None = None, include_state: bool = False,
                    until: Until | None = None) -> dict[str, Any]:
        return run_command(self._bridge, port, command, args, timeout_ms=timeout_ms, include_state=include_state,
                           until=until)

    def call_tool(self, *, name: Any, arguments: Any = None, port: Any = None) -> dict[str, Any]:
        return call_tool(self._bridge, name=name, arguments=arguments, port=port)

    def manifest(self, port: int) -> Manifest:
        return self._bridge.manifest(port)


def _run_composite(bridge: Host, composite: Composite, port: int, args: dict[str, Any], *,
                   until: Until | None = None) -> dict[str, Any]:
    check_arguments(composite.name, composite_schema(composite), args)
    ctx = CompositeContext(_Calls(bridge), port, args)
    try:
        value = composite.run(ctx)
    except BridgeError:
        raise
    except Exception as exc:  # a host's bug becomes a structured error; the server keeps serving
        log.exception("composite %s failed", composite.name)
        raise BridgeUsageError(
            f"Composite '{composite.name}' failed on port {port}: {type(exc).__name__}: {str(exc)[:500]}. "
            "This is an error in the composite's code, not in the game.",
            port=port, tool=composite.name, exception=type(exc).__name__) from None
    result = value if isinstance(value, dict) else {"result": value}
    out = {"port": port, "tool": composite.name, "via": "composite", **result}
    if until is not None:
        out.update(settle(bridge, port, until, baseline=None, first=None))
    return out


#: call_tool answers with what the tool it ran answers: its outputSchema is the union of
#: those shapes, which the table gathers from every family and sets (here: this family's).
CALL_TOOL_TITLE = "call_tool's answer: the answer of the tool it ran"
CALL_TOOL_OUTPUT = rooted({"type": "object", "title": CALL_TOOL_TITLE, "anyOf": [COMMAND_ANSWER, COMPOSITE_ANSWER]})

CALL_TOOL = ToolDef(
    "call_tool", "Run a tool on an instance",
    f"Run a tool on a game instance: a bridge tool ({BRIDGE_LIST}), "
    "a composite, a tool from the game's manifest, or any other command the game accepts. A command is "
    "confirmed before the answer: applied, its result (a refusal is CommandFailed with the game's reason), "
    "then the state after it, whole in every answer (frame, screen, elements, text: ui.text, the scalar game "
    "fields) and the events no earlier answer showed. With until, it also waits for a condition (e.g. the "
    "board settling) and answers with that state: one call a move. Input on a paused game is answered at "
    "once with applied: false, pending: true; the next advance delivers it (do not send it again).",
    schema({"port": PORT, "name": {"type": "string", "description": "The tool to run."},
             "arguments": {"type": "object", "description": "The tool's arguments (see describe_toolset). May also carry 'port'."},
             "until": UNTIL}, ("name",)),
    call_tool, CALL_TOOL_OUTPUT, destructive=True, progress=True)
