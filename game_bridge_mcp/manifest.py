"""Reading a game's tool manifest (``GET /tools`` or ``--manifest FILE``) into toolsets.

Why this module exists: the manifest is written by whatever serialiser a game had to
hand, so the spec asks the bridge to be tolerant (toolsets as an array or a map;
arguments under ``args``/``arguments``/``params`` as objects, bare names or a map;
string defaults; verbatim ``inputSchema``), and one malformed tool must never take an
instance offline. It is also *hostile input*: its text reaches a model, so it is data,
not instructions. Descriptions are capped and stripped of control and invisible
characters, sizes are bounded, and a game tool never shadows a bridge tool.

Everything here is pure (plain data in, frozen dataclasses out) except
:func:`load_manifest_file`. :func:`normalise_manifest` never raises: whatever it cannot
use is dropped, and the reason is kept for diagnostics (``Manifest.to_diagnostics()``).
:func:`args_to_schema` is the one converter from the manifest's argument shapes to a
JSON Schema object; the bridge uses it for its own tools too.
"""

from __future__ import annotations

import json
import logging
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from .errors import BridgeUsageError
from .transport import decode_json

log = logging.getLogger(__name__)

#: The manifest document version this bridge reads (``game.protocol``).
MANIFEST_PROTOCOL = 1
#: Toolset names the bridge answers itself in ``describe_toolset``.
RESERVED_TOOLSETS = frozenset({"bridge", "passthrough"})
#: The bridge toolset; a game tool of the same name is dropped rather than shadowing it.
BRIDGE_TOOL_NAMES = frozenset({"get_state", "get_health", "raw_command", "wait_for", "close"})
#: Argument names a game tool cannot take: ``cmd`` is the command on the wire, ``port``
#: selects the instance on every bridge call.
RESERVED_ARG_NAMES = frozenset({"cmd", "port"})

#: Limits against hostile or runaway manifests.
MAX_TOOLSETS = 64
MAX_TOOLS = 512  # tool entries examined across the whole manifest
MAX_ARGS = 64  # per tool
MAX_SCHEMA_BYTES = 64 * 1024  # a verbatim inputSchema, serialised
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_NODES = 20_000
MAX_FILE_BYTES = 4 * 1024 * 1024  # --manifest FILE
MAX_PROBLEMS = 200  # notes kept on one manifest
MAX_ENUM = 256
MAX_ITEMS_DEPTH = 4  # nested "items" in the args form
MAX_DEFAULT_BYTES = 4096

DESCRIPTION_LIMIT = 1000
ARG_DESCRIPTION_LIMIT = 500
IDENTITY_LIMIT = 200  # game.name, game.version
EXAMPLE_LIMIT = 200
MAX_EXAMPLES = 20
NAME_LIMIT = 64
FOLDED_DEFAULT_LIMIT = 120

DEFAULT_PASSTHROUGH = ("Any command the game accepts can be sent by name through raw_command "
                       "or call_tool, even if it is not listed here.")

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_NAME_RULE = ("a name starts with a letter or '_' and has at most 64 letters, digits, "
              "'_', '.' or '-'")

#: JSON Schema type names, and the aliases typed-language serialisers tend to write.
_TYPE_ALIASES: dict[str, str] = {
    "string": "string", "str": "string", "text": "string", "char": "string",
    "number": "number", "float": "number", "double": "number", "decimal": "number",
    "float32": "number", "float64": "number", "real": "number",
    "integer": "integer", "int": "integer", "long": "integer", "short": "integer",
    "int32": "integer", "int64": "integer",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "tuple": "array",
    "object": "object", "dict": "object", "map": "object",
    "null": "null",
}
_ANY_TYPES = frozenset({"", "any", "*", "mixed", "json"})


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ToolSpec:
    """One game tool as the bridge offers it."""

    name: str  # what the agent calls
    description: str  # sanitised, capped
    command: str  # the cmd sent to the game; defaults to name
    sync: bool  # False: the bridge must not wait for confirmation
    input_schema: dict = field(hash=False)  # JSON Schema object (type "object")
    toolset: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "command": self.command,
                "sync": self.sync, "inputSchema": json.loads(json.dumps(self.input_schema)),
                "toolset": self.toolset}


