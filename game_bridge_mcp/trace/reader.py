"""Reading a trace file as a stream, within its caps: every way it can be broken is a
:class:`BridgeUsageError` naming the file and line; a :class:`Call` re-reads its line when its
answer is wanted."""

from __future__ import annotations

import json
import os
import stat
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import BridgeUsageError
from ..jsonio import decode_json
from ..core.tools.table import tool_def
from .format import FORMAT, REPLAYED_TOOLS, VERSION

#: A trace bigger than this is refused rather than read.
MAX_TRACE_BYTES = 256 * 1024 * 1024
#: The longest line read (an answer is kept whole up to 64 KiB; the rest is arguments).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The most calls one trace holds.
MAX_CALLS = 100_000
#: The longest label of a call shown (its name and arguments), in characters.
LABEL_CHARS = 300
#: The largest recorded identity kept per port (its JSON, in characters).
_IDENTITY_CHARS = 64 * 1024


class _Lines:
    """The open trace file, and the one line decoded last (a replay step reads its call's
    record a few times in a row)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self._lock = threading.Lock()
        self._last: tuple[int, dict[str, Any]] | None = None
        weakref.finalize(self, os.close, fd)

    def record(self, offset: int, length: int, number: int) -> dict[str, Any]:
        with self._lock:
            if self._last is not None and self._last[0] == offset:
                return self._last[1]
            try:
                data = os.pread(self.fd, length, offset)
                value = decode_json(data, strict=True) if len(data) == length else None
            except (OSError, ValueError):
                value = None
            if not isinstance(value, dict):
                raise _fail(self.path, f"changed while it was replayed (line {number} is no longer the record "
                            "read at the start)", "Replay it again once nothing writes to it.", line=number)
            self._last = (offset, value)
            return value


@dataclass(frozen=True)
class Call:
    """One recorded tool call (a ``"call"`` line), numbered from 1 in file order. Its
    record (answer, arguments, identity ...) is read from the file when asked for."""

    step: int
    line: int
    tool: str
    port: int | None
    name: str | None
    session: str | None = None
    #: Where the line is in the file: read again by :attr:`record`.
    offset: int = 0
    length: int = 0
    source: _Lines | None = field(default=None, repr=False, compare=False)
    #: Only for a Call made in memory (no file): its record.
    held: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def record(self) -> dict[str, Any]:
        """The call's whole line, decoded (read again from the trace file)."""
        if self.source is None:
            return self.held or {}
        return self.source.record(self.offset, self.length, self.line)

    @property
    def arguments(self) -> dict[str, Any]:
        value = self.record.get("arguments")
        return value if isinstance(value, dict) else {}

    @property
    def options(self) -> dict[str, Any]:
        """What else the call_tool call carried (``until`` ...): sent again on replay."""
        value = self.record.get("options")
        return value if isinstance(value, dict) else {}

    @property
    def replayed(self) -> bool:
        """Whether replay re-issues this call (it acts on the game)."""
        return self.tool in REPLAYED_TOOLS and self.name is not None

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
        """``call_tool drop {"x": 1}``: the call as a person reads it (at most
        :data:`LABEL_CHARS` characters)."""
        args = json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)
        extra = "".join(f" {key} {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
                        for key, value in self.options.items())
        text = f"{self.name if self.tool == 'call_tool' and self.name else self.tool} {args}{extra}"
        return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


@dataclass(frozen=True)
class Trace:
    path: Path
    header: dict[str, Any]
    calls: list[Call] = field(default_factory=list)
    #: Per port, the game identity of its first call that has one (see :meth:`identity`).
    identities: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: The ports a launch_instance {paused: true} of the recording started a game on.
    launched_paused: frozenset[int] = frozenset()
    #: Ports that a recorded ``fork_instance`` made (replay maps each to its own fork's).
    forked: frozenset[int] = frozenset()

    @property
    def replayed_calls(self) -> list[Call]:
        return [c for c in self.calls if c.replayed]

    def ports(self) -> list[int]:
        """The game ports of the replayed calls, in order of first appearance."""
        seen: dict[int, None] = {}
        for call in self.replayed_calls:
            if call.port is not None and call.port not in self.forked:
                seen.setdefault(call.port)
        return list(seen)

    def identity(self, port: int) -> dict[str, Any]:
        """The game identity recorded for ``port`` (its first call that has one)."""
        return self.identities.get(port, {})

    def started_paused(self, port: int) -> bool:
        """Whether the game on ``port`` was paused when the session first met it, or was
        launched paused by it."""
        return port in self.launched_paused or self.identity(port).get("paused") is True


def _fail(path: Path, problem: str, todo: str, **fields: Any) -> BridgeUsageError:
    return BridgeUsageError(f"The trace {path} {problem}. {todo}", trace=str(path), **fields)


