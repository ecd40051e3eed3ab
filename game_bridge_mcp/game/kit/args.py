"""Typed game commands: a Python function's signature becomes its ``/tools`` entry, and
``/command``'s query text becomes the values the function declared (docs/game-side.md,
"Exact schemas"). Pure."""

from __future__ import annotations

import inspect
import json
import math
import re
import typing
from dataclasses import dataclass, replace
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from ...jsonio import decode_json

#: Python type -> JSON Schema type name used in the manifest. ``list`` and ``dict`` arguments
#: arrive as JSON text (the bridge sends an array or object argument so) and are given to
#: the command decoded; their shape is the command's ``Arg(schema=...)`` and its own check.
TYPE_NAMES: dict[type, str] = {int: "integer", float: "number", bool: "boolean", str: "string",
                               list: "array", dict: "object"}
#: The types whose values are JSON text on the wire.
JSON_KINDS = (list, dict)
#: Most choices (``enum``) one argument may have (the bridge reads as many).
MAX_CHOICES = 256
#: Longest JSON text one ``list`` or ``dict`` argument may be.
MAX_JSON_ARG = 64 * 1024
#: Argument names the contract reserves (``cmd`` is the command on the wire, ``port``
#: selects the instance on every bridge call).
RESERVED_ARG_NAMES = frozenset({"cmd", "port"})
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


class _NoDefault:
    def __repr__(self) -> str:
        return "<required>"


NO_DEFAULT: Any = _NoDefault()


class ArgumentError(ValueError):
    """A query argument that cannot be given to the command (the message says which)."""


@dataclass(frozen=True)
class Arg:
    """What an argument is and which values it takes, declared with the command:
    ``x: Annotated[float, Arg("World x", minimum=-3, maximum=3)]``, or in the command's
    ``args={"x": Arg(...)}``. ``choices`` is published as JSON Schema ``enum``; ``schema``,
    more JSON Schema keywords for the argument's property (``items``, ``properties``,
    ``minItems``, ``maxLength``: what a ``list``, ``dict`` or ``str`` argument holds), is
    published as given and checked by the command itself. A field left None says nothing."""

    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: Sequence[Any] | None = None
    schema: Mapping[str, Any] | None = None

    def __hash__(self) -> int:  # hashable with a dict schema: Python 3.10 hashes Optional[Annotated[T, Arg]]
        return hash((self.description, self.minimum, self.maximum, repr(self.choices), repr(self.schema)))


def Range(minimum: float | None = None, maximum: float | None = None) -> Arg:  # noqa: N802 - reads as a type
    """``Annotated[int, Range(1, 10)]``: the argument's bounds, both inclusive."""
    return Arg(minimum=minimum, maximum=maximum)


def _merge(first: Arg, second: Arg) -> Arg:
    """``second``'s fields where they are set, else ``first``'s."""
    return Arg(description=second.description if second.description is not None else first.description,
               minimum=second.minimum if second.minimum is not None else first.minimum,
               maximum=second.maximum if second.maximum is not None else first.maximum,
               choices=second.choices if second.choices is not None else first.choices,
               schema=second.schema if second.schema is not None else first.schema)


@dataclass(frozen=True)
class ArgSpec:
    """One declared argument of a command."""

    name: str
    kind: type
    description: str = ""
    default: Any = NO_DEFAULT
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    #: More JSON Schema keywords for its property (``Arg.schema``), published as given.
    schema_extra: Mapping[str, Any] | None = None

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def manifest(self) -> dict[str, Any]:
        """The ``args[]`` entry: ``{name, type, description, required, default}``, plus
        ``enum``, ``minimum``, ``maximum`` when declared."""
        entry = {"name": self.name, "type": TYPE_NAMES[self.kind], "description": self.description,
                 "required": self.required, "default": None if self.required else self.default}
        entry.update(self._keywords())
        return entry

    def _keywords(self) -> dict[str, Any]:
        keywords: dict[str, Any] = dict(self.schema_extra or {})
        if self.choices is not None:
            keywords["enum"] = list(self.choices)
        if self.minimum is not None:
            keywords["minimum"] = self.minimum
        if self.maximum is not None:
            keywords["maximum"] = self.maximum
        return keywords

    def schema(self) -> dict[str, Any]:
        """This argument's JSON Schema property."""
        prop: dict[str, Any] = {"type": TYPE_NAMES[self.kind]}
        if self.description:
            prop["description"] = self.description
        prop.update(self._keywords())
        if not self.required and self.default is not None:
            prop["default"] = self.default
        return prop

    def check(self, value: Any, command: str) -> Any:
        """``value`` if it is within the declared choices and bounds, else ArgumentError."""
        where = f"argument {self.name!r} of {command!r}"
        if self.kind in JSON_KINDS:
            return value  # its shape is the command's to check
        if self.choices is not None and value not in self.choices:
            shown = ", ".join(_show_default(choice) for choice in self.choices)
            raise ArgumentError(f"{where} must be one of {shown} (got {_show_default(value)})")
        low, high = self.minimum, self.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                bound = f"between {_show_number(low)} and {_show_number(high)}"
            elif low is not None:
                bound = f"at least {_show_number(low)}"
            else:
                bound = f"at most {_show_number(high)}"
            raise ArgumentError(f"{where} must be {bound} (got {_show_number(value)})")
        return value