@dataclass(frozen=True)
class Toolset:
    name: str
    description: str
    tools: tuple[ToolSpec, ...]


@dataclass(frozen=True)
class DroppedTool:
    """A tool entry the bridge could not use, and why (shown in diagnostics)."""

    toolset: str | None
    index: int
    name: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"toolset": self.toolset, "index": self.index, "name": self.name,
                "reason": self.reason}


@dataclass(frozen=True)
class Manifest:
    """A normalised manifest. ``source`` is ``game``, ``fallback`` or ``file``."""

    source: str
    game: dict = field(hash=False)  # {"name": str|None, "version": str|None, "protocol": int|None}
    toolsets: tuple[Toolset, ...]
    passthrough: dict = field(hash=False)  # {"description": str, "examples": [str, ...]}
    dropped: tuple[DroppedTool, ...] = ()
    problems: tuple[str, ...] = ()

    def tools(self) -> Iterator[ToolSpec]:
        for toolset in self.toolsets:
            yield from toolset.tools

    def find(self, name: str) -> ToolSpec | None:
        for tool in self.tools():
            if tool.name == name:
                return tool
        return None

    def toolset(self, name: str) -> Toolset | None:
        for toolset in self.toolsets:
            if toolset.name == name:
                return toolset
        return None

    def toolset_names(self) -> list[str]:
        return [toolset.name for toolset in self.toolsets]

    def to_diagnostics(self) -> dict[str, Any]:
        return {"dropped": [d.to_dict() for d in self.dropped], "problems": list(self.problems)}


class ArgumentsError(ValueError):
    """Raised by :func:`args_to_schema` when arguments cannot become a schema at all.

    The message is the reason a manifest tool is dropped."""


