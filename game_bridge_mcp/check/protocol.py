"""``check``: the HTTP contract itself (``/health``, ``/state``, ``/tools``, ``/command``), as
the bridge relies on it."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Mapping
from typing import Any

from .base import FAIL, PASS, SKIP, WARN, CheckSession, is_int, show_value
from ..wire.transport import HEALTH_MAX_BYTES, TransportError

#: A /health slower than this (median) is reported: discovery calls it on every port.
SLOW_HEALTH_MS = 100.0
#: A /command answer slower than this suggests it waits for the game thread.
SLOW_COMMAND_MS = 500.0
#: How long the frame counter is watched for movement.
FRAME_WATCH_S = 1.5
UNKNOWN_PREFIX = "gb_check_no_such_command_"


class ProtocolChecks(CheckSession):
    """The /health, /state, /tools and /command checks."""

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
                        f"It answered {show_value(doc)}. \"ok\": true is what marks the port as a game: without "
                        "it the bridge reports NotAGameSurface and drives nothing.")
        frame = doc.get("frame") if isinstance(doc, dict) else None
        if not is_int(frame) or frame < 0:
            self.report(FAIL, "GET /health has no whole-number \"frame\"",
                        f"It answered {show_value(doc)}. frame is a counter that increases for the life of the "
                        "process; the bridge uses it to notice a restarted game.")
        if isinstance(doc, dict):
            self.health_doc = doc
        if is_int(frame) and frame >= 0 and isinstance(doc, dict) and doc.get("ok") is True:
            self.health_has_completed = is_int(doc.get("completedCommandId"))
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
        if problem or not isinstance(doc, dict) or not is_int(doc.get("frame")):
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

    def _conventional_fields(self, doc: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]]]:
        present: list[str] = []
        warnings: list[tuple[str, str]] = []
        if is_int(doc.get("frame")):
            present.append("frame")
        else:
            warnings.append(("/state has no whole-number frame",
                             "The bridge uses it for restart detection and as the fallback confirmation."))
        if is_int(doc.get("completedCommandId")):
            present.append("completedCommandId")
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
                warnings.append(("/state paused is not a boolean", f"It is {show_value(doc['paused'])}."))
        ui = doc.get("ui")
        if "screen" in doc and not (isinstance(ui, dict) and "screen" in ui):
            warnings.append(("/state has a top-level screen, which the bridge does not read",
                             "Put it in ui.screen (docs/contract.md): list_instances, the digests and wait_for "
                             "read it there."))
        if ui is not None:
            if not isinstance(ui, dict):
                warnings.append(("/state ui is not an object", f"It is {show_value(ui)}."))
            else:
                screen = ui.get("screen")
                if isinstance(screen, str) and screen:
                    present.append(f"ui.screen ({screen[:40]})")
                elif screen is not None:
                    warnings.append(("/state ui.screen is not a string",
                                     "list_instances shows it so instances are tellable apart."))
                elements = ui.get("elements")
                if elements is not None:
                    bad = [] if isinstance(elements, list) else [show_value(elements, 60)]
                    for element in elements if isinstance(elements, list) else []:
                        if not (isinstance(element, dict) and isinstance(element.get("label"), str)
                                and isinstance(element.get("visible", True), bool)):
                            bad.append(show_value(element, 60))
                    if bad:
                        warnings.append(("/state ui.elements has entries without a string label and "
                                         "boolean visible", "For example: " + "; ".join(bad[:3])))
                    else:
                        present.append(f"ui.elements ({len(elements)})")
        events = doc.get("events")
        if events is not None:
            bad = [] if isinstance(events, list) else [show_value(events, 60)]
            for event in events if isinstance(events, list) else []:
                if not (isinstance(event, str) or (isinstance(event, dict) and isinstance(event.get("m"), str))):
                    bad.append(show_value(event, 60))
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
        from ..manifest.reader import normalise_manifest

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
        manifest = self.manifest = normalise_manifest(doc)
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
            self.report(FAIL, f"an unknown command was answered with {show_value(doc)}, not a JSON object")
            return
        if doc.get("accepted") is True and response.status == 200:
            if is_int(doc.get("commandId")):
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
        self.report(PASS, f"an unknown command is refused (HTTP {response.status}: {show_value(error, 80)})", listing)

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
                        problem or f"It answered {show_value(doc)}.")
            return None
        if response.status != 200 or doc.get("accepted") is not True:
            self.report(FAIL, f"/command?cmd={cmd} was not accepted (HTTP {response.status})",
                        f"It answered {show_value(doc)}. Choose a command the game accepts with --command.")
            return None
        command_id = doc.get("commandId")
        if not is_int(command_id):
            self.report(WARN, f"/command?cmd={cmd} was accepted without a commandId",
                        "Without it the bridge cannot match the command to completedCommandId and "
                        "falls back to waiting for frames (confirmation: frames-advanced).")
            self._confirm_by_frames(cmd)
            return None
        if not quiet:
            details = [] if is_int(doc.get("frame")) else ["The answer has no frame (optional, but useful)."]
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
                if first_frame is None and is_int(doc.get("frame")):
                    first_frame = doc["frame"]
                if is_int(last) and last >= command_id:
                    ms = (time.monotonic() - started) * 1000
                    frames = ""
                    if first_frame is not None and is_int(doc.get("frame")):
                        n = doc["frame"] - first_frame
                        frames = f", {n} frame{'' if n == 1 else 's'}"
                    self.report(PASS, f"completedCommandId reached {command_id} for {what} ({ms:.0f} ms{frames})",
                                self._health_agrees(command_id))
                    return
                if not is_int(last):
                    self._confirm_by_frames(what)
                    return
            if time.monotonic() >= deadline:
                self.report(FAIL, f"{what} (commandId {command_id}) was accepted but never completed",
                            f"completedCommandId stayed at {show_value(last)} for {self.timeout_s * 1000:.0f} ms. "
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
        if is_int(value) and value >= command_id:
            return "/health carries the same completedCommandId."
        return f"But /health says completedCommandId {show_value(value)}: keep the two in step."

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


__all__ = ["FRAME_WATCH_S", "ProtocolChecks", "SLOW_COMMAND_MS", "SLOW_HEALTH_MS", "UNKNOWN_PREFIX"]
