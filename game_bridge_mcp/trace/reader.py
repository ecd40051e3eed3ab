"""Reading a trace file: strict about what it cannot trust, clear about what is wrong.

A trace comes from outside (a colleague's recording, a CI artefact, a file cut short by a
crash), so every way it can be broken is a :class:`BridgeUsageError` that names the file,
the line and the next thing to do: a missing header, a newer format version, a line that
is not JSON, a last line cut off mid-write, a call line without the fields a replay needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..errors import BridgeUsageError
from ..jsonio import FileProblem, decode_json, read_capped
from ..tools import tool_def
from .format import FORMAT, REPLAYED_TOOLS, VERSION

#: A trace bigger than this is refused rather than read into memory.
MAX_TRACE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Call:
    """One recorded tool call (a ``"call"`` line), numbered from 1 in file order."""

    step: int
    line: int
    tool: str
    port: int | None
    name: str | None
    arguments: dict[str, Any]
    record: dict[str, Any]
    #: What else the call_tool call carried (``until`` ...): sent again on replay.
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def replayed(self) -> bool:
        """Whether replay re-issues this call (it acts on the game)."""
        return self.tool in REPLAYED_TOOLS and self.name is not None

    @property
    def session(self) -> str | None:
        """The recording bridge's session (format.py), None when the trace has none."""
        value = self.record.get("session")
        return value[:64] if isinstance(value, str) and value else None

    @property
    def error(self) -> dict[str, Any] | None:
        value = self.record.get("error")
        return value if isinstance(value, dict) else None

    @property
    def game(self) -> dict[str, Any]:
        value = self.record.get("game")
        return value if isinstance(value, dict) else {}

    @property
    def screenshot(self) -> dict[str, Any] | None:
        value = self.record.get("screenshot")
        return value if isinstance(value, dict) else None

    def label(self) -> str:
        """``call_tool drop {"x": 1}``: the call as a person reads it."""
        args = json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)
        extra = "".join(f" {key} {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
                        for key, value in self.options.items())
        if self.tool == "call_tool" and self.name:
            return f"{self.name} {args}{extra}"
        return f"{self.tool} {args}{extra}"


@dataclass(frozen=True)
class Trace:
    path: Path
    header: dict[str, Any]
    calls: list[Call] = field(default_factory=list)

    @property
    def replayed_calls(self) -> list[Call]:
        return [c for c in self.calls if c.replayed]

    def ports(self) -> list[int]:
        """The game ports of the replayed calls, in order of first appearance."""
        seen: list[int] = []
        for call in self.replayed_calls:
            if call.port is not None and call.port not in seen:
                seen.append(call.port)
        return seen

    def identity(self, port: int) -> dict[str, Any]:
        """The game identity recorded for ``port`` (its first call that has one)."""
        for call in self.calls:
            if call.port == port and call.game:
                return call.game
        return {}

    def started_paused(self, port: int) -> bool:
        """Whether the game on ``port`` was paused when the session first met it, or was
        launched paused by it."""
        for call in self.calls:
            if call.tool == "launch_instance" and call.arguments.get("paused") is True:
                answer = call.record.get("answer")
                if isinstance(answer, dict) and answer.get("port") == port:
                    return True
        return self.identity(port).get("paused") is True


def _fail(path: Path, problem: str, todo: str, **fields: Any) -> BridgeUsageError:
    return BridgeUsageError(f"The trace {path} {problem}. {todo}", trace=str(path), **fields)