class _Dropped(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------- text

_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_NEWLINE_RUN = re.compile(r"\n{3,}")
_SPACE_RUN = re.compile(r"[ \t\n]+")
# Invisible characters outside the Cf category: combining grapheme joiner, Hangul
# fillers, Khmer inherent vowels, Mongolian free variation selectors.
_INVISIBLE = frozenset(chr(c) for c in (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B,
                                        0x180C, 0x180D, 0x180E, 0x180F, 0x3164, 0xFFA0))


def _is_hidden(ch: str) -> bool:
    cp = ord(ch)
    return 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or ch in _INVISIBLE


def _strip_hidden(text: str) -> str:
    if text.isascii():
        return _ASCII_CONTROL.sub("", text)
    out: list[str] = []
    for ch in text:
        if ch.isprintable():
            if not _is_hidden(ch):
                out.append(ch)
        elif ch == "\n" or ch == "\t":
            out.append(ch)
        else:
            category = unicodedata.category(ch)
            if category == "Zs":
                out.append(" ")
            elif category in ("Zl", "Zp"):
                out.append("\n")
            # Cc, Cf, Cs, Co, Cn: control, format/invisible, surrogate, private, unassigned
    return "".join(out)


def _clean(value: Any, budget: int) -> str:
    """The text of ``value`` with hidden characters removed, before capping."""
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        text = repr(value)
    elif isinstance(value, int):
        try:
            text = str(value)
        except ValueError:  # beyond the int -> str digit limit
            return ""
    elif isinstance(value, str):
        text = value
    else:
        return ""
    # Only a prefix can survive the cap; bound the work on a hostile 10 MB string.
    text = text[: budget * 4 + 256]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _strip_hidden(text)
    text = _TRAILING_SPACE.sub("\n", text)
    text = _NEWLINE_RUN.sub("\n\n", text)
    return text.strip()


def _cap(text: str, limit: int) -> str:
    limit = max(1, int(limit))
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


def sanitise_text(value: Any, limit: int) -> str:
    """Manifest text made safe to show a model: data, not instructions.

    Removes C0/C1 control characters (keeping newline and tab), format and invisible
    characters (zero-width spaces and joiners, bidi overrides and isolates, BOM, tag
    characters, variation selectors), surrogates, private-use and unassigned code
    points; turns odd spaces into spaces and line separators into newlines; collapses
    runs of blank lines; strips the ends; caps at ``limit`` characters ending in "…".
    Numbers become their decimal text; every other non-string becomes ``""``.
    """
    return _cap(_clean(value, max(1, int(limit))), limit)


def _one_line(value: Any, limit: int) -> str:
    return _cap(_SPACE_RUN.sub(" ", _clean(value, limit)), limit)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _show(value: Any) -> str:
    """A name quoted for a message, safe whatever it contains."""
    return "'" + _one_line(value, NAME_LIMIT) + "'"


def _usable_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME_RE.fullmatch(value) is not None


# --------------------------------------------------------------------------- JSON helpers


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else None
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def _measure(value: Any, max_depth: int, max_nodes: int) -> str | None:
    """Why ``value`` is too deep or too big to serialise safely, or None. Iterative, so a
    hostile structure cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"has more than {max_nodes} parts"
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth >= max_depth and len(children):
            return f"is nested more than {max_depth} levels deep"
        stack.extend((child, depth + 1) for child in children)
    return None


def _json_copy(value: Any, max_bytes: int) -> tuple[Any, int]:
    """A pure-JSON deep copy of ``value`` and its serialised size; ValueError if it cannot
    be made (too deep, too big, not JSON)."""
    why = _measure(value, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES)
    if why:
        raise ValueError(why)
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"is not plain JSON ({exc})") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ValueError(f"is {size} bytes when serialised; at most {max_bytes} are accepted")
    return json.loads(text), size


# --------------------------------------------------------------------------- arguments


def _resolve_type(value: Any, where: str, problems: list[str]) -> str | list[str] | None:
    """A JSON Schema ``type`` for a declared type, or None for "accepts any value"."""
    if value is None:
        return None
    names = value if isinstance(value, list) else [value]
    resolved: list[str] = []
    for item in names:
        if not isinstance(item, str):
            problems.append(f"{where}: type is {_kind(item)}, not a type name; it accepts any value")
            return None
        key = item.strip().lower()
        if key in _ANY_TYPES:
            return None
        if key not in _TYPE_ALIASES:
            problems.append(f"{where}: unknown type {_show(item)}; it accepts any value")
            return None
        if _TYPE_ALIASES[key] not in resolved:
            resolved.append(_TYPE_ALIASES[key])
    if not resolved:
        return None
    return resolved[0] if len(resolved) == 1 else resolved


def _default_matches(value: Any, declared: str | list[str] | None) -> bool:
    actual = _json_type(value)
    if actual is None:
        return False
    if declared is None:
        return True
    types = [declared] if isinstance(declared, str) else declared
    if actual in types:
        return True
    if actual == "integer" and "number" in types:
        return True
    return actual == "number" and "integer" in types and float(value).is_integer()


def _is_true(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True or (type(value) is int and value == 1)


def _enum(value: Any, where: str, problems: list[str]) -> list[Any] | None:
    if not isinstance(value, list) or not value or len(value) > MAX_ENUM:
        problems.append(f"{where}: enum ignored (expected an array of 1 to {MAX_ENUM} values)")
        return None
    for item in value:
        if isinstance(item, str):
            if len(item) > EXAMPLE_LIMIT or _one_line(item, EXAMPLE_LIMIT) != item:
                problems.append(f"{where}: enum ignored (a value is too long or holds "
                                "control or invisible characters)")
                return None
        elif _json_type(item) not in ("null", "boolean", "integer", "number"):
            problems.append(f"{where}: enum ignored (values must be strings, numbers, "
                            "true/false or null)")
            return None
    return list(value)


def _property(spec: Mapping[str, Any], where: str, problems: list[str],
              depth: int = 0) -> dict[str, Any]:
    """One argument's JSON Schema from ``{type, description, default, enum, items}``."""
    prop: dict[str, Any] = {}
    declared = _resolve_type(spec.get("type"), where, problems)
    if declared is not None:
        prop["type"] = declared
    description = _clean(spec.get("description"), ARG_DESCRIPTION_LIMIT)
    if spec.get("enum") is not None:
        values = _enum(spec.get("enum"), where, problems)
        if values is not None:
            prop["enum"] = values
    items = spec.get("items")
    if items is not None:
        if depth >= MAX_ITEMS_DEPTH:
            problems.append(f"{where}: items nested more than {MAX_ITEMS_DEPTH} deep ignored")
        elif isinstance(items, str):
            item_type = _resolve_type(items, f"{where} items", problems)
            prop["items"] = {"type": item_type} if item_type else {}
        elif isinstance(items, Mapping):
            prop["items"] = _property(items, f"{where} items", problems, depth + 1)
        else:
            problems.append(f"{where}: items is {_kind(items)}, ignored")
    note = ""
    default = spec.get("default")
    if default is not None:
        if isinstance(default, str):
            # A typed language renders defaults as text; `default: "false"` on a boolean
            # is what a strict client rejects, so the value goes into the description.
            note = f"(default: {_one_line(default, FOLDED_DEFAULT_LIMIT)})"
        else:
            try:
                copy, _size = _json_copy(default, MAX_DEFAULT_BYTES)
            except ValueError as exc:
                problems.append(f"{where}: default ignored (it {exc})")
            else:
                if _default_matches(copy, declared):
                    prop["default"] = copy
                else:
                    shown = json.dumps(copy, ensure_ascii=False, separators=(",", ":"))
                    note = f"(default: {_one_line(shown, FOLDED_DEFAULT_LIMIT)})"
    if note:
        room = ARG_DESCRIPTION_LIMIT - len(note) - 1
        description = f"{_cap(description, room)} {note}" if description else note
    else:
        description = _cap(description, ARG_DESCRIPTION_LIMIT)
    if description:
        prop["description"] = description
    ordered: dict[str, Any] = {k: prop[k] for k in ("type", "description", "enum", "items", "default") if k in prop}
    return ordered


def _check_arg_name(name: Any, reserved: frozenset[str]) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ArgumentsError(f"an argument has no usable name (got {_kind(name)})")
    if len(name) > NAME_LIMIT:
        raise ArgumentsError(f"argument name {_show(name)} is longer than {NAME_LIMIT} characters")
    if _one_line(name, NAME_LIMIT) != name:
        raise ArgumentsError(f"argument name {_show(name)} holds control or invisible characters "
                             "or surrounding spaces")
    if name in reserved:
        if name == "cmd":
            why = "'cmd' carries the command name on the wire"
        elif name == "port":
            why = "'port' selects the game instance on every bridge call"
        else:
            why = "it is reserved by the bridge"
        raise ArgumentsError(f"argument '{name}' cannot be used: {why}")
    return name


def _arg_entries(args: Any) -> list[tuple[Any, Mapping[str, Any] | None]]:
    """(name, spec) pairs from every argument shape the spec tolerates."""
    entries: list[tuple[Any, Mapping[str, Any] | None]] = []
    if args is None:
        return entries
    if isinstance(args, (list, tuple)):
        if len(args) > MAX_ARGS:
            raise ArgumentsError(f"declares {len(args)} arguments; at most {MAX_ARGS} are accepted")
        for index, entry in enumerate(args):
            if isinstance(entry, Mapping):
                entries.append((entry.get("name"), entry))
            elif isinstance(entry, str):
                entries.append((entry, None))  # a bare name: no type constraint
            else:
                raise ArgumentsError(f"argument entry {index} is {_kind(entry)}; expected an "
                                     "object with a name, or a bare name")
        return entries
    if isinstance(args, Mapping):
        if len(args) > MAX_ARGS:
            raise ArgumentsError(f"declares {len(args)} arguments; at most {MAX_ARGS} are accepted")
        for name, value in args.items():
            if isinstance(value, Mapping):
                entries.append((name, value))
            elif isinstance(value, str):
                entries.append((name, {"type": value}))  # name -> "number"
            elif value is None:
                entries.append((name, None))
            else:
                raise ArgumentsError(f"argument {_show(name)} is described by {_kind(value)}; "
                                     "expected an object or a type name")
        return entries
    raise ArgumentsError(f"arguments are {_kind(args)}; expected an array or an object")


def args_to_schema(args: Any, *,
                   reserved_args: frozenset[str] = RESERVED_ARG_NAMES) -> tuple[dict, list[str]]:
    """The JSON Schema object for a tool's arguments, and notes on what was tolerated.

    Accepts an array of ``{name, type, description, required, default, enum, items}``
    objects, an array of bare names, a map of name -> such an object, or a map of
    name -> type name. Unknown types accept any value (noted); string defaults and
    defaults that do not match the declared type are folded into the description,
    never emitted as ``default``. Raises :class:`ArgumentsError` when the arguments
    cannot be read at all (a bad entry, a reserved or unusable name, too many).
    The bridge converts its own tools with this too, passing ``reserved_args=frozenset()``.
    """
    problems: list[str] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    for raw_name, spec in _arg_entries(args):
        name = _check_arg_name(raw_name, reserved_args)
        where = f"argument '{name}'"
        if name in properties:
            problems.append(f"{where} is declared twice; the first declaration is used")
            continue
        properties[name] = _property(spec, where, problems) if spec is not None else {}
        if spec is not None and _is_true(spec.get("required")):
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = True
    return schema, problems


def _sanitise_schema_text(schema: Any) -> None:
    """Sanitise the prose (``description``, ``title``) inside a verbatim schema, leaving
    its structure and values (``default``, ``const``, ``enum``, ``examples``) alone."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("description", "title") and isinstance(value, str):
                    node[key] = sanitise_text(value, DESCRIPTION_LIMIT)
                elif key not in ("default", "const", "enum", "examples"):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


def _verbatim_schema(value: Any, reserved_args: frozenset[str]) -> dict:
    if not isinstance(value, Mapping):
        raise _Dropped(f"inputSchema is {_kind(value)}; expected a JSON Schema object")
    try:
        schema, _size = _json_copy(value, MAX_SCHEMA_BYTES)
    except ValueError as exc:
        raise _Dropped(f"inputSchema {exc}") from None
    if "type" in schema and schema["type"] != "object":
        raise _Dropped(f"inputSchema has type {_one_line(json.dumps(schema['type']), 60)}; "
                       "a tool's input must be an object")
    schema.setdefault("type", "object")
    properties = schema.get("properties")
    if isinstance(properties, dict):
        clash = sorted(reserved_args & properties.keys())
        if clash:
            raise _Dropped(f"inputSchema declares argument '{clash[0]}', which the bridge "
                           "reserves ('cmd' is the command on the wire, 'port' selects the "
                           "instance)")
    _sanitise_schema_text(schema)
    return schema


# --------------------------------------------------------------------------- tools


def _read_sync(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    shown = _show(value) if isinstance(value, str) else _kind(value)
    raise _Dropped(f"sync is {shown}; expected true or false")


def _read_tool(raw: Any, toolset: str, key: Any, reserved_tools: frozenset[str],
               problems: list[str]) -> ToolSpec:
    if not isinstance(raw, Mapping):
        raise _Dropped(f"the tool entry is {_kind(raw)}; expected an object")
    name = raw.get("name")
    if name is None and key is not None:
        name = key  # tools given as a map of name -> tool
    if name is None:
        raise _Dropped("the tool has no name")
    if not _usable_name(name):
        raise _Dropped(f"the tool name {_show(name) if isinstance(name, str) else _kind(name)} "
                       f"is not usable: {_NAME_RULE}")
    if name in reserved_tools:
        raise _Dropped(f"the name '{name}' is reserved by the bridge toolset; call it through "
                       "call_tool's bridge tools")
    command = raw.get("command")
    if command is None or (isinstance(command, str) and not command.strip()):
        command = name
    elif not isinstance(command, str):
        raise _Dropped(f"command is {_kind(command)}; expected the name of the cmd to send")
    elif not _usable_name(command):
        raise _Dropped(f"command {_show(command)} is not usable: {_NAME_RULE}")
    sync = _read_sync(raw.get("sync"))
    description = sanitise_text(raw.get("description"), DESCRIPTION_LIMIT)
    if "inputSchema" in raw and raw.get("inputSchema") is not None:
        schema = _verbatim_schema(raw.get("inputSchema"), RESERVED_ARG_NAMES)
    else:
        args = None
        for field_name in ("args", "arguments", "params"):
            if raw.get(field_name) is not None:
                args = raw.get(field_name)
                break
        try:
            schema, notes = args_to_schema(args)
        except ArgumentsError as exc:
            raise _Dropped(str(exc)) from None
        problems.extend(f"tool '{name}' {note}" for note in notes)
    return ToolSpec(name=name, description=description, command=command, sync=sync,
                    input_schema=schema, toolset=toolset)


def _tool_entries(raw: Any) -> list[tuple[Any, Any]] | None:
    if raw is None:
        return []
    if isinstance(raw, (list, tuple)):
        return [(None, tool) for tool in raw]
    if isinstance(raw, Mapping):
        return list(raw.items())
    return None


# --------------------------------------------------------------------------- document


def _identity(value: Any, field_name: str, problems: list[str]) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return _one_line(value, IDENTITY_LIMIT) or None
    problems.append(f"game.{field_name} is {_kind(value)}; ignored")
    return None


def _protocol(value: Any, problems: list[str]) -> int | None:
    number: int | None = None
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 10:
        number = int(value.strip())
    if number is None:
        problems.append(f"game.protocol is {_kind(value)}, not a number; reading as protocol "
                        f"{MANIFEST_PROTOCOL}")
        return None
    if number != MANIFEST_PROTOCOL:
        shown = number if abs(number) < 10**9 else "out of range"
        problems.append(f"game.protocol is {shown}; this bridge knows protocol "
                        f"{MANIFEST_PROTOCOL}, reading as protocol {MANIFEST_PROTOCOL}")
    return number if abs(number) < 10**9 else None


def _passthrough(value: Any, problems: list[str]) -> dict[str, Any]:
    description = DEFAULT_PASSTHROUGH
    examples: list[str] = []
    if isinstance(value, Mapping):
        description = sanitise_text(value.get("description"), DESCRIPTION_LIMIT) or description
        raw_examples = value.get("examples")
        if isinstance(raw_examples, (list, tuple)):
            if len(raw_examples) > MAX_EXAMPLES:
                problems.append(f"passthrough lists {len(raw_examples)} examples; the first "
                                f"{MAX_EXAMPLES} are kept")
            for example in raw_examples[:MAX_EXAMPLES]:
                text = _one_line(example, EXAMPLE_LIMIT) if isinstance(example, str) else ""
                if text:
                    examples.append(text)
        elif raw_examples is not None:
            problems.append(f"passthrough.examples is {_kind(raw_examples)}; ignored")
    elif value is not None:
        problems.append(f"passthrough is {_kind(value)}; expected an object, ignored")
    return {"description": description, "examples": examples}


def _toolset_entries(raw: Any, problems: list[str]) -> list[tuple[Any, Any]]:
    if raw is None:
        return []
    if isinstance(raw, (list, tuple)):
        entries: list[tuple[Any, Any]] = [(None, value) for value in raw]
    elif isinstance(raw, Mapping):
        entries = list(raw.items())
    else:
        problems.append(f"toolsets is {_kind(raw)}; expected an array or an object, no tools read")
        return []
    if len(entries) > MAX_TOOLSETS:
        problems.append(f"the manifest has {len(entries)} toolsets; only the first "
                        f"{MAX_TOOLSETS} were read")
        entries = entries[:MAX_TOOLSETS]
    return entries


def _finish_problems(problems: list[str]) -> tuple[str, ...]:
    if len(problems) <= MAX_PROBLEMS:
        return tuple(problems)
    kept = problems[: MAX_PROBLEMS - 1]
    return (*kept, f"... and {len(problems) - len(kept)} more problems")


def _normalise(doc: Any, source: str, reserved_tools: frozenset[str]) -> Manifest:
    problems: list[str] = []
    dropped: list[DroppedTool] = []
    if not isinstance(doc, Mapping):
        problems.append(f"the manifest is {_kind(doc)}, not a JSON object; no tools read")
        return Manifest(source=source, game={"name": None, "version": None, "protocol": None},
                        toolsets=(), passthrough=_passthrough(None, problems),
                        dropped=(), problems=tuple(problems))
    raw_game = doc.get("game")
    if raw_game is not None and not isinstance(raw_game, Mapping):
        problems.append(f"game is {_kind(raw_game)}; expected an object, ignored")
    game_map: Mapping[str, Any] = raw_game if isinstance(raw_game, Mapping) else {}
    game = {"name": _identity(game_map.get("name"), "name", problems),
            "version": _identity(game_map.get("version"), "version", problems),
            "protocol": _protocol(game_map.get("protocol"), problems)}

    toolsets: list[Toolset] = []
    seen_tools: dict[str, str] = {}
    examined = 0
    skipped = 0
    for position, (key, raw) in enumerate(_toolset_entries(doc.get("toolsets"), problems)):
        if isinstance(raw, Mapping):
            own = raw.get("name")
            raw_tools = raw.get("tools")
        elif isinstance(raw, (list, tuple)):
            own, raw_tools = None, raw  # {"play": [tool, ...]}
        else:
            problems.append(f"toolset {position} is {_kind(raw)}; expected an object, dropped")
            continue
        name = own if isinstance(own, str) and own.strip() else key
        if not _usable_name(name):
            label = _show(name) if isinstance(name, str) else f"at position {position}"
            problems.append(f"toolset {label} has no usable name ({_NAME_RULE}); dropped")
            continue
        if name.lower() in RESERVED_TOOLSETS:
            problems.append(f"toolset '{name}' is reserved by the bridge; dropped with its tools")
            continue
        if any(t.name == name for t in toolsets):
            problems.append(f"toolset '{name}' appears twice; the second one was ignored")
            continue
        description = ""
        if isinstance(raw, Mapping):
            description = sanitise_text(raw.get("description"), DESCRIPTION_LIMIT)
        entries = _tool_entries(raw_tools)
        if entries is None:
            problems.append(f"toolset '{name}': tools is {_kind(raw_tools)}; expected an array, "
                            "no tools read")
            entries = []
        tools: list[ToolSpec] = []
        for index, (tool_key, raw_tool) in enumerate(entries):
            if examined >= MAX_TOOLS:
                skipped += len(entries) - index
                break
            examined += 1
            shown_name = raw_tool.get("name") if isinstance(raw_tool, Mapping) else None
            if shown_name is None:
                shown_name = tool_key
            tool_label: str | None = (_one_line(shown_name, NAME_LIMIT) or None) if isinstance(shown_name, str) else None
            try:
                tool = _read_tool(raw_tool, name, tool_key, reserved_tools, problems)
                if tool.name in seen_tools:
                    raise _Dropped(f"the name '{tool.name}' is already defined in toolset "
                                   f"'{seen_tools[tool.name]}'; the first definition wins")
            except _Dropped as drop:
                dropped.append(DroppedTool(toolset=name, index=index, name=tool_label,
                                           reason=drop.reason))
                continue
            except Exception as exc:  # a bug here must not take the instance offline
                log.exception("unexpected error reading tool %d of toolset %s", index, name)
                dropped.append(DroppedTool(toolset=name, index=index, name=tool_label,
                                           reason=f"could not be read ({type(exc).__name__})"))
                continue
            seen_tools[tool.name] = name
            tools.append(tool)
        toolsets.append(Toolset(name=name, description=description, tools=tuple(tools)))
    if skipped:
        problems.append(f"the manifest lists more than {MAX_TOOLS} tools; {skipped} were not read")
    return Manifest(source=source, game=game, toolsets=tuple(toolsets),
                    passthrough=_passthrough(doc.get("passthrough"), problems),
                    dropped=tuple(dropped), problems=_finish_problems(problems))


def normalise_manifest(doc: Any, *, source: str = "game",
                       reserved_tools: frozenset[str] = BRIDGE_TOOL_NAMES) -> Manifest:
    """A :class:`Manifest` from a decoded manifest document. Never raises: what cannot be
    used is dropped and the reason kept in ``dropped`` / ``problems``."""
    try:
        return _normalise(doc, source, frozenset(reserved_tools))
    except Exception as exc:  # belt and braces: one bad document never breaks the bridge
        log.exception("unexpected error normalising a manifest")
        return Manifest(source=source, game={"name": None, "version": None, "protocol": None},
                        toolsets=(), passthrough={"description": DEFAULT_PASSTHROUGH, "examples": []},
                        problems=(f"the manifest could not be read ({type(exc).__name__}); "
                                  "no tools read",))


def fallback_manifest(*, reason: str | None = None) -> Manifest:
    """The built-in manifest for a game whose ``GET /tools`` answers 404: no game
    toolsets, and a passthrough text telling the agent how to work without them."""
    why = sanitise_text(reason, 300) if reason else "GET /tools answered 404"
    description = (f"This game publishes no command list ({why}), so there are no game "
                   "toolsets. Send any command the game accepts by name with raw_command (or "
                   "call_tool, which passes unknown names through), and read /state with "
                   "get_state to see what it did.")
    return Manifest(source="fallback", game={"name": None, "version": None, "protocol": None},
                    toolsets=(), passthrough={"description": description, "examples": []},
                    problems=(why,) if reason else ())


def load_manifest_file(path: str | Path) -> Manifest:
    """The manifest in a JSON file (``--manifest FILE``), normalised with source
    ``file``. Raises BridgeUsageError naming the file when it cannot be read, is not
    JSON, or is not a JSON object: a file the user named should fail loudly."""
    path = Path(path)
    advice = "Check the path given to --manifest (or GAME_BRIDGE_MANIFEST)"
    try:
        with path.open("rb") as handle:
            body = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise BridgeUsageError(f"Cannot read the manifest file {path}: "
                               f"{exc.strerror or type(exc).__name__}. {advice}.",
                               file=str(path)) from None
    if len(body) > MAX_FILE_BYTES:
        raise BridgeUsageError(f"The manifest file {path} is larger than {MAX_FILE_BYTES} bytes, "
                               f"which no tool manifest needs. {advice}.", file=str(path))
    try:
        doc = decode_json(body)
    except ValueError as exc:
        raise BridgeUsageError(f"The manifest file {path} {exc}. Fix the file (it must hold one "
                               "JSON object in the GET /tools format) or point --manifest at "
                               "another one.", file=str(path)) from None
    if not isinstance(doc, dict):
        raise BridgeUsageError(f"The manifest file {path} holds {_kind(doc)}, not a JSON object "
                               'like {"game": {...}, "toolsets": [...]}. Fix the file or point '
                               "--manifest at another one.", file=str(path))
    return normalise_manifest(doc, source="file")
