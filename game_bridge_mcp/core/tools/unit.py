"""A tool as one unit (:class:`ToolDef`: what the agent sees of it and the handler that
serves it), and the argument check every call passes before its handler runs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

from ...contract import BRIDGE_TOOLSET
from ...errors import BridgeUsageError

#: The bridge toolset's names, as the tools' descriptions list them.
BRIDGE_LIST = ", ".join(BRIDGE_TOOLSET)

#: Every tool's ``port``.
PORT: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 65535,
                        "description": "The game instance's port. Optional: defaults to --port, then GAME_BRIDGE_PORT, then the one instance this bridge launched, then 7777."}


def schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A closed input schema: these properties, these required."""
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


#: A tool's handler, ``handler(bridge, **arguments)``: the Bridge as a Host (core/host.py),
#: then the checked arguments as keywords in Python spelling (:func:`python_name`); it
#: returns a JSON-ready dict or raises a BridgeError.
Handler = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class ToolDef:
    """One tool: what the agent sees of it, and the handler that serves it."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    #: The ``outputSchema``: what every answer that is not an error holds.
    output: dict[str, Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    #: The handler also takes ``progress`` (a callable for MCP progress notifications).
    progress: bool = False

    def annotations(self) -> dict[str, Any]:
        hints = {"title": self.title, "readOnlyHint": self.read_only, "openWorldHint": False}
        if not self.read_only:
            hints["destructiveHint"] = self.destructive
            hints["idempotentHint"] = self.idempotent
        return hints

    def run(self, bridge: Any, args: Mapping[str, Any], *, port: int | None = None,
            progress: Any = None) -> dict[str, Any]:
        """Call the handler with checked arguments (their spec names in Python spelling, see
        :func:`python_name`), ``port`` when given, and ``progress`` when it takes one."""
        kwargs: dict[str, Any] = {python_name(key): value for key, value in args.items()}
        if port is not None:
            kwargs["port"] = port
        if self.progress:
            kwargs["progress"] = progress
        return self.handler(bridge, **kwargs)


@functools.lru_cache(maxsize=256)  # a handful of names, on every call
def python_name(argument: str) -> str:
    """An argument's spec name in Python spelling: ``timeoutMs`` -> ``timeout_ms``."""
    return "".join("_" + ch.lower() if ch.isupper() else ch for ch in argument)


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,), "null": (type(None),),
}


def _type_ok(value: Any, expected: Any) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    for name in names:
        kinds = _TYPES.get(name)
        if kinds is None:
            return True  # a type this checker does not know is not checked
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, kinds):
            return True
    return False


def check_arguments(tool: str, schema: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """Check arguments against a tool's schema (types, required, range, unknown names for
    closed schemas) and return them as a dict. Raises BridgeUsageError naming the problem."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, (dict, Mapping)):
        raise BridgeUsageError(f"{tool}: arguments must be a JSON object, not {type(arguments).__name__}.")
    raw_props = schema.get("properties")
    props: Mapping[str, Any] = raw_props if isinstance(raw_props, (dict, Mapping)) else {}
    for name in schema.get("required", []) or []:
        if arguments.get(name) is None:
            raise BridgeUsageError(f"{tool}: the argument '{name}' is required. Call describe_toolset to see the schema.")
    for name, value in arguments.items():
        spec = props.get(name)
        if spec is None:
            if schema.get("additionalProperties") is False:
                known = ", ".join(sorted(props)) or "none"
                raise BridgeUsageError(f"{tool}: unknown argument '{name}'. It takes: {known}.")
            continue
        if not isinstance(spec, (dict, Mapping)) or value is None:
            continue
        expected = spec.get("type")
        if expected is not None and not _type_ok(value, expected):
            shown = repr(value) if len(repr(value)) < 60 else repr(value)[:57] + "..."
            raise BridgeUsageError(f"{tool}: the argument '{name}' must be of type {expected}, not {shown}.")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high = spec.get("minimum"), spec.get("maximum")
            if isinstance(low, (int, float)) and value < low or isinstance(high, (int, float)) and value > high:
                if not isinstance(high, (int, float)):
                    raise BridgeUsageError(f"{tool}: the argument '{name}' must be at least {low}, not {value}.")
                if not isinstance(low, (int, float)):
                    raise BridgeUsageError(f"{tool}: the argument '{name}' must be at most {high}, not {value}.")
                raise BridgeUsageError(f"{tool}: the argument '{name}' must be between {low} and {high}, not {value}.")
        enum = spec.get("enum")
        if isinstance(enum, list) and enum and value not in enum:
            raise BridgeUsageError(f"{tool}: the argument '{name}' must be one of {enum}, not {value!r}.")
    return dict(arguments)
