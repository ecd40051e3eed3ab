"""What every ``check`` area shares: the result levels, the :class:`Target` under check, and the
:class:`CheckSession` that talks to the game as the bridge does and owns what the checks learn."""

from __future__ import annotations

import json
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, TextIO, TypeGuard

from ..jsonio import as_int, decode_json
from ..manifest.sanitise import clean_text
from ..wire.transport import HEALTH_MAX_BYTES, HttpResponse, Opener, TransportError, loopback_opener

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"


#: The most of one report line's text shown (game text quoted in it is capped well below).
MAX_LINE_TEXT = 20000


def terminal_text(text: str) -> str:
    """``text`` fit for a terminal: the game's escape sequences, controls and invisible
    characters removed (newlines and tabs kept)."""
    return clean_text(text, MAX_LINE_TEXT)


@dataclass
class Line:
    level: str
    title: str
    details: list[str] = field(default_factory=list)


@dataclass
class Target:
    """What is known about the game under check."""

    port: int
    pid: int | None = None  # the process listening on the port, when known
    cwd: Path | None = None  # the working directory it was launched in, when known
    launched: bool = False
    entry_seen_before_bind: bool | None = None  # --launch only: entry written before bind?


def is_int(value: Any) -> TypeGuard[int]:
    """A JSON whole number (``true`` is not one)."""
    return as_int(value, floats=False) is not None


