"""Typed game commands: a Python function's signature becomes manifest arguments, and
query-string text becomes the values the function declared.

Why a module of its own: this is the part of the kit that decides what an agent is
told (the ``/tools`` entry) and what it may send (the ``/command`` conversion), so the
two are derived from one place, the function itself, and cannot drift apart. Pure: no
threads, no sockets.

Supported parameter types: ``int``, ``float``, ``bool``, ``str`` (``Optional[...]`` of
those too), plus ``typing.Annotated[T, "description"]`` for an argument's description.
An unannotated parameter takes its type from its default, else it is a string.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: Python type -> JSON Schema type name used in the manifest.
TYPE_NAMES: dict[type, str] = {int: "integer", float: "number", bool: "boolean", str: "string"}
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
class ArgSpec:
    """One declared argument of a command."""

    name: str
    kind: type
    description: str = ""
    default: Any = NO_DEFAULT

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def manifest(self) -> dict[str, Any]:
        """The ``args[]`` entry: ``{name, type, description, required, default}``."""
        return {"name": self.name, "type": TYPE_NAMES[self.kind], "description": self.description,
                "required": self.required, "default": None if self.required else self.default}


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
                                 "args": [arg.manifest() for arg in self.args]}
        if not self.sync:
            entry["sync"] = False
        return entry

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
    return repr(value) if isinstance(value, str) else str(value)


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
            current = match.group(1)
            arg_help[current] = match.group(2).strip()
        elif current is not None and entry_indent is not None and indent > entry_indent:
            arg_help[current] = (arg_help[current] + " " + stripped).strip()
        else:
            in_args = False
    return summary, arg_help


def _unwrap(annotation: Any) -> tuple[Any, str]:
    """``Annotated[Optional[T], "help"]`` -> (T, "help")."""
    description = ""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        description = next((e for e in extras if isinstance(e, str)), "")
        annotation = base
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            annotation = members[0]
    return annotation, description


def spec_from_function(func: Callable[..., Any], *, name: str | None = None,
                       description: str | None = None, toolset: str | None = "play",
                       sync: bool = True, args: Mapping[str, str] | None = None,
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
    arg_help = {**doc_help, **dict(args or {})}
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise TypeError(f"Command {command_name!r}: cannot resolve its type annotations ({exc}).") from None
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
        annotation, help_text = _unwrap(hints.get(param.name, param.empty))
        if annotation is param.empty or annotation is Any:
            annotation = type(default) if type(default) in TYPE_NAMES else str
        if annotation not in TYPE_NAMES:
            raise TypeError(f"Command {command_name!r}: argument {param.name!r} has type {annotation!r}; "
                            "the kit supports int, float, bool and str.")
        specs.append(ArgSpec(param.name, annotation, arg_help.get(param.name, help_text) or help_text,
                             default))
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
        kwargs[key] = convert_value(arg, values[0], spec.name)
    missing = [arg.name for arg in spec.args if arg.required and arg.name not in kwargs]
    if missing:
        raise ArgumentError(f"{spec.name!r} needs argument{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(repr(m) for m in missing)}: {spec.signature_text()}")
    return kwargs
