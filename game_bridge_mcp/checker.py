"""``game-bridge-mcp check``: a conformance check for a game written in any language.

Why it exists: a game that gets the contract subtly wrong (no ``completedCommandId``,
a ``frame`` that jumps backwards, an entry left in the registry, a debug port open to
the network) still *seems* to work until an agent's tests turn flaky. This command
talks to the game exactly as the bridge does and says, line by line, what conforms
(``PASS``), what works in a weaker way or is unsafe (``WARN``), and what breaks the
contract (``FAIL``); ``SKIP`` marks a check that could not run here.

Usage::

    game-bridge-mcp check --port 7820          # a game you started
    game-bridge-mcp check --launch             # start one from gamebridge.json

Exit code 0 when nothing failed, 1 when something did, 2 for a usage error.

By default the check ends by sending ``close`` (to see the game shut down and remove
its registry entry); ``--no-close`` leaves a running game alone. The command used for
the command cycle is ``noop`` when the game knows it; ``--command NAME --arg k=v``
names another (it is sent twice, so choose something harmless).
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import os
import socket
import statistics
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO, TypeGuard

from .errors import BridgeError, BridgeUsageError
from .transport import HEALTH_MAX_BYTES, HttpResponse, Opener, TransportError, loopback_opener

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"
#: A /health slower than this (median) is reported: discovery calls it on every port.
SLOW_HEALTH_MS = 100.0
#: A /command answer slower than this suggests it waits for the game thread.
SLOW_COMMAND_MS = 500.0
#: How long the frame counter is watched for movement.
FRAME_WATCH_S = 1.5
UNKNOWN_PREFIX = "gb_check_no_such_command_"


class _Usage(Exception):
    """A usage error: printed with the usage line, exit code 2."""


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
    entry_seen_path: str | None = None


def _strict_json(body: bytes) -> Any:
    """Parse like a strict client: NaN/Infinity are not JSON. Raises ValueError."""

    def reject(name: str) -> Any:
        raise ValueError(f"contains {name}, which is not JSON (strict parsers reject it)")

    try:
        return json.loads(body.decode("utf-8"), parse_constant=reject)
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    except RecursionError:
        raise ValueError("is nested too deeply to parse") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any, limit: int = 120) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Checker:
    """Runs the checks against one port and writes the checklist as it goes."""

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
        self.state_has_completed = False
        self.entry: Any = None

    # ------------------------------------------------------------------ output
    def report(self, level: str, title: str, *details: str) -> Line:
        line = Line(level, title, [d for d in details if d])
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
            return response, _strict_json(response.body), None
        except ValueError as exc:
            return response, None, f"the body {exc}"

    # ------------------------------------------------------------------ run
    def run(self) -> list[Line]:
        self.out.write(f"Checking the game on {self.base} against the game-bridge contract\n")
        if not self.check_health():
            return self.lines
        self.check_frame_moves()
        self.check_state()
        self.check_tools()
        self.check_unknown_command()
        self.check_command_cycle()
        self.check_registry()
        self.check_loopback_only()
        self.check_hardening()
        if self.close:
            self.check_close()
        else:
            self.report(SKIP, "close: not sent (--no-close); the game is left running")
        return self.lines

    # ------------------------------------------------------------------ /health
    def check_health(self) -> bool:
        """False when nothing usable answers (the other checks would only repeat it)."""
        try:
            response, doc, problem = self.get_json("/health", max_bytes=HEALTH_MAX_BYTES)
        except TransportError as exc:
            if exc.kind == "refused":
                self.report(FAIL, f"GET /health: nothing is listening on port {self.port}",
                            "Start the game with its debug port set to this port, or use --launch.")
            else:
                self.report(FAIL, f"GET /health did not answer usably ({exc.kind}: {exc.detail})",
                            "A drivable game answers GET /health at once with {\"ok\": true, \"frame\": N}.")
            return False
        if response.status != 200:
            self.report(FAIL, f"GET /health answered HTTP {response.status}",
                        "It must answer 200 with {\"ok\": true, \"frame\": N}; anything else is reported "
                        "to agents as 'something else has taken this port'.")
            return True
        if problem is not None:
            self.report(FAIL, f"GET /health: {problem}", "Answer {\"ok\": true, \"frame\": N} as JSON.")
            return True
        if not isinstance(doc, dict) or doc.get("ok") is not True:
            self.report(FAIL, "GET /health does not say \"ok\": true",
                        f"It answered {_show(doc)}. \"ok\": true is what marks the port as a game: without "
                        "it the bridge reports NotAGameSurface and drives nothing.")
        frame = doc.get("frame") if isinstance(doc, dict) else None
        if not _is_int(frame) or frame < 0:
            self.report(FAIL, "GET /health has no whole-number \"frame\"",
                        f"It answered {_show(doc)}. frame is a counter that increases for the life of the "
                        "process; the bridge uses it to notice a restarted game.")
        elif isinstance(doc, dict) and doc.get("ok") is True:
            self.health_has_completed = _is_int(doc.get("completedCommandId"))
            self.report(PASS, f"GET /health answers {{\"ok\": true, \"frame\": {frame}}}",
                        "It also publishes completedCommandId, so the bridge confirms commands with tiny "
                        "/health polls and fetches /state once." if self.health_has_completed else "")
        self._check_health_speed()
        return True

    def _check_health_speed(self) -> None:
        times = []
        for _ in range(5):
            started = time.monotonic()
            try:
                self.get("/health", max_bytes=HEALTH_MAX_BYTES)
            except TransportError:
                return
            times.append((time.monotonic() - started) * 1000)
        median = statistics.median(times)
        if median > SLOW_HEALTH_MS:
            self.report(WARN, f"GET /health is slow ({median:.0f} ms median of 5)",
                        "Discovery calls it on every port of a range; answer it without waiting "
                        "for the game thread.")

    def _health_frame(self) -> int | None:
        try:
            _response, doc, problem = self.get_json("/health", max_bytes=HEALTH_MAX_BYTES)
        except TransportError:
            return None
        if problem or not isinstance(doc, dict) or not _is_int(doc.get("frame")):
            return None
        return int(doc["frame"])

    def check_frame_moves(self) -> None:
        started = time.monotonic()
        first = self._health_frame()
        if first is None:
            self.report(SKIP, "frame monotonic: /health gives no frame to watch")
            return
        last, increases = first, 0
        while time.monotonic() - started < FRAME_WATCH_S and increases < 3:
            time.sleep(0.02)
            frame = self._health_frame()
            if frame is None:
                continue
            if frame < last:
                self.report(FAIL, f"frame went backwards ({last} then {frame})",
                            "The bridge reads a lower frame as 'a new process took this port' and drops "
                            "what it knows about the game. Count frames up for the whole process life.")
                return
            if frame > last:
                increases += 1
            last = frame
        elapsed = (time.monotonic() - started) * 1000
        if last == first:
            self.report(WARN, f"frame did not advance in {elapsed:.0f} ms (stuck at {first})",
                        "Is the game loop running? Without completedCommandId the bridge confirms a "
                        "command only by frame advancing.")
        else:
            self.report(PASS, f"frame increases ({first} -> {last} in {elapsed:.0f} ms)")

    # ------------------------------------------------------------------ /state
    def check_state(self) -> None:
        started = time.monotonic()
        try:
            response, doc, problem = self.get_json("/state")
        except TransportError as exc:
            self.report(FAIL, f"GET /state did not answer usably ({exc.kind}: {exc.detail})")
            return
        elapsed = (time.monotonic() - started) * 1000
        if response.status != 200:
            self.report(FAIL, f"GET /state answered HTTP {response.status}", "It must answer 200 with a JSON object.")
            return
        if problem is not None:
            self.report(FAIL, f"GET /state: {problem}")
            return
        if not isinstance(doc, dict):
            self.report(FAIL, f"GET /state answered a JSON {type(doc).__name__}, not an object")
            return
        self.report(PASS, f"GET /state answers a JSON object ({len(response.body):,} bytes, {elapsed:.0f} ms)")
        present, warnings = self._conventional_fields(doc)
        self.report(PASS, "conventional fields: " + (", ".join(present) if present else "none"))
        for title, detail in warnings:
            self.report(WARN, title, detail)

    def _conventional_fields(self, doc: dict) -> tuple[list[str], list[tuple[str, str]]]:
        present: list[str] = []
        warnings: list[tuple[str, str]] = []
        if _is_int(doc.get("frame")):
            present.append("frame")
        else:
            warnings.append(("/state has no whole-number frame",
                             "The bridge uses it for restart detection and as the fallback confirmation."))
        if _is_int(doc.get("completedCommandId")):
            present.append("completedCommandId")
            self.state_has_completed = True
        else:
            warnings.append(("/state has no completedCommandId",
                             "Without it the bridge can only wait for frame to advance by two after a "
                             "command (confirmation: frames-advanced), a weaker guarantee. Publish the id "
                             "of the last command the game thread applied."))
        if "simFrame" in doc:
            present.append("simFrame")
        if "paused" in doc:
            if isinstance(doc["paused"], bool):
                present.append("paused")
            else:
                warnings.append(("/state paused is not a boolean", f"It is {_show(doc['paused'])}."))
        ui = doc.get("ui")
        if ui is not None:
            if not isinstance(ui, dict):
                warnings.append(("/state ui is not an object", f"It is {_show(ui)}."))
            else:
                screen = ui.get("screen")
                if isinstance(screen, str) and screen:
                    present.append(f"ui.screen ({screen[:40]})")
                elif screen is not None:
                    warnings.append(("/state ui.screen is not a string",
                                     "list_instances shows it so instances are tellable apart."))
                elements = ui.get("elements")
                if elements is not None:
                    bad = [] if isinstance(elements, list) else [_show(elements, 60)]
                    for element in elements if isinstance(elements, list) else []:
                        if not (isinstance(element, dict) and isinstance(element.get("label"), str)
                                and isinstance(element.get("visible", True), bool)):
                            bad.append(_show(element, 60))
                    if bad:
                        warnings.append(("/state ui.elements has entries without a string label and "
                                         "boolean visible", "For example: " + "; ".join(bad[:3])))
                    else:
                        present.append(f"ui.elements ({len(elements)})")
        events = doc.get("events")
        if events is not None:
            bad = [] if isinstance(events, list) else [_show(events, 60)]
            for event in events if isinstance(events, list) else []:
                if not (isinstance(event, str) or (isinstance(event, dict) and isinstance(event.get("m"), str))):
                    bad.append(_show(event, 60))
            if bad:
                warnings.append(("/state events has entries that are neither a string nor {\"m\": ...}",
                                 "For example: " + "; ".join(bad[:3])))
            else:
                present.append(f"events ({len(events)})")
        game = doc.get("game")
        if game is not None:
            if isinstance(game, dict):
                scalars = sum(1 for v in game.values() if not isinstance(v, (dict, list)))
                present.append(f"game ({scalars} scalar fields)")
            else:
                warnings.append(("/state game is not an object",
                                 "Its scalar fields are what the compact get_state digest shows."))
        return present, warnings

    # ------------------------------------------------------------------ /tools
    def check_tools(self) -> None:
        from .manifest import normalise_manifest

        try:
            response, doc, problem = self.get_json("/tools", max_bytes=8 * 1024 * 1024)
        except TransportError as exc:
            self.report(FAIL, f"GET /tools did not answer usably ({exc.kind}: {exc.detail})")
            return
        if response.status in (404, 501):
            self.report(WARN, "GET /tools answers 404: the game publishes no manifest",
                        "That works (status live-no-manifest), but agents then see only the bridge's "
                        "own tools and must guess command names. Publish GET /tools.")
            return
        if response.status != 200:
            self.report(FAIL, f"GET /tools answered HTTP {response.status}", "Answer 200 with the manifest, or 404.")
            return
        if problem is not None:
            self.report(FAIL, f"GET /tools: {problem}")
            return
        manifest = normalise_manifest(doc)
        tools = list(manifest.tools())
        self.known_commands.update(tool.command for tool in tools)
        self.known_commands.update(example.split()[0] for example in manifest.passthrough.get("examples", [])
                                   if example.split())
        summary = ", ".join(f"{ts.name} ({len(ts.tools)})" for ts in manifest.toolsets) or "no toolsets"
        game = manifest.game
        identity = f"{game.get('name') or '(no name)'} {game.get('version') or '(no version)'}, protocol {game.get('protocol')}"
        self.report(PASS, f"GET /tools parses: {len(tools)} tool{'' if len(tools) == 1 else 's'} in {summary}",
                    identity)
        if not game.get("name"):
            self.report(WARN, "/tools has no game.name", "list_instances shows it to tell instances apart.")
        if game.get("protocol") is None and not any("protocol" in p for p in manifest.problems):
            self.report(WARN, "/tools has no game.protocol", "Say \"protocol\": 1 (the manifest document version).")
        for dropped in manifest.dropped:
            where = f"toolset '{dropped.toolset}'" if dropped.toolset else "the manifest"
            name = f"'{dropped.name}'" if dropped.name else f"#{dropped.index}"
            self.report(WARN, f"/tools: tool {name} in {where} is dropped", dropped.reason)
        for note in manifest.problems:
            self.report(WARN, f"/tools: {note}")

    # ------------------------------------------------------------------ /command
    def _command(self, cmd: str, args: Mapping[str, str] | None = None) -> tuple[HttpResponse, Any, str | None, float]:
        query = urllib.parse.urlencode([("cmd", cmd), *((k, v) for k, v in (args or {}).items())])
        started = time.monotonic()
        response, doc, problem = self.get_json("/command?" + query, max_bytes=1024 * 1024)
        return response, doc, problem, (time.monotonic() - started) * 1000

    def check_unknown_command(self) -> None:
        name = UNKNOWN_PREFIX + uuid.uuid4().hex[:8]
        try:
            response, doc, problem, _ms = self._command(name)
        except TransportError as exc:
            self.report(FAIL, f"an unknown command got no usable answer ({exc.kind}: {exc.detail})")
            return
        if problem is not None:
            self.report(FAIL, f"an unknown command was answered with HTTP {response.status}: {problem}",
                        "Answer {\"accepted\": false, \"error\": ..., \"commands\": [...]} as JSON.")
            return
        if not isinstance(doc, dict):
            self.report(FAIL, f"an unknown command was answered with {_show(doc)}, not a JSON object")
            return
        if doc.get("accepted") is True and response.status == 200:
            if _is_int(doc.get("commandId")):
                self.unknown_accepted_id = int(doc["commandId"])
            self.report(WARN, f"an unknown command ({name}) was accepted silently",
                        "An agent's typo then looks like success. Answer {\"accepted\": false, "
                        "\"error\": \"unknown command ...\", \"commands\": [...]} instead.")
            return
        error = doc.get("error") or doc.get("message") or f"HTTP {response.status}"
        commands = doc.get("commands")
        if isinstance(commands, list) and all(isinstance(c, str) for c in commands):
            self.known_commands.update(commands)
            listing = f"It lists the {len(commands)} commands it accepts."
        else:
            listing = ("It does not list the commands it accepts; \"commands\": [...] in the answer helps "
                       "an agent correct a typo.")
        self.report(PASS, f"an unknown command is refused (HTTP {response.status}: {_show(error, 80)})", listing)

    def check_command_cycle(self) -> None:
        cmd, args = self.command, self.command_args
        if cmd is None:
            if "noop" in self.known_commands:
                cmd = "noop"
            elif self.unknown_accepted_id is not None:
                self._confirm("an unknown command", self.unknown_accepted_id)
                return
            else:
                self.report(WARN, "command cycle not checked: no harmless command is known",
                            "The game lists no 'noop'. Run again with --command NAME (and --arg key=value) "
                            "naming a command that is safe to send twice.")
                return
        first = self._send_for_cycle(cmd, args)
        if first is None:
            return
        second = self._send_for_cycle(cmd, args, quiet=True)
        if first is not None and second is not None:
            if second <= first:
                self.report(FAIL, f"commandId did not increase ({first} then {second})",
                            "Each queued command needs a new, larger id so completion can be matched to it.")
            else:
                self._confirm(f"'{cmd}'", second)

    def _send_for_cycle(self, cmd: str, args: Mapping[str, str], *, quiet: bool = False) -> int | None:
        try:
            response, doc, problem, elapsed = self._command(cmd, args)
        except TransportError as exc:
            self.report(FAIL, f"/command?cmd={cmd} got no usable answer ({exc.kind}: {exc.detail})")
            return None
        if problem is not None or not isinstance(doc, dict):
            self.report(FAIL, f"/command?cmd={cmd} answered HTTP {response.status} without a JSON object",
                        problem or f"It answered {_show(doc)}.")
            return None
        if response.status != 200 or doc.get("accepted") is not True:
            self.report(FAIL, f"/command?cmd={cmd} was not accepted (HTTP {response.status})",
                        f"It answered {_show(doc)}. Choose a command the game accepts with --command.")
            return None
        command_id = doc.get("commandId")
        if not _is_int(command_id):
            self.report(WARN, f"/command?cmd={cmd} was accepted without a commandId",
                        "Without it the bridge cannot match the command to completedCommandId and "
                        "falls back to waiting for frames (confirmation: frames-advanced).")
            self._confirm_by_frames(cmd)
            return None
        if not quiet:
            details = [] if _is_int(doc.get("frame")) else ["The answer has no frame (optional, but useful)."]
            self.report(PASS, f"/command?cmd={cmd} is queued at once: commandId {command_id} in {elapsed:.0f} ms",
                        *details)
            if elapsed > SLOW_COMMAND_MS:
                self.report(WARN, f"/command took {elapsed:.0f} ms to answer",
                            "Answer as soon as the command is queued (fire-and-forget); run it on the game thread.")
        return int(command_id)

    def _confirm(self, what: str, command_id: int) -> None:
        deadline = time.monotonic() + self.timeout_s
        started = time.monotonic()
        last: Any = None
        first_frame: int | None = None
        while True:
            try:
                response, doc, problem = self.get_json("/state")
            except TransportError as exc:
                doc, problem = None, f"did not answer ({exc.kind})"
            if not isinstance(doc, dict):
                self.report(FAIL, f"{what} (commandId {command_id}) cannot be confirmed: GET /state "
                                  f"{problem or 'is not a JSON object'}")
                return
            if isinstance(doc, dict):
                last = doc.get("completedCommandId")
                if first_frame is None and _is_int(doc.get("frame")):
                    first_frame = doc["frame"]
                if _is_int(last) and last >= command_id:
                    ms = (time.monotonic() - started) * 1000
                    frames = ""
                    if first_frame is not None and _is_int(doc.get("frame")):
                        n = doc["frame"] - first_frame
                        frames = f", {n} frame{'' if n == 1 else 's'}"
                    self.report(PASS, f"completedCommandId reached {command_id} for {what} ({ms:.0f} ms{frames})",
                                self._health_agrees(command_id))
                    return
                if not _is_int(last):
                    self._confirm_by_frames(what)
                    return
            if time.monotonic() >= deadline:
                self.report(FAIL, f"{what} (commandId {command_id}) was accepted but never completed",
                            f"completedCommandId stayed at {_show(last)} for {self.timeout_s * 1000:.0f} ms. "
                            "Is the game thread draining its command queue every frame?")
                return
            time.sleep(0.005)

    def _health_agrees(self, command_id: int) -> str:
        if not self.health_has_completed:
            return ""
        try:
            _r, doc, _p = self.get_json("/health", max_bytes=HEALTH_MAX_BYTES)
        except TransportError:
            return ""
        value = doc.get("completedCommandId") if isinstance(doc, dict) else None
        if _is_int(value) and value >= command_id:
            return "/health carries the same completedCommandId."
        return f"But /health says completedCommandId {_show(value)}: keep the two in step."

    def _confirm_by_frames(self, what: str) -> None:
        start = self._health_frame()
        deadline = time.monotonic() + self.timeout_s
        while start is not None and time.monotonic() < deadline:
            frame = self._health_frame()
            if frame is not None and frame >= start + 2:
                self.report(WARN, f"{what} confirmed only by frames advancing (confirmation: frames-advanced)",
                            "Publish completedCommandId in /state (and /health) for the strong confirmation.")
                return
            time.sleep(0.01)
        self.report(FAIL, f"{what} could not be confirmed: no completedCommandId and frame did not advance by 2")

    # ------------------------------------------------------------------ registry
    def check_registry(self) -> None:
        from .registry import is_loopback_literal, read_registry, registry_dir

        directory = registry_dir(self.environ, self.registry_override)
        scan = read_registry(directory)
        mine = [e for e in scan.entries if e.port == self.port]
        for bad in scan.problems + scan.ignored_hosts:
            if bad.port == self.port or (self.target.pid is not None and bad.pid == self.target.pid):
                self.report(FAIL, f"registry entry {bad.path.name} for this game is unusable", bad.reason)
        if not mine:
            self.report(WARN, f"no registry entry for port {self.port} in {directory}",
                        "Optional, but with an entry list_instances finds the game without scanning and "
                        "shows its pid and working directory. Write <pid>.json after binding the port.")
            return
        listener = self.target.pid or _listener_pid(self.port)
        live = [e for e in mine if listener is None or e.pid == listener]
        stale = [e for e in mine if e not in live]
        if not live:
            entry = mine[0]
            self.report(FAIL, f"registry entry {entry.path.name} names pid {entry.pid}, but pid {listener} "
                              f"listens on port {self.port}",
                        "Write the entry from the process that serves the port, named <its pid>.json.")
            return
        entry = self.entry = live[0]
        problems: list[str] = []
        if entry.path.name != f"{entry.pid}.json":
            problems.append(f"the file is called {entry.path.name}, not {entry.pid}.json")
        if not is_loopback_literal(entry.host):
            problems.append(f"host {entry.host!r} is not 127.0.0.1 or ::1")
        actual_cwd = self.target.cwd or _process_cwd(entry.pid)
        if entry.cwd is None:
            problems.append("it has no cwd (which checkout is this build?)")
        elif actual_cwd is not None and not _same_path(entry.cwd, actual_cwd):
            problems.append(f"cwd says {entry.cwd}, but the game runs in {actual_cwd}")
        if problems:
            self.report(FAIL, f"registry entry {entry.path.name} is wrong", *problems)
        else:
            known = "the process listening on the port" if listener else "a live process"
            self.report(PASS, f"registry entry {entry.path.name}: port {entry.port}, pid {entry.pid} "
                              f"({known}), cwd {entry.cwd}")
        for old in stale:
            self.report(WARN, f"registry entry {old.path.name} also claims port {self.port} (pid {old.pid})",
                        "Probably left by a crashed run; list_instances reports it as stale.")
        if self.target.entry_seen_before_bind is True:
            self.report(FAIL, "registry entry was written before the port was bound",
                        "Write it only after the debug port is listening: an entry for a port that was "
                        "never claimed is worse than none.")
        elif self.target.entry_seen_before_bind is False:
            self.report(PASS, "registry entry was written after the port was bound")
        elif not self.target.launched:
            self.report(SKIP, "registry entry written after bind: checked only with --launch")

    # ------------------------------------------------------------------ network exposure
    def check_loopback_only(self) -> None:
        addresses = _non_loopback_addresses()
        if not addresses:
            self.report(SKIP, "loopback-only binding: this machine has no other local address to try")
            return
        open_on = []
        for address in addresses[:4]:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            try:
                with socket.socket(family, socket.SOCK_STREAM) as sock:
                    sock.settimeout(0.5)
                    sock.connect((address, self.port))
                open_on.append(address)
            except OSError:
                continue
        if open_on:
            self.report(FAIL, f"port {self.port} accepts connections on {', '.join(open_on)}",
                        "The debug surface is reachable from the network. Bind 127.0.0.1 only.")
        else:
            self.report(PASS, f"bound to loopback only (refused on {', '.join(addresses[:4])})")

    def _raw_status(self, headers: Mapping[str, str]) -> int | None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=min(self.timeout_s, 3.0))
        try:
            conn.putrequest("GET", "/health", skip_host=True, skip_accept_encoding=True)
            for key, value in headers.items():
                conn.putheader(key, value)
            conn.endheaders()
            response = conn.getresponse()
            response.read(HEALTH_MAX_BYTES)
            return response.status
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def check_hardening(self) -> None:
        host_status = self._raw_status({"Host": f"attacker.example:{self.port}"})
        origin_status = self._raw_status({"Host": f"127.0.0.1:{self.port}", "Origin": "http://attacker.example"})
        if host_status is not None and 200 <= host_status < 300:
            self.report(WARN, "a request with Host: attacker.example is answered",
                        "DNS rebinding lets a web page read and drive the game. Refuse (403) any Host "
                        "that is not 127.0.0.1, localhost or [::1] with this port (the Python kit does).")
        else:
            self.report(PASS, f"a foreign Host header is refused (HTTP {host_status or 'closed'})")
        if origin_status is not None and 200 <= origin_status < 300:
            self.report(WARN, "a request with an Origin header is answered",
                        "Any web page open in the developer's browser can send GET /command. Refuse (403) "
                        "requests that carry an Origin header (the Python kit does).")
        else:
            self.report(PASS, f"a request with an Origin header is refused (HTTP {origin_status or 'closed'})")

    # ------------------------------------------------------------------ close
    def _port_quiet(self) -> bool:
        try:
            self.get("/health", max_bytes=HEALTH_MAX_BYTES, timeout_s=0.5)
        except TransportError as exc:
            return exc.kind in ("refused", "reset")
        return False

    def check_close(self) -> None:
        started = time.monotonic()
        try:
            response, doc, _problem, _ms = self._command("close")
            if response.status != 200 or not isinstance(doc, dict) or doc.get("accepted") is not True:
                self.report(WARN, f"close was not accepted (HTTP {response.status}: {_show(doc)})",
                            "A close command that shuts the game down through its normal teardown lets "
                            "an agent end an instance without killing a process.")
                return
        except TransportError:
            pass  # a game that drops the connection while closing is closing
        deadline = started + self.grace_s
        while not self._port_quiet():
            if time.monotonic() >= deadline:
                self.report(FAIL, f"close was accepted but port {self.port} still answers after "
                                  f"{self.grace_s * 1000:.0f} ms",
                            "close should run the game's teardown and stop serving.")
                return
            time.sleep(0.02)
        quiet_ms = (time.monotonic() - started) * 1000
        pid = self.target.pid or (self.entry.pid if self.entry is not None else None)
        exited = _wait_exit(pid, max(0.5, deadline - time.monotonic())) if pid else None
        detail = "" if exited is None else ("The process exited." if exited else
                                            f"But process {pid} is still running.")
        self.report(PASS if exited is not False else WARN,
                    f"close shuts the game down (port quiet after {quiet_ms:.0f} ms)", detail)
        if self.entry is not None:
            entry_deadline = time.monotonic() + 1.0
            while self.entry.path.exists() and time.monotonic() < entry_deadline:
                time.sleep(0.02)
            if self.entry.path.exists():
                self.report(FAIL, f"registry entry {self.entry.path.name} is left behind after a clean close",
                            "Delete it on clean shutdown.")
            else:
                self.report(PASS, f"registry entry {self.entry.path.name} removed on close")


# --------------------------------------------------------------------------- machine facts

def _listener_pid(port: int) -> int | None:
    """The pid listening on 127.0.0.1:port, when psutil can tell."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        return None
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return int(conn.pid)
    except (psutil.Error, OSError):
        return None
    return None