@dataclass(frozen=True)
class CommandSpec:
    """A registered command: what ``/tools`` says about it and how to call it."""

    name: str
    func: Callable[..., Any]
    description: str
    toolset: str | None
    args: tuple[ArgSpec, ...]
    sync: bool = True
    accepts_extra: bool = False  # the function takes **kwargs: extra arguments pass as strings
    listed: bool = True  # False: accepted by /command but not published in /tools

    def manifest(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "description": self.description,
                                 "args": [arg.manifest() for arg in self.args],
                                 "inputSchema": self.input_schema()}
        if not self.sync:
            entry["sync"] = False
        return entry

    def input_schema(self) -> dict[str, Any]:
        """The exact JSON Schema of the arguments ``/command`` accepts."""
        schema: dict[str, Any] = {"type": "object",
                                  "properties": {arg.name: arg.schema() for arg in self.args}}
        required = [arg.name for arg in self.args if arg.required]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = self.accepts_extra
        return schema

    def signature_text(self) -> str:
        """``drop(x: number, settle: boolean = true)`` for error messages."""
        parts = []
        for arg in self.args:
            text = f"{arg.name}: {TYPE_NAMES[arg.kind]}"
            if not arg.required:
                text += f" = {_show_default(arg.default)}"
            parts.append(text)
        return f"{self.name}({', '.join(parts)})"


def _show_default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value) if isinstance(value, str) else _show_number(value)


def _show_number(value: Any) -> str:
    """``3`` for 3.0, ``2.5`` for 2.5: numbers as an agent would write them."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"{what} {name!r} is not usable: a name starts with a letter or '_' and "
                         "has at most 64 letters, digits, '_', '.' or '-'.")
    return name


def _docstring_parts(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The summary (first paragraph) and ``Args:`` entries of a Google-style docstring."""
    doc = inspect.getdoc(func) or ""
    paragraphs = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)
    summary = " ".join(line.strip() for line in paragraphs[0].splitlines()) if doc.strip() else ""
    if summary.lower().rstrip(":") in ("args", "arguments", "parameters"):
        summary = ""
    arg_help: dict[str, str] = {}
    entry_indent: int | None = None
    current: str | None = None
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            in_args, entry_indent, current = True, None, None
            continue
        if not in_args:
            continue
        if not stripped:
            continue
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
        if match and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent if entry_indent is None else entry_indent
            current = str(match.group(1))
            arg_help[current] = match.group(2).strip()
        elif current is not None and entry_indent is not None and indent > entry_indent:
            arg_help[current] = (arg_help[current] + " " + stripped).strip()
        else:
            in_args = False
    return summary, arg_help