def _open(path: Path) -> int:
    """The trace, open for reading: a regular file of at most MAX_TRACE_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _fail(path, "does not exist", "Check the path; a recording is written with --record FILE.") from None
    except OSError as exc:
        raise _fail(path, f"cannot be read ({exc.strerror or exc})",
                    "Check the path; a recording is written with --record FILE.") from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file", "Check the path; a recording is written with --record FILE."
    elif info.st_size > MAX_TRACE_BYTES:
        problem = (f"is {info.st_size:,} bytes, more than the {MAX_TRACE_BYTES:,} a trace may be",
                   "Split it, or replay a shorter recording.")
    if problem is not None:
        os.close(fd)
        raise _fail(path, *problem)
    return fd


def _lines(path: Path, fd: int) -> Iterator[tuple[int, int, bytes, bool]]:
    """``(number, offset, line, complete)`` for each non-blank line (without its newline),
    read in pieces; a line over MAX_LINE_BYTES is refused as it is read, never held."""
    with open(os.dup(fd), "rb", buffering=1 << 20) as handle:
        offset, number, total = 0, 0, 0
        while True:
            line = handle.readline(MAX_LINE_BYTES + 2)
            if not line:
                return
            number += 1
            total += len(line)
            if total > MAX_TRACE_BYTES:
                raise _fail(path, f"grew past {MAX_TRACE_BYTES:,} bytes while it was read",
                            "Replay it once nothing writes to it, or split it.")
            complete = line.endswith(b"\n")
            if len(line) > MAX_LINE_BYTES:
                raise _fail(path, f"has a line longer than {MAX_LINE_BYTES:,} bytes (line {number})",
                            "A recorder keeps answers over 64 KiB as their digest; fix or delete that line.",
                            line=number)
            if line.strip():
                yield number, offset, line[:-1] if complete else line, complete
            offset += len(line)


def read_trace(path: str | Path) -> Trace:
    """Read and check a trace file line by line (see :mod:`.format` and this module's
    docstring): the header, then every call line, each let go once it is checked."""
    path = Path(path)
    fd = _open(path)
    source = _Lines(path, fd)
    head: dict[str, Any] | None = None
    calls: list[Call] = []
    identities: dict[int, dict[str, Any]] = {}
    paused: set[int] = set()
    forked: set[int] = set()
    for number, offset, line, complete in _lines(path, fd):
        try:
            value = decode_json(line, strict=True)
        except ValueError as exc:
            if not complete:
                raise _fail(path, f"is truncated: its last line (line {number}) stops in the middle of a record",
                            f"The recording was cut off mid-write (the recorder died or the disk filled). "
                            f"Delete line {number} to replay the {len(calls)} calls before it.",
                            line=number) from None
            shown = line[:80].decode("utf-8", errors="replace")
            raise _fail(path, f"has a line that is not JSON: line {number} {exc}: {shown!r}",
                        "A trace is JSON Lines written by --record; fix or delete that line.", line=number) from None
        if not isinstance(value, dict):
            raise _fail(path, f"has a line that is not a JSON object: line {number}",
                        "A trace is JSON Lines of objects written by --record; fix or delete that line.", line=number)
        if head is None:
            head = _header(path, number, value)
            continue
        if value.get("type") != "call":
            continue  # a line type this version does not know: skipped, by the format's rule
        if len(calls) >= MAX_CALLS:
            raise _fail(path, f"holds more than {MAX_CALLS:,} calls", "Split it, or replay a shorter recording.")
        call = _call(path, number, len(calls) + 1, value, source, offset, len(line))
        calls.append(call)
        _note_identity(call, value, identities, paused)
        fork = value.get("answer") if call.name == "fork_instance" else None
        if isinstance(fork, dict) and isinstance(fork.get("port"), int):
            forked.add(fork["port"])
    if head is None:
        raise _fail(path, "is empty", "A recording starts with a header line; record a session with --record FILE.")
    return Trace(path=path, header=head, calls=calls, identities=identities, launched_paused=frozenset(paused),
                 forked=frozenset(forked))


def _header(path: Path, number: int, head: dict[str, Any]) -> dict[str, Any]:
    if head.get("format") != FORMAT:
        raise _fail(path, f"is not a game-bridge trace: line {number} does not name the format "
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
    return head


def _note_identity(call: Call, record: Mapping[str, Any], identities: dict[int, dict[str, Any]],
                   paused: set[int]) -> None:
    """What :meth:`Trace.identity` and :meth:`Trace.started_paused` answer, gathered as the
    lines go by (each port's first identity, kept only when it is of a sensible size)."""
    game = record.get("game")
    if call.port is not None and call.port not in identities and isinstance(game, dict) and game:
        if len(json.dumps(game, ensure_ascii=False, default=str)) <= _IDENTITY_CHARS:
            identities[call.port] = game
    if call.tool == "launch_instance":
        arguments, answer = record.get("arguments"), record.get("answer")
        port = answer.get("port") if isinstance(answer, dict) else None
        if isinstance(arguments, dict) and arguments.get("paused") is True and isinstance(port, int):
            paused.add(port)


def _call(path: Path, number: int, step: int, record: Mapping[str, Any], source: _Lines,
          offset: int, length: int) -> Call:
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
    _options(path, number, tool, record.get("options", {}))
    session = record.get("session")
    return Call(step=step, line=number, tool=tool, port=port, name=name if isinstance(name, str) else None,
                session=session[:64] if isinstance(session, str) and session else None,
                offset=offset, length=length, source=source)


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
