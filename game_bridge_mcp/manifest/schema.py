"""A manifest tool's arguments, in whatever shape its game wrote them, as a JSON Schema
(:func:`args_to_schema`), and a verbatim ``inputSchema`` checked (:func:`verbatim_schema`),
bounded against hostile input."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .sanitise import (
    ARG_DESCRIPTION_LIMIT,
    DESCRIPTION_LIMIT,
    EXAMPLE_LIMIT,
    FOLDED_DEFAULT_LIMIT,
    NAME_LIMIT,
    cap_text,
    clean_text,
    kind_of,
    one_line,
    quote_name,
    sanitise_text,
)

#: Argument names a game tool cannot take: ``cmd`` is the command on the wire, ``port``
#: selects the instance on every bridge call.
RESERVED_ARG_NAMES = frozenset({"cmd", "port"})

#: Limits against hostile or runaway argument lists and schemas.
MAX_ARGS = 64  # per tool
MAX_SCHEMA_BYTES = 64 * 1024  # a verbatim inputSchema, serialised
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_NODES = 20_000
MAX_ENUM = 256
MAX_ITEMS_DEPTH = 4  # nested "items" in the args form
MAX_DEFAULT_BYTES = 4096

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


class ArgumentsError(ValueError):
    """Raised by :func:`args_to_schema` and :func:`verbatim_schema` when arguments cannot
    become a schema at all. The message is the reason a manifest tool is dropped."""


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
            problems.append(f"{where}: type is {kind_of(item)}, not a type name; it accepts any value")
            return None
        key = item.strip().lower()
        if key in _ANY_TYPES:
            return None
        if key not in _TYPE_ALIASES:
            problems.append(f"{where}: unknown type {quote_name(item)}; it accepts any value")
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
            if len(item) > EXAMPLE_LIMIT or one_line(item, EXAMPLE_LIMIT) != item:
                problems.append(f"{where}: enum ignored (a value is too long or holds "
                                "control or invisible characters)")
                return None
        elif _json_type(item) not in ("null", "boolean", "integer", "number"):
            problems.append(f"{where}: enum ignored (values must be strings, numbers, "
                            "true/false or null)")
            return None
    return list(value)


def _bounds(spec: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """``minimum`` / ``maximum`` when they are finite numbers in order (else noted, ignored)."""
    out: dict[str, Any] = {}
    for key in ("minimum", "maximum"):
        value = spec.get(key)
        if value is None:
            continue
        if _json_type(value) in ("integer", "number"):
            out[key] = value
        else:
            problems.append(f"{where}: {key} is {kind_of(value)}, not a finite number; ignored")
    if "minimum" in out and "maximum" in out and out["minimum"] > out["maximum"]:
        problems.append(f"{where}: minimum {out['minimum']} is above maximum {out['maximum']}; both ignored")
        return {}
    return out


def _property(spec: Mapping[str, Any], where: str, problems: list[str],
              depth: int = 0) -> dict[str, Any]:
    """One argument's JSON Schema from ``{type, description, default, enum, items}``."""
    prop: dict[str, Any] = {}
    declared = _resolve_type(spec.get("type"), where, problems)
    if declared is not None:
        prop["type"] = declared
    description = clean_text(spec.get("description"), ARG_DESCRIPTION_LIMIT)
    if spec.get("enum") is not None:
        values = _enum(spec.get("enum"), where, problems)
        if values is not None:
            prop["enum"] = values
    bounds = _bounds(spec, where, problems)
    prop.update(bounds)
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
            problems.append(f"{where}: items is {kind_of(items)}, ignored")
    note = ""
    default = spec.get("default")
    if default is not None:
        if isinstance(default, str):
            # A typed language renders defaults as text; `default: "false"` on a boolean
            # is what a strict client rejects, so the value goes into the description.
            note = f"(default: {one_line(default, FOLDED_DEFAULT_LIMIT)})"
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
                    note = f"(default: {one_line(shown, FOLDED_DEFAULT_LIMIT)})"
    if note:
        room = ARG_DESCRIPTION_LIMIT - len(note) - 1
        description = f"{cap_text(description, room)} {note}" if description else note
    else:
        description = cap_text(description, ARG_DESCRIPTION_LIMIT)
    if description:
        prop["description"] = description
    ordered: dict[str, Any] = {k: prop[k] for k in ("type", "description", "enum", "minimum", "maximum", "items",
                                                    "default") if k in prop}
    return ordered


def _check_arg_name(name: Any, reserved: frozenset[str]) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ArgumentsError(f"an argument has no usable name (got {kind_of(name)})")
    if len(name) > NAME_LIMIT:
        raise ArgumentsError(f"argument name {quote_name(name)} is longer than {NAME_LIMIT} characters")
    if one_line(name, NAME_LIMIT) != name:
        raise ArgumentsError(f"argument name {quote_name(name)} holds control or invisible characters "
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
    """(name, spec) pairs from every argument shape the manifest reader tolerates."""
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
                raise ArgumentsError(f"argument entry {index} is {kind_of(entry)}; expected an "
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
                raise ArgumentsError(f"argument {quote_name(name)} is described by {kind_of(value)}; "
                                     "expected an object or a type name")
        return entries
    raise ArgumentsError(f"arguments are {kind_of(args)}; expected an array or an object")


def args_to_schema(args: Any, *,
                   reserved_args: frozenset[str] = RESERVED_ARG_NAMES) -> tuple[dict[str, Any], list[str]]:
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


def verbatim_schema(value: Any, reserved_args: frozenset[str] = RESERVED_ARG_NAMES) -> dict[str, Any]:
    """A checked copy of a tool's own ``inputSchema``: plain JSON within the size and
    depth limits, of type ``object``, declaring no reserved argument, its prose
    sanitised. Raises :class:`ArgumentsError` (the reason to drop the tool) otherwise."""
    if not isinstance(value, Mapping):
        raise ArgumentsError(f"inputSchema is {kind_of(value)}; expected a JSON Schema object")
    try:
        schema, _size = _json_copy(value, MAX_SCHEMA_BYTES)
    except ValueError as exc:
        raise ArgumentsError(f"inputSchema {exc}") from None
    if "type" in schema and schema["type"] != "object":
        raise ArgumentsError(f"inputSchema has type {one_line(json.dumps(schema['type']), 60)}; "
                             "a tool's input must be an object")
    schema.setdefault("type", "object")
    properties = schema.get("properties")
    if isinstance(properties, dict):
        clash = sorted(reserved_args & properties.keys())
        if clash:
            raise ArgumentsError(f"inputSchema declares argument '{clash[0]}', which the bridge "
                                 "reserves ('cmd' is the command on the wire, 'port' selects the "
                                 "instance)")
    _sanitise_schema_text(schema)
    checked: dict[str, Any] = schema
    return checked


__all__ = ["ArgumentsError", "MAX_ARGS", "MAX_DEFAULT_BYTES", "MAX_ENUM", "MAX_ITEMS_DEPTH",
           "MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH", "MAX_SCHEMA_NODES", "RESERVED_ARG_NAMES",
           "args_to_schema", "verbatim_schema"]
