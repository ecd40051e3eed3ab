"""Reading a game's tool manifest (``GET /tools`` or ``--manifest FILE``) into frozen toolsets,
tolerant of its shapes and treating its text as hostile data (docs/game-side.md, "How the
bridge reads a game's manifest"). :func:`normalise_manifest` never raises."""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Iterator

from ..contract import BRIDGE_TOOLSET, PROTOCOL
from ..errors import BridgeUsageError
from .sanitise import (ARG_DESCRIPTION_LIMIT, DESCRIPTION_LIMIT, EXAMPLE_LIMIT, FOLDED_DEFAULT_LIMIT,
                       GAME_DESCRIPTION_LIMIT, IDENTITY_LIMIT, NAME_LIMIT, kind_of, one_line, quote_name, sanitise_text)
from .schema import (MAX_ARGS, MAX_DEFAULT_BYTES, MAX_ENUM, MAX_ITEMS_DEPTH, MAX_SCHEMA_BYTES,
                     MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, RESERVED_ARG_NAMES, ArgumentsError,
                     args_to_schema, verbatim_schema)
from ..jsonio import FileProblem, load_json_file

log = logging.getLogger(__name__)

#: The manifest document version this bridge reads (``game.protocol``).
MANIFEST_PROTOCOL = PROTOCOL
#: Toolset names the bridge answers itself in ``describe_toolset``.
RESERVED_TOOLSETS = frozenset({"bridge", "passthrough"})

#: Limits against hostile or runaway manifests (argument and schema limits: :mod:`.schema`).
MAX_TOOLSETS = 64
MAX_TOOLS = 512  # tool entries examined across the whole manifest
MAX_FILE_BYTES = 4 * 1024 * 1024  # --manifest FILE
MAX_PROBLEMS = 200  # notes kept on one manifest
MAX_EXAMPLES = 20  # passthrough examples

DEFAULT_PASSTHROUGH = ("Any command the game accepts can be sent by name through raw_command "
                       "or call_tool, even if it is not listed here.")

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_NAME_RULE = ("a name starts with a letter or '_' and has at most 64 letters, digits, "
              "'_', '.' or '-'")


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ToolSpec:
    """One game tool as the bridge offers it."""

    name: str  # what the agent calls
    description: str  # sanitised, capped
    command: str  # the cmd sent to the game; defaults to name
    sync: bool  # False: the bridge must not wait for confirmation
    input_schema: dict[str, Any] = field(hash=False)  # JSON Schema object (type "object")
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
    game: dict[str, Any] = field(hash=False)  # {"name": str|None, "version": str|None, "protocol": int|None}
    toolsets: tuple[Toolset, ...]
    passthrough: dict[str, Any] = field(hash=False)  # {"description": str, "examples": [str, ...]}
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