def show_value(value: Any, limit: int = 120) -> str:
    """``value`` as JSON for a message, cut to ``limit`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CheckSession:
    """One check run against one port: HTTP to the game, the checklist written as it
    goes, and what earlier checks found out. The areas' checks are its subclasses."""

    def __init__(self, target: Target, *, out: TextIO, environ: Mapping[str, str],
                 timeout_ms: int = 5000, grace_ms: int = 5000, command: str | None = None,
                 command_args: Mapping[str, str] | None = None, close: bool = True,
                 registry_dir: Path | None = None, opener: Opener | None = None) -> None:
        self.target = target
        self.port = target.port
        self.base = f"http://127.0.0.1:{target.port}"
        self.out = out
        self.environ = environ
        self.timeout_s = timeout_ms / 1000.0
        self.grace_s = grace_ms / 1000.0
        self.command = command
        self.command_args = dict(command_args or {})
        self.close = close
        self.registry_override = registry_dir
        self._open: Opener = opener or loopback_opener
        self.lines: list[Line] = []
        self.known_commands: set[str] = set()
        self.unknown_accepted_id: int | None = None
        self.health_has_completed = False
        self.entry: Any = None
        self.health_doc: dict[str, Any] = {}  # the first /health answer (its features)
        self.manifest: Any = None  # the normalised /tools, when the game serves one

    # ------------------------------------------------------------------ output
    def report(self, level: str, title: str, *details: str) -> Line:
        # Lines quote what the game sent (names, errors, bodies): shown on a terminal, so
        # no escape sequence, control or invisible character of the game's gets through.
        title = terminal_text(title)
        line = Line(level, title, [terminal_text(d) for d in details if d])
        self.lines.append(line)
        self.out.write(f"{level}  {title}\n")
        for detail in line.details:
            for text in detail.splitlines():
                self.out.write(f"      {text}\n")
        self.out.flush()
        return line

    def counts(self) -> dict[str, int]:
        return {level: sum(1 for line in self.lines if line.level == level)
                for level in (PASS, WARN, FAIL, SKIP)}

    # ------------------------------------------------------------------ HTTP
    def get(self, path: str, *, max_bytes: int = 64 * 1024 * 1024,
            timeout_s: float | None = None) -> HttpResponse:
        return self._open(self.base + path, timeout=timeout_s or self.timeout_s, max_bytes=max_bytes)

    def get_json(self, path: str, **kwargs: Any) -> tuple[HttpResponse, Any, str | None]:
        """``(response, document, problem)``; problem is None when the body is strict JSON."""
        response = self.get(path, **kwargs)
        try:
            return response, decode_json(response.body, strict=True), None
        except ValueError as exc:
            return response, None, f"the body {exc}"

    def _command(self, cmd: str, args: Mapping[str, str] | None = None) -> tuple[HttpResponse, Any, str | None, float]:
        """``/command?cmd=...``: ``(response, document, problem, milliseconds)``."""
        query = urllib.parse.urlencode([("cmd", cmd), *((k, v) for k, v in (args or {}).items())])
        started = time.monotonic()
        response, doc, problem = self.get_json("/command?" + query, max_bytes=1024 * 1024)
        return response, doc, problem, (time.monotonic() - started) * 1000

    # ------------------------------------------------------------------ for the extension checks
    def harmless(self) -> tuple[str, dict[str, str]] | None:
        """The command the checks may send as often as they like: --command, else noop."""
        if self.command is not None:
            return self.command, self.command_args
        return ("noop", {}) if "noop" in self.known_commands else None

    def send(self, cmd: str, args: Mapping[str, str] | None = None) -> tuple[int | None, str]:
        """Queue a command: ``(commandId, "")``, or ``(None, what went wrong)``."""
        try:
            response, doc, problem, _ms = self._command(cmd, args)
        except TransportError as exc:
            return None, f"/command?cmd={cmd} got no usable answer ({exc.kind}: {exc.detail})"
        if problem is not None or not isinstance(doc, dict):
            return None, f"/command?cmd={cmd} answered HTTP {response.status}: {problem or show_value(doc)}"
        if doc.get("accepted") is not True or not is_int(doc.get("commandId")):
            return None, f"/command?cmd={cmd} was not accepted with a commandId: {show_value(doc)}"
        return int(doc["commandId"]), ""

    def read(self, path: str, **kwargs: Any) -> tuple[dict[str, Any] | None, str]:
        """A JSON object from ``path``: ``(doc, "")`` or ``(None, what went wrong)``."""
        try:
            response, doc, problem = self.get_json(path, **kwargs)
        except TransportError as exc:
            return None, f"GET {path} got no usable answer ({exc.kind}: {exc.detail})"
        if response.status != 200 or problem is not None or not isinstance(doc, dict):
            return None, f"GET {path} answered HTTP {response.status}: {problem or show_value(doc)}"
        return doc, ""

    def completed(self, command_id: int, *, query: str = "") -> tuple[dict[str, Any] | None, str]:
        """The first ``/state`` (polled back to back) whose completedCommandId reaches ``command_id``."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            doc, problem = self.read("/state" + query)
            if doc is None:
                return None, problem
            done = doc.get("completedCommandId")
            if is_int(done) and done >= command_id:
                return doc, ""
            if time.monotonic() >= deadline:
                return None, (f"commandId {command_id} did not complete within {self.timeout_s * 1000:.0f} ms "
                              f"(completedCommandId stayed at {show_value(done)})")
            time.sleep(0.001)

    def frame_now(self) -> int | None:
        doc, _problem = self.read("/health", max_bytes=HEALTH_MAX_BYTES)
        return int(doc["frame"]) if doc is not None and is_int(doc.get("frame")) else None

    def wait_frames(self, count: int) -> tuple[int, float]:
        """Wait (up to the timeout) for ``frame`` to advance by ``count``: ``(advanced, ms)``."""
        started = time.monotonic()
        first = self.frame_now()
        last = first
        while first is not None and time.monotonic() - started < self.timeout_s:
            last = self.frame_now()
            if last is not None and last - first >= count:
                break
            time.sleep(0.002)
        advanced = (last - first) if first is not None and last is not None else 0
        return advanced, (time.monotonic() - started) * 1000


__all__ = ["CheckSession", "FAIL", "Line", "PASS", "SKIP", "Target", "WARN", "is_int", "show_value"]