def read_trace(path: str | Path) -> Trace:
    """Read and check a whole trace file (see :mod:`.format`)."""
    path = Path(path)
    try:
        data = read_capped(path, MAX_TRACE_BYTES, regular_only=True)
    except FileProblem as exc:
        todo = ("Split it, or replay a shorter recording." if exc.kind == "too-large"
                else "Check the path; a recording is written with --record FILE.")
        raise _fail(path, str(exc), todo) from None
    if not data.strip():
        raise _fail(path, "is empty", "A recording starts with a header line; record a session with --record FILE.")
    lines = data.split(b"\n")
    ends_cleanly = data.endswith(b"\n")
    if ends_cleanly:
        lines.pop()
    records: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = decode_json(line, strict=True)
        except ValueError as exc:
            last = number == len(lines)
            if last and not ends_cleanly:
                raise _fail(path, f"is truncated: its last line (line {number}) stops in the middle of a record",
                            f"The recording was cut off mid-write (the recorder died or the disk filled). "
                            f"Delete line {number} to replay the {len(records) - 1 if records else 0} "
                            "calls before it.", line=number) from None
            shown = line[:80].decode("utf-8", errors="replace")
            raise _fail(path, f"has a line that is not JSON: line {number} {exc}: {shown!r}",
                        "A trace is JSON Lines written by --record; fix or delete that line.", line=number) from None
        if not isinstance(value, dict):
            raise _fail(path, f"has a line that is not a JSON object: line {number}",
                        "A trace is JSON Lines of objects written by --record; fix or delete that line.", line=number)
        records.append((number, value))
    if not records:
        raise _fail(path, "is empty", "A recording starts with a header line; record a session with --record FILE.")
    first_line, head = records[0]
    if head.get("format") != FORMAT:
        raise _fail(path, f"is not a game-bridge trace: line {first_line} does not name the format "
                    f"(expected {{\"format\": \"{FORMAT}\", ...}})",
                    "Record one with game-bridge-mcp --record FILE or call --record FILE.")
    version = head.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _fail(path, f"names no valid format version ({version!r})",
                    "The header's \"version\" must be a positive integer; re-record the session.")
    if version > VERSION:
        raise _fail(path, f"was written in trace format version {version}, newer than the version {VERSION} "
                    "this game-bridge-mcp reads",
                    "Upgrade game-bridge-mcp (pip install -U game-bridge-mcp) to replay it.",
                    version=version)
    calls: list[Call] = []
    for number, record in records[1:]:
        if record.get("type") != "call":
            continue  # a line type this version does not know: skipped, by the format's rule
        calls.append(_call(path, number, len(calls) + 1, record))
    return Trace(path=path, header=head, calls=calls)


def _call(path: Path, number: int, step: int, record: Mapping[str, Any]) -> Call:
    tool = record.get("tool")
    if not isinstance(tool, str) or not tool:
        raise _fail(path, f"has a call without a tool name on line {number}",
                    "Each call line needs \"tool\"; fix or delete that line.", line=number)
    port = record.get("port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535):
        raise _fail(path, f"has a call with an invalid port {port!r} on line {number}",
                    "\"port\" must be 1-65535; fix or delete that line.", line=number)
    name = record.get("name")
    if tool == "call_tool" and (not isinstance(name, str) or not name):
        raise _fail(path, f"has a call_tool call without the tool it ran (\"name\") on line {number}",
                    "Fix or delete that line.", line=number)
    arguments = record.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise _fail(path, f"has a call whose arguments are not a JSON object on line {number}",
                    "Fix or delete that line.", line=number)
    if "answer" not in record and "answerSummary" not in record and not isinstance(record.get("error"), dict):
        raise _fail(path, f"has a call with neither an answer nor an error on line {number}",
                    "A call line records what the call returned; fix or delete that line.", line=number)
    options = _options(path, number, tool, record.get("options", {}))
    return Call(step=step, line=number, tool=tool, port=port, name=name if isinstance(name, str) else None,
                arguments=dict(arguments), record=dict(record), options=options)


def _options(path: Path, number: int, tool: str, options: Any) -> dict[str, Any]:
    """A call line's ``options``: what else its ``call_tool`` call carried. Each must be
    an argument this bridge's ``call_tool`` takes, or the replay would not send what was
    recorded: an unknown one is refused, named."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise _fail(path, f"has a call whose options are not a JSON object on line {number}",
                    "Fix or delete that line.", line=number)
    if not options:
        return {}
    call_tool = tool_def("call_tool")
    known = set((call_tool.input_schema.get("properties") or {}) if call_tool is not None else ()) - {
        "name", "arguments", "port"}
    for key in options:
        if tool != "call_tool" or key not in known:
            takes = ", ".join(sorted(known)) or "none"
            raise _fail(path, f"has a call on line {number} carrying the option {str(key)[:64]!r}, which this "
                        f"game-bridge-mcp's call_tool does not take (it takes {takes})",
                        "It was recorded by another version: replay it with that version, or delete the "
                        "option from the line to replay the call without it.", line=number, option=str(key)[:64])
    return dict(options)