def _process_cwd(pid: int) -> Path | None:
    try:
        import psutil

        return Path(psutil.Process(pid).cwd())
    except Exception:
        return None


def _same_path(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):
        return str(a) == str(b)


def _wait_exit(pid: int, timeout_s: float) -> bool | None:
    """True when ``pid`` is gone (or a zombie) within the timeout, False if it is still
    running, None if that cannot be told. Never reaps: the process may be the
    launcher's child, which it reaps itself."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        return None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            return None
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _non_loopback_addresses() -> list[str]:
    """This machine's own non-loopback IP addresses (IPv4 first; no link-local)."""
    found: list[str] = []
    try:
        import psutil

        for addresses in psutil.net_if_addrs().values():
            for address in addresses:
                if address.family in (socket.AF_INET, socket.AF_INET6):
                    found.append(address.address.split("%")[0])
    except Exception:
        try:
            found.extend(str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None))
        except OSError:
            pass
    usable: list[str] = []
    for text in found:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            continue
        if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast:
            continue
        if str(ip) not in usable:
            usable.append(str(ip))
    return sorted(usable, key=lambda a: ":" in a)


# --------------------------------------------------------------------------- launching

class _EntryWatcher:
    """While a launch boots, watch the registry for a new entry and probe its port the
    moment it appears: a refused connection means it was written before the bind."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.before = set(self._names())
        self.seen: dict[str, bool] = {}  # file name -> port was accepting when first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="check-entry-watch", daemon=True)

    def _names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.directory) if n.endswith(".json") and not n.startswith(".")]
        except OSError:
            return []

    def _run(self) -> None:
        from .registry import InvalidEntry, load_entry

        while not self._stop.wait(0.002):
            for name in self._names():
                if name in self.before or name in self.seen:
                    continue
                try:
                    entry = load_entry(self.directory / name)
                except (InvalidEntry, OSError):
                    continue
                try:
                    with socket.create_connection(("127.0.0.1", entry.port), timeout=0.5):
                        self.seen[name] = True
                except OSError:
                    self.seen[name] = False

    def __enter__(self) -> "_EntryWatcher":
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._stop.set()
        self._thread.join(2)


# --------------------------------------------------------------------------- CLI

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Usage(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="game-bridge-mcp check", add_help=False,
                     description="Check a running game (or one launched from gamebridge.json) against "
                                 "the game-bridge contract.")
    where = parser.add_argument_group("which game")
    where.add_argument("-p", "--port", type=int, help="the debug port of a running game")
    where.add_argument("--launch", action="store_true",
                       help="start the game from gamebridge.json (nearest, or --config), check it, stop it")
    where.add_argument("--config", type=Path, help="the launch declaration for --launch")
    options = parser.add_argument_group("options")
    options.add_argument("--command", help="the harmless command used for the command cycle (default: noop)")
    options.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                         help="an argument for --command (repeatable)")
    options.add_argument("--no-close", action="store_true", help="do not send close at the end")
    options.add_argument("--timeout", type=int, default=5000, metavar="MS",
                         help="per request and for a command to complete (default 5000)")
    options.add_argument("--grace", type=int, default=5000, metavar="MS",
                         help="how long close may take (default 5000)")
    options.add_argument("--registry-dir", type=Path, help="the instance registry directory")
    options.add_argument("-h", "--help", action="store_true", help="show this help")
    return parser


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    if ns.help:
        return ns
    if ns.port is None and not ns.launch:
        raise _Usage("say which game: --port N (a running game) or --launch (from gamebridge.json)")
    if ns.port is not None and ns.launch:
        raise _Usage("--port and --launch are alternatives; give one")
    if ns.port is not None and not 1 <= ns.port <= 65535:
        raise _Usage(f"--port must be 1-65535, not {ns.port}")
    if ns.config is not None and not ns.launch:
        raise _Usage("--config is only used with --launch")
    if not 1 <= ns.timeout <= 600_000 or not 0 <= ns.grace <= 600_000:
        raise _Usage("--timeout must be 1-600000 ms and --grace 0-600000 ms")
    if ns.arg and not ns.command:
        raise _Usage("--arg needs --command")
    args: dict[str, str] = {}
    for item in ns.arg:
        key, sep, value = item.partition("=")
        if not sep or not key or key in ("cmd", "port"):
            raise _Usage(f"--arg {item!r} must be KEY=VALUE (and KEY not cmd or port)")
        args[key] = value
    ns.command_args = args
    return ns


def _summary(counts: dict[str, int]) -> str:
    parts = [f"{counts[PASS]} passed", f"{counts[WARN]} warning{'s' if counts[WARN] != 1 else ''}",
             f"{counts[FAIL]} failed"]
    if counts[SKIP]:
        parts.append(f"{counts[SKIP]} skipped")
    verdict = ("The game does not conform: fix the FAIL lines." if counts[FAIL] else
               "The game conforms; the WARN lines are worth a look." if counts[WARN] else
               "The game conforms.")
    return f"Summary: {', '.join(parts)}. {verdict}\n"


def _declaration(ns: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    """The Config with its launch declaration; BridgeUsageError when there is none."""
    from .config import Config, apply_project_config

    config = Config(environ=dict(environ), registry_dir=ns.registry_dir, config_file=ns.config)
    apply_project_config(config)
    if config.declaration is None:
        raise BridgeUsageError("check --launch needs a gamebridge.json: none was found in this directory "
                               "or above it. Name one with --config, or check a running game with --port N.")
    return config


def _launch(config: Any, environ: Mapping[str, str], out: TextIO) -> tuple[Any, Target]:
    """Start the declared game; returns (launcher, target). Raises BridgeError when it
    does not start (the launcher has already reaped it then)."""
    from .launcher import Launcher
    from .registry import registry_dir

    decl = config.declaration
    out.write(f"Launching {decl.name or 'the game'} from {decl.path}\n")
    out.flush()
    launcher = Launcher(config, environ=dict(environ))
    with _EntryWatcher(registry_dir(environ, config.registry_dir)) as watcher:
        try:
            result = launcher.launch()
        except BaseException:
            launcher.shutdown(grace_ms=500)
            raise
        time.sleep(0.05)  # let the watcher see an entry written just after /health answered
    target = Target(port=int(result["port"]), pid=result.get("pid"), cwd=decl.cwd, launched=True)
    if watcher.seen:
        name, accepting = next(iter(watcher.seen.items()))
        target.entry_seen_before_bind = not accepting
        target.entry_seen_path = name
    out.write(f"Launched on port {target.port} (pid {target.pid}) in {result.get('readyInMs')} ms\n")
    return launcher, target


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         environ: Mapping[str, str] | None = None) -> int:
    """``game-bridge-mcp check ...``: 0 when no check failed, 1 otherwise, 2 for usage errors."""
    import sys

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    env = dict(os.environ if environ is None else environ)
    try:
        ns = _parse(argv)
    except _Usage as exc:
        err.write(f"game-bridge-mcp check: {exc}\n{build_parser().format_usage()}")
        return 2
    if ns.help:
        out.write(build_parser().format_help())
        return 0
    launcher = None
    try:
        if ns.launch:
            config = _declaration(ns, env)  # a missing or broken gamebridge.json: usage error
            try:
                launcher, target = _launch(config, env, out)
            except BridgeError as exc:
                out.write(f"{FAIL}  the game did not start\n")
                for text in exc.render().splitlines():
                    out.write(f"      {text}\n")
                out.write(_summary({PASS: 0, WARN: 0, FAIL: 1, SKIP: 0}))
                return 1
        else:
            target = Target(port=ns.port)
        checker = Checker(target, out=out, environ=env, timeout_ms=ns.timeout, grace_ms=ns.grace,
                          command=ns.command, command_args=ns.command_args, close=not ns.no_close,
                          registry_dir=ns.registry_dir)
        checker.run()
        counts = checker.counts()
        out.write(_summary(counts))
        return 1 if counts[FAIL] else 0
    except BridgeError as exc:
        err.write(exc.render() + "\n")
        return exc.exit_code
    finally:
        if launcher is not None:
            launcher.shutdown(grace_ms=1000)


__all__ = ["Checker", "Line", "Target", "build_parser", "main", "PASS", "WARN", "FAIL", "SKIP"]