def _optional_of(annotation: Any) -> Any:
    """``T`` of ``Optional[T]`` (``T | None``), else None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1 and len(typing.get_args(annotation)) == 2:
            return members[0]
    return None


def _unwrap(annotation: Any) -> tuple[Any, Arg]:
    """``Annotated[Optional[T], "help", Arg(...)]`` -> (T, Arg); ``Literal[...]`` -> the
    type of its values, with them as the choices."""
    declared = Arg()
    optional = _optional_of(annotation)
    if optional is not None and typing.get_origin(optional) is typing.Annotated:
        annotation = optional  # Optional[Annotated[T, ...]]: what Python 3.10 makes of a None default
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        for extra in extras:
            if isinstance(extra, str) and declared.description is None:
                declared = replace(declared, description=extra)
            elif isinstance(extra, Arg):
                declared = _merge(declared, extra)
        annotation = base
    annotation = _optional_of(annotation) or annotation
    if typing.get_origin(annotation) is typing.Literal:
        values = typing.get_args(annotation)
        kinds = {type(value) for value in values}
        if len(kinds) != 1 or next(iter(kinds)) not in TYPE_NAMES:
            raise TypeError(f"Literal{list(values)!r} mixes types or holds a type the kit cannot "
                            "take; use strings, or numbers of one type")
        annotation = next(iter(kinds))
        declared = _merge(Arg(choices=values), declared)
    return annotation, declared


def _constrained(spec: ArgSpec, declared: Arg, command: str) -> ArgSpec:
    """``spec`` with ``declared``'s bounds and choices, checked against its type and default."""
    where = f"Command {command!r}: argument {spec.name!r}"
    low, high, choices = declared.minimum, declared.maximum, declared.choices
    if low is not None or high is not None:
        if spec.kind not in (int, float):
            raise TypeError(f"{where} is a {TYPE_NAMES[spec.kind]}; only numbers take a minimum or maximum")
        for bound in (low, high):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                                      or not math.isfinite(bound)):
                raise TypeError(f"{where}: a bound must be a finite number, not {bound!r}")
        if low is not None and high is not None and low > high:
            raise ValueError(f"{where}: minimum {low} is above maximum {high}")
    values: tuple[Any, ...] | None = None
    if choices is not None:
        values = tuple(choices)
        if spec.kind in JSON_KINDS:
            raise TypeError(f"{where} is an {TYPE_NAMES[spec.kind]}; only strings, numbers and booleans take choices")
        if not values or len(values) > MAX_CHOICES:
            raise ValueError(f"{where}: give 1 to {MAX_CHOICES} choices, not {len(values)}")
        for value in values:
            fits = (type(value) is spec.kind or
                    (spec.kind is float and type(value) is int))
            if not fits:
                raise TypeError(f"{where}: choice {value!r} is not of its type, {TYPE_NAMES[spec.kind]}")
    extra = None
    if declared.schema is not None:
        extra = dict(declared.schema)
        reserved = sorted(set(extra) & {"type", "description", "default", "enum", "minimum", "maximum"})
        if reserved:
            raise ValueError(f"{where}: Arg(schema=...) may not set {', '.join(reserved)} (the kit writes those)")
        try:
            json.dumps(extra, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{where}: Arg(schema=...) is not plain JSON ({exc})") from None
    checked = replace(spec, minimum=low, maximum=high, choices=values, schema_extra=extra)
    if not checked.required and checked.default is not None:
        try:
            checked.check(checked.default, command)
        except ArgumentError as exc:
            raise ValueError(f"{where}: its default does not fit ({exc})") from None
    return checked


def spec_from_function(func: Callable[..., Any], *, name: str | None = None,
                       description: str | None = None, toolset: str | None = "play",
                       sync: bool = True, args: Mapping[str, "str | Arg"] | None = None,
                       listed: bool = True) -> CommandSpec:
    """Read a command's name, description and typed arguments from ``func``.

    Raises ValueError/TypeError at registration time (never at request time) for what
    cannot be served: positional-only or ``*args`` parameters, unsupported types,
    reserved names (``cmd``, ``port``).
    """
    command_name = check_name(name or func.__name__, "Command name")
    if toolset is not None:
        check_name(toolset, "Toolset name")
    summary, doc_help = _docstring_parts(func)
    given = {key: value if isinstance(value, Arg) else Arg(description=str(value))
             for key, value in dict(args or {}).items()}
    unknown = sorted(set(given) - set(inspect.signature(func).parameters))
    if unknown:
        raise ValueError(f"Command {command_name!r}: args= names {unknown[0]!r}, which is not one "
                         "of its parameters")
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        hint = (" Names used in annotations must be importable from the function's module (with "
                "'from __future__ import annotations' they are evaluated there, not where the function "
                "is defined); or declare bounds with args={...: Arg(...)}." if isinstance(exc, NameError) else "")
        raise TypeError(f"Command {command_name!r}: cannot resolve its type annotations ({exc}).{hint}") from None
    specs: list[ArgSpec] = []
    accepts_extra = False
    for param in inspect.signature(func).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            accepts_extra = True
            continue
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
            raise TypeError(f"Command {command_name!r}: parameter {param.name!r} cannot be passed by "
                            "name; commands are called with keyword arguments only.")
        if param.name in RESERVED_ARG_NAMES:
            raise ValueError(f"Command {command_name!r}: an argument may not be called {param.name!r} "
                             "(the contract reserves 'cmd' for the command and 'port' for the instance).")
        check_name(param.name, f"Command {command_name!r}: argument name")
        default = NO_DEFAULT if param.default is param.empty else param.default
        try:
            annotation, declared = _unwrap(hints.get(param.name, param.empty))
        except TypeError as exc:
            raise TypeError(f"Command {command_name!r}: argument {param.name!r}: {exc}") from None
        if param.name in doc_help and doc_help[param.name]:  # the docstring's text beats Annotated's
            declared = replace(declared, description=doc_help[param.name])
        declared = _merge(declared, given.get(param.name, Arg()))  # and args= beats both
        if annotation is param.empty or annotation is Any:
            annotation = type(default) if type(default) in TYPE_NAMES else str
        if typing.get_origin(annotation) in (list, dict):  # list[float], dict[str, Any]: a JSON array, object
            annotation = typing.get_origin(annotation)
        if annotation not in TYPE_NAMES:
            raise TypeError(f"Command {command_name!r}: argument {param.name!r} has type {annotation!r}; "
                            "the kit supports int, float, bool, str, Literal of those, and list and dict "
                            "(JSON values).")
        spec = ArgSpec(param.name, annotation, declared.description or "", default)
        specs.append(_constrained(spec, declared, command_name))
    text = description if description is not None else summary
    return CommandSpec(command_name, func, text or f"Runs the game's {command_name!r} command.",
                       toolset, tuple(specs), sync, accepts_extra, listed)


def convert_value(arg: ArgSpec, text: str, command: str) -> Any:
    """Query text -> the declared type; ArgumentError with a reader-facing message."""
    kind = arg.kind
    where = f"argument {arg.name!r} of {command!r}"
    value = text.strip()
    if kind is str:
        return text
    if kind in JSON_KINDS:
        return _json_value(arg, text, where)
    if kind is bool:
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ArgumentError(f"{where} must be a boolean (true or false), got {text!r}")
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if kind is int:
        try:
            return int(value, 10)
        except ValueError:
            if math.isfinite(number) and number.is_integer():
                return int(number)
        raise ArgumentError(f"{where} must be an integer, got {text!r}")
    if math.isnan(number) and value.lower() not in ("nan", "+nan", "-nan"):
        raise ArgumentError(f"{where} must be a number, got {text!r}")
    if not math.isfinite(number):
        raise ArgumentError(f"{where} must be a finite number, got {text!r}")
    return number


def _json_value(arg: ArgSpec, text: str, where: str) -> Any:
    """A ``list`` or ``dict`` argument's JSON text, decoded (strict JSON, bounded)."""
    wanted = TYPE_NAMES[arg.kind]
    if len(text) > MAX_JSON_ARG:
        raise ArgumentError(f"{where} is {len(text)} characters of JSON; at most {MAX_JSON_ARG} are taken")
    try:
        value = decode_json(text.encode("utf-8"), strict=True)
    except (ValueError, RecursionError) as exc:
        raise ArgumentError(f"{where} must be a JSON {wanted}, got {text[:60]!r} ({str(exc)[:100]})") from None
    if type(value) is not arg.kind:
        article = "an" if wanted[0] in "aeiou" else "a"
        raise ArgumentError(f"{where} must be {article} {wanted} (JSON), got {text[:60]!r}")
    return value


def convert_query(spec: CommandSpec, query: Mapping[str, list[str]]) -> dict[str, Any]:
    """The keyword arguments for ``spec.func`` from parsed query parameters (``cmd``
    already removed). Raises ArgumentError for a duplicate, unknown or missing argument
    or a value of the wrong type."""
    declared = {arg.name: arg for arg in spec.args}
    kwargs: dict[str, Any] = {}
    for key, values in query.items():
        if len(values) != 1:
            raise ArgumentError(f"argument {key!r} of {spec.name!r} was given {len(values)} times; give it once")
        arg = declared.get(key)
        if arg is None:
            if spec.accepts_extra:
                kwargs[key] = values[0]
                continue
            known = ", ".join(declared) or "none"
            raise ArgumentError(f"{spec.name!r} has no argument {key!r} (its arguments: {known})")
        kwargs[key] = arg.check(convert_value(arg, values[0], spec.name), spec.name)
    missing = [arg.name for arg in spec.args if arg.required and arg.name not in kwargs]
    if missing:
        raise ArgumentError(f"{spec.name!r} needs argument{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(repr(m) for m in missing)}: {spec.signature_text()}")
    return kwargs
