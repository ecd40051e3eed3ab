"""Recording tool calls: every call handed to :meth:`Recorder.call` is run, timed and written as
one trace line, and nothing the recorder does can change the call's outcome."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable

from .._version import __version__
from ..errors import BridgeError
from ..jsonio import FileProblem, read_capped
from .format import answer_fields, error_fields, jsonable, utc_now
from .files import MAX_FILE_BYTES, CopyFolder, read_in_folder
from .identity import live_identity
from .writer import TraceWriter, Warn

log = logging.getLogger(__name__)

#: Screenshots larger than this are referenced, not copied beside the trace.
MAX_SCREENSHOT_COPY = MAX_FILE_BYTES
#: The calls that read a state file (``file``), which is copied beside the trace, up to this size.
STATE_FILE_TOOLS = frozenset({"restore_state", "fork_instance"})
STATE_MAX_BYTES = 128 * 1024 * 1024
_NO_PORT_TOOLS = frozenset({"list_instances", "launch_instance"})


def canonical_call(tool: str, arguments: Mapping[str, Any] | None
                   ) -> tuple[str | None, Any, dict[str, Any], dict[str, Any]]:
    """``(name, explicit port, arguments, options)`` of a call as the trace keeps it: for
    call_tool the tool it runs, that tool's own arguments (``port`` taken out of them) and
    everything else the call carried (``until``, and whatever call_tool takes later)."""
    args = dict(arguments or {})
    if tool == "call_tool":
        inner = args.pop("arguments", None)
        inner = dict(inner) if isinstance(inner, Mapping) else {}
        port = args.pop("port", None)
        inner_port = inner.pop("port", None)
        name = args.pop("name", None)
        return ((name if isinstance(name, str) else None), (port if port is not None else inner_port), inner,
                {str(k): v for k, v in args.items() if v is not None})
    port = args.pop("port", None) if tool not in _NO_PORT_TOOLS else args.get("port")
    return None, port, args, {}


def _int_port(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 1 <= value <= 65535:
        return value
    if isinstance(value, str) and value.strip().isdigit() and 1 <= int(value) <= 65535:
        return int(value)
    return None


class Recorder:
    """Writes a trace of the calls made through one Bridge."""

    def __init__(self, path: str | Path, bridge: Any, *, recorder: str = "serve",
                 warn: Warn | None = None, summarise: Callable[[Any], dict[str, Any]] | None = None) -> None:
        self.path = Path(path)
        self.bridge = bridge
        self.writer = TraceWriter(self.path, recorder=recorder, bridge_version=__version__, warn=warn)
        self._summarise = summarise
        self._identities: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._shots = 0
        #: The trace's private folder of screenshot copies (made on the first copy).
        self.copies = CopyFolder(self.path)
        #: Which recording this is: each ``call`` process appending to a shared trace is a
        #: session of its own, with a fresh bridge (see format.py).
        self.session = secrets.token_hex(6)

    # ------------------------------------------------------------------ the hook
    def call(self, tool: str, arguments: Mapping[str, Any] | None, run: Callable[[], Any]) -> Any:
        """Run ``run()`` (the call itself) and record it; returns or raises what it did."""
        try:
            name, explicit, args, options = canonical_call(tool, arguments)
            port = _int_port(explicit)
            if port is None and tool not in _NO_PORT_TOOLS:
                port = _int_port(self.bridge.config.default_port())
            if port is not None and tool == "call_tool":
                self._identity(port, fetch=True)
        except Exception:  # noqa: BLE001 - recording never breaks a call
            log.debug("could not prepare the trace line", exc_info=True)
            name, args, port, options = None, {}, None, {}
        started_at, started = utc_now(), time.monotonic()
        wall = time.time()
        try:
            answer = run()
        except BaseException as exc:
            self._write(tool, name, port, (args, options), started_at, wall, started, None, exc)
            raise
        self._write(tool, name, port, (args, options), started_at, wall, started, answer, None)
        return answer

    # ------------------------------------------------------------------ lines
    def _write(self, tool: str, name: str | None, port: int | None,
               carried: tuple[dict[str, Any], dict[str, Any]], when: str,
               wall: float, started: float, answer: Any, exc: BaseException | None) -> None:
        if self.writer.failed:
            return
        try:
            duration = round((time.monotonic() - started) * 1000, 3)
            if isinstance(answer, Mapping) and _int_port(answer.get("port")) is not None:
                port = _int_port(answer.get("port"))
            record: dict[str, Any] = {"type": "call", "time": when, "t": round(wall, 3), "session": self.session,
                                      "tool": tool}
            if name is not None:
                record["name"] = name
            record["port"] = port
            args, options = carried
            record["arguments"] = jsonable(args)
            if options:
                record["options"] = jsonable(options)
            record["durationMs"] = duration
            if exc is None:
                record.update(answer_fields(answer, self._summariser()))
            elif isinstance(exc, BridgeError):
                record.update(error_fields(exc.name, exc.message, exc.exit_code))
            elif isinstance(exc, Exception):
                record.update(error_fields("InternalError", f"{type(exc).__name__}: {exc}"[:500], 1))
            else:
                return  # KeyboardInterrupt, cancellation: not a call's outcome
            if port is not None and tool not in ("list_instances",):
                identity = self._identity(port, fetch=exc is None, launched=tool == "launch_instance")
                if identity:
                    record["game"] = identity
            shot = self._screenshot(answer) if exc is None else None
            if shot is not None:
                record["screenshot"] = shot
            state_file = self._state_file(name, args) if tool == "call_tool" else None
            if state_file is not None:
                record["stateFile"] = state_file
            self.writer.write(record)
        except Exception as error:  # noqa: BLE001 - recording never breaks a call
            log.debug("could not record a call", exc_info=True)
            self.writer.fail(f"a call could not be recorded ({type(error).__name__}: {error})")

    def _summariser(self) -> Callable[[Any], dict[str, Any]]:
        if self._summarise is None:
            from ..core.digest import summarise
            self._summarise = summarise
        return self._summarise

    def _identity(self, port: int, *, fetch: bool, launched: bool = False) -> dict[str, Any] | None:
        """The identity of the game on ``port``, looked up the first time the session
        acts on it (before the call, so ``paused`` is how the session found it) and again
        after ``launch_instance`` starts a new process there."""
        with self._lock:
            known = self._identities.get(port)
        if known is not None and not launched:
            return known
        if not fetch:
            return known
        identity = live_identity(self.bridge, port)  # right after a launch: how the game started
        if identity is None:
            return known
        with self._lock:
            self._identities[port] = identity
        return identity

    def _state_file(self, name: Any, arguments: Any) -> dict[str, Any] | None:
        """A state file a call restored or forked from (``file``), copied beside the trace
        (:mod:`.files`), so the recording replays from it on another machine: a regular
        file that reads as a state file, no larger than one may be."""
        if name not in STATE_FILE_TOOLS or not isinstance(arguments, Mapping):
            return None
        file = arguments.get("file")
        if not isinstance(file, str) or not file:
            return None
        out: dict[str, Any] = {"file": file}
        try:
            data = read_capped(Path(file).expanduser(), STATE_MAX_BYTES, regular_only=True)
            if _is_state_file(data):
                with self._lock:
                    self._shots += 1
                    number = self._shots
                out["copy"] = self.copies.write(f"{int(time.time() * 1000)}-{number}.gbstate", data)
        except (OSError, FileProblem) as exc:
            log.debug("could not copy state file %s: %s", file, exc)
        return out


    def _screenshot(self, answer: Any) -> dict[str, Any] | None:
        """A screenshot the bridge saved (``get_screenshot``'s ``file``), copied into the
        trace's private folder (:mod:`.files`) so the recording keeps it when the bridge's
        own copy is pruned. Only a file in the bridge's own screenshot folder is copied:
        an answer naming any other file (a game's command can answer anything) is kept
        as a name."""
        if not isinstance(answer, Mapping) or answer.get("format") not in ("png", "jpeg"):
            return None
        file = answer.get("file")
        if not isinstance(file, str) or not file:
            return None
        out: dict[str, Any] = {"file": file}
        try:
            screenshots = getattr(self.bridge, "screenshots", None)
            folder = screenshots.directory() if screenshots is not None else None
            data = read_in_folder(folder, file, max_bytes=MAX_SCREENSHOT_COPY)
            if data is not None:
                with self._lock:
                    self._shots += 1
                    number = self._shots
                suffix = Path(file).suffix if Path(file).suffix in (".png", ".jpg", ".jpeg") else ".png"
                out["copy"] = self.copies.write(f"{int(time.time() * 1000)}-{number}{suffix}", data)
        except OSError as exc:
            log.debug("could not copy screenshot %s: %s", file, exc)
        return out


def _is_state_file(data: bytes) -> bool:
    from ..core.states.file import parse

    try:
        parse(data)
    except ValueError:
        return False
    return True