class _Dropped(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _usable_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME_RE.fullmatch(value) is not None


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
    shown = quote_name(value) if isinstance(value, str) else kind_of(value)
    raise _Dropped(f"sync is {shown}; expected true or false")


def _read_tool(raw: Any, toolset: str, key: Any, reserved_tools: frozenset[str],
               problems: list[str]) -> ToolSpec:
    if not isinstance(raw, Mapping):
        raise _Dropped(f"the tool entry is {kind_of(raw)}; expected an object")
    name = raw.get("name")
    if name is None and key is not None:
        name = key  # tools given as a map of name -> tool
    if name is None:
        raise _Dropped("the tool has no name")
    if not _usable_name(name):
        raise _Dropped(f"the tool name {quote_name(name) if isinstance(name, str) else kind_of(name)} "
                       f"is not usable: {_NAME_RULE}")
    if name in reserved_tools:
        raise _Dropped(f"the name '{name}' is reserved by the bridge toolset; call it through "
                       "call_tool's bridge tools")
    command = raw.get("command")
    if command is None or (isinstance(command, str) and not command.strip()):
        command = name
    elif not isinstance(command, str):
        raise _Dropped(f"command is {kind_of(command)}; expected the name of the cmd to send")
    elif not _usable_name(command):
        raise _Dropped(f"command {quote_name(command)} is not usable: {_NAME_RULE}")
    sync = _read_sync(raw.get("sync"))
    description = sanitise_text(raw.get("description"), DESCRIPTION_LIMIT)
    if "inputSchema" in raw and raw.get("inputSchema") is not None:
        try:
            schema = verbatim_schema(raw.get("inputSchema"), RESERVED_ARG_NAMES)
        except ArgumentsError as exc:
            raise _Dropped(str(exc)) from None
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
        return one_line(value, IDENTITY_LIMIT) or None
    problems.append(f"game.{field_name} is {kind_of(value)}; ignored")
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
        problems.append(f"game.protocol is {kind_of(value)}, not a number; reading as protocol "
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
                text = one_line(example, EXAMPLE_LIMIT) if isinstance(example, str) else ""
                if text:
                    examples.append(text)
        elif raw_examples is not None:
            problems.append(f"passthrough.examples is {kind_of(raw_examples)}; ignored")
    elif value is not None:
        problems.append(f"passthrough is {kind_of(value)}; expected an object, ignored")
    return {"description": description, "examples": examples}


def _toolset_entries(raw: Any, problems: list[str]) -> list[tuple[Any, Any]]:
    if raw is None:
        return []
    if isinstance(raw, (list, tuple)):
        entries: list[tuple[Any, Any]] = [(None, value) for value in raw]
    elif isinstance(raw, Mapping):
        entries = list(raw.items())
    else:
        problems.append(f"toolsets is {kind_of(raw)}; expected an array or an object, no tools read")
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
        problems.append(f"the manifest is {kind_of(doc)}, not a JSON object; no tools read")
        return Manifest(source=source, game={"name": None, "version": None, "protocol": None},
                        toolsets=(), passthrough=_passthrough(None, problems),
                        dropped=(), problems=tuple(problems))
    raw_game = doc.get("game")
    if raw_game is not None and not isinstance(raw_game, Mapping):
        problems.append(f"game is {kind_of(raw_game)}; expected an object, ignored")
    game_map: Mapping[str, Any] = raw_game if isinstance(raw_game, Mapping) else {}
    game = {"name": _identity(game_map.get("name"), "name", problems),
            "version": _identity(game_map.get("version"), "version", problems),
            "protocol": _protocol(game_map.get("protocol"), problems)}
    description = game_map.get("description")
    if isinstance(description, str):
        text = sanitise_text(description, GAME_DESCRIPTION_LIMIT)
        if text:
            game["description"] = text  # the rules, for list_toolsets
        if len(description) > GAME_DESCRIPTION_LIMIT:
            problems.append(f"game.description has {len(description)} characters; the first "
                            f"{GAME_DESCRIPTION_LIMIT} are shown")
    elif description is not None:
        problems.append(f"game.description is {kind_of(description)}, not text; ignored")

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
            problems.append(f"toolset {position} is {kind_of(raw)}; expected an object, dropped")
            continue
        name = own if isinstance(own, str) and own.strip() else key
        if not _usable_name(name):
            label = quote_name(name) if isinstance(name, str) else f"at position {position}"
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
            problems.append(f"toolset '{name}': tools is {kind_of(raw_tools)}; expected an array, "
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
            tool_label: str | None = (one_line(shown_name, NAME_LIMIT) or None) if isinstance(shown_name, str) else None
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
                       reserved_tools: frozenset[str] = frozenset(BRIDGE_TOOLSET)) -> Manifest:
    """A :class:`Manifest` from a decoded manifest document. Never raises: what cannot be
    used is dropped and the reason kept in ``dropped`` / ``problems``. A game tool named
    like one of ``reserved_tools`` (by default the bridge toolset, the contract's names) is
    dropped rather than shadowing it."""
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
        doc = load_json_file(path, MAX_FILE_BYTES, strict=False)
    except FileProblem as exc:
        if exc.kind == "invalid":
            raise BridgeUsageError(f"The manifest file {path} {exc}. Fix the file (it must hold one "
                                   "JSON object in the GET /tools format) or point --manifest at "
                                   "another one.", file=str(path)) from None
        if exc.kind == "too-large":
            raise BridgeUsageError(f"The manifest file {path} is larger than {MAX_FILE_BYTES} bytes, "
                                   f"which no tool manifest needs. {advice}.", file=str(path)) from None
        raise BridgeUsageError(f"Cannot read the manifest file {path}: it {exc}. {advice}.",
                               file=str(path)) from None
    if not isinstance(doc, dict):
        raise BridgeUsageError(f"The manifest file {path} holds {kind_of(doc)}, not a JSON object "
                               'like {"game": {...}, "toolsets": [...]}. Fix the file or point '
                               "--manifest at another one.", file=str(path))
    return normalise_manifest(doc, source="file")


__all__ = [
    # this module
    "DEFAULT_PASSTHROUGH", "MANIFEST_PROTOCOL", "MAX_EXAMPLES",
    "MAX_FILE_BYTES", "MAX_PROBLEMS", "MAX_TOOLS", "MAX_TOOLSETS", "RESERVED_TOOLSETS",
    "DroppedTool", "Manifest", "Toolset", "ToolSpec",
    "fallback_manifest", "load_manifest_file", "normalise_manifest",
    # re-exported from .sanitise
    "ARG_DESCRIPTION_LIMIT", "DESCRIPTION_LIMIT", "EXAMPLE_LIMIT", "FOLDED_DEFAULT_LIMIT",
    "IDENTITY_LIMIT", "NAME_LIMIT", "sanitise_text",
    # re-exported from .schema
    "MAX_ARGS", "MAX_DEFAULT_BYTES", "MAX_ENUM", "MAX_ITEMS_DEPTH", "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH", "MAX_SCHEMA_NODES", "RESERVED_ARG_NAMES", "ArgumentsError",
    "args_to_schema",
]
