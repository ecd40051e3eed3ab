"""The game kit: serve the game-bridge contract from a Python game in a few lines.

Why it exists: every game that wants to be drivable needs the same HTTP surface
(``/health``, ``/state``, ``/command``, ``/tools``), the same fire-and-forget command
queue drained on the game's own thread, ``completedCommandId``, a manifest that matches
the commands, a registry entry and a clean ``close``. Getting those subtly wrong (a
command applied on the HTTP thread, a ``/state`` read mid-update, an entry written
before the port is bound) is what makes agents' tests flaky. Here they are done once.

Usage::

    bridge = GameBridge("My Game", "1.0", state=lambda: {"game": {"score": world.score}})

    @bridge.command(description="Drop the held piece at world x.", toolset="play")
    def drop(x: float, settle: bool = True) -> None:
        world.drop(x)

    bridge.start(debug_port_from_argv())      # binds 127.0.0.1, then registers
    while bridge.running:                      # until an agent sends close
        bridge.pump()                          # applies queued commands, on this thread
        world.step()

Threading model (the choice this module makes, and what it asks of the game):

* HTTP requests are answered on server threads. ``/command`` converts and validates the
  arguments there and answers at once with a ``commandId``; the command itself runs
  later, inside :meth:`GameBridge.pump`, on whichever thread calls it (the game
  thread). ``completedCommandId`` is published as each command finishes.
* ``/state`` is built **on request**, by calling the game's state function on the HTTP
  thread while holding :attr:`GameBridge.lock`. ``pump()`` holds the same (reentrant)
  lock while it applies commands, and :meth:`GameBridge.run` holds it while it calls
  the game's update, so a snapshot never sees half a frame. A game with its own loop
  that mutates its world outside ``pump()`` should do so inside ``with bridge.lock:``
  (or have its state function copy what it reads). The snapshot is encoded to JSON
  under the lock too, so it may reference live lists and dicts.
* ``/health`` takes no lock: it reads two integers, so it stays cheap while the game
  is busy.

Standard library only. The registry writer (:mod:`game_bridge_mcp.registration`) is
imported when the server starts, not when this module is imported.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import itertools
import json
import logging
import math
import os
import queue
import sys
import threading
import time
import urllib.parse
import uuid
from pathlib import PurePath
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ._args import ArgumentError, CommandSpec, check_name, convert_query, spec_from_function
from ._http import KitHttpServer, RouteAnswer, json_bytes
from ._screenshot import WAIT_S as SCREENSHOT_WAIT_S
from ._screenshot import Capture, Screenshots

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
StateFn = Callable[[], Mapping[str, Any]]

#: The manifest document version the kit writes (``game.protocol``).
PROTOCOL = 1
#: Default size of the recent-events buffer published in ``/state``.
DEFAULT_MAX_EVENTS = 64
#: Default environment variable read by :func:`debug_port_from_argv`.
DEBUG_PORT_ENV = "GAME_BRIDGE_DEBUG_PORT"
#: Keys of ``/state`` that the kit owns (a state function's keys of these names are replaced).
KIT_STATE_KEYS = ("frame", "simFrame", "completedCommandId", "events", "lastCommand")


class RawJson:
    """Already-encoded JSON to embed in ``/state`` as is (a large part that rarely
    changes, encoded once rather than on every request). The game vouches that
    ``text`` is one valid JSON value."""

    __slots__ = ("text",)

    def __init__(self, text: str | bytes) -> None:
        self.text = text.decode("utf-8") if isinstance(text, bytes) else str(text)


def _finite(value: Any) -> Any:
    """A copy of ``value`` with NaN and infinities replaced by None (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def encode_state(doc: Any) -> bytes:
    """Strict JSON for ``/state``: NaN/Infinity become null, dataclasses, enums, sets and
    paths are converted, :class:`RawJson` is spliced in verbatim. Raises TypeError or
    ValueError (with the offending type) for anything else."""
    raw: dict[str, str] = {}
    marker = uuid.uuid4().hex

    def default(obj: Any) -> Any:
        if isinstance(obj, RawJson):
            token = f"@@raw-{marker}-{len(raw)}@@"
            raw[token] = obj.text
            return token
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return _finite(dataclasses.asdict(obj))
        if isinstance(obj, enum.Enum):
            return obj.value
        if isinstance(obj, (set, frozenset)):
            return sorted(obj, key=repr)
        if isinstance(obj, PurePath):
            return str(obj)
        raise TypeError(f"the state contains a {type(obj).__name__}, which is not JSON "
                        "(return dicts, lists, strings, numbers, booleans and None)")

    try:
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False, default=default)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
        raw.clear()
        text = json.dumps(_finite(doc), separators=(",", ":"), allow_nan=False, default=default)
    for token, fragment in raw.items():
        text = text.replace(f'"{token}"', fragment, 1)
    return text.encode("utf-8")


def debug_port_from_argv(argv: Sequence[str] | None = None, *, flag: str = "--debug-port",
                         env_var: str | None = DEBUG_PORT_ENV,
                         environ: Mapping[str, str] | None = None,
                         default: int | None = None) -> int | None:
    """The debug port from ``flag N`` / ``flag=N`` in ``argv`` (default ``sys.argv``),
    else from ``env_var``, else ``default`` (None: keep the debug surface off).

    ``0`` means "any free port" (the bound port is :attr:`GameBridge.port`). Raises
    ValueError naming the flag when the value is not a port number.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    text: str | None = None
    source = flag
    for index, arg in enumerate(args):
        if arg == flag:
            if index + 1 >= len(args):
                raise ValueError(f"{flag} needs a port number after it")
            text = args[index + 1]
        elif arg.startswith(flag + "="):
            text = arg[len(flag) + 1:]
    if text is None and env_var:
        env = os.environ if environ is None else environ
        if env.get(env_var, "").strip():
            text, source = env[env_var], env_var
    if text is None:
        return default
    value = text.strip()
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise ValueError(f"{source} expects a port number 0-65535, got {text!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class _Queued:
    command_id: int
    spec: CommandSpec
    kwargs: dict[str, Any]


class GameBridge:
    """One game's debug surface. See the module docstring for the threading model.

    ``name``/``version`` identify the game in ``/tools`` and the registry entry.
    ``state`` returns the game's part of ``/state`` (a mapping); ``on_close`` is the
    game's teardown, run on the game thread when an agent sends ``close``.
    ``register=False`` skips the registry entry; ``environ`` is read for
    ``GAME_BRIDGE_INSTANCES`` / ``GAME_BRIDGE_HOME``.
    """

    def __init__(self, name: str = "Python game", version: str = "0.0.0", *,
                 state: StateFn | None = None, on_close: Callable[[], Any] | None = None,
                 toolsets: Mapping[str, str] | None = None,
                 passthrough: Mapping[str, Any] | None = None,
                 max_events: int = DEFAULT_MAX_EVENTS, register: bool = True,
                 environ: Mapping[str, str] | None = None, host: str = "127.0.0.1",
                 screenshot: Capture | None = None) -> None:
        self.name = str(name)
        self.version = str(version)
        self.state_fn: StateFn | None = state
        self.on_close: Callable[[], Any] | None = on_close
        self.passthrough: dict[str, Any] | None = dict(passthrough) if passthrough is not None else None
        self.host = host
        self._register = register
        self._environ = environ
        #: Held while commands are applied, while ``run()`` updates the game, and while
        #: ``/state`` is built. Reentrant, so a command may call code that takes it.
        self.lock = threading.RLock()
        #: Optional simulation frame counter, published as ``simFrame`` when set.
        self.sim_frame: int | None = None
        self._toolset_text: dict[str, str] = dict(toolsets or {})
        self._commands: dict[str, CommandSpec] = {}
        self._commands_lock = threading.Lock()
        self._queue: "queue.SimpleQueue[_Queued]" = queue.SimpleQueue()
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()
        self._events: collections.deque[dict[str, Any]] = collections.deque(maxlen=max(1, int(max_events)))
        self._frame = 0
        self._completed = 0
        self._last_command: dict[str, Any] | None = None
        self._server: KitHttpServer | None = None
        self._server_thread: threading.Thread | None = None
        self._registration: Any = None
        self._game_thread: threading.Thread | None = None
        self._closing = False
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._wake = threading.Event()
        self._screenshots: Screenshots | None = None
        if screenshot is not None:
            self.screenshot(screenshot)
        self._add_builtin_commands()

    # ------------------------------------------------------------------ registration
    def command(self, func: F | None = None, *, name: str | None = None,
                description: str | None = None, toolset: str | None = "play",
                sync: bool = True, args: Mapping[str, str] | None = None,
                listed: bool = True) -> Any:
        """Register a command (usable bare, ``@bridge.command``, or with options).

        The function's name (or ``name``), its docstring summary (or ``description``)
        and its typed parameters become the ``/tools`` entry in ``toolset``; a parameter
        with no default is required. ``args`` maps argument names to descriptions
        (also read from a Google-style ``Args:`` docstring section or
        ``Annotated[T, "text"]``). ``sync=False`` tells the bridge not to wait for the
        command; ``listed=False`` accepts it without publishing it.
        """

        def register(target: F) -> F:
            spec = spec_from_function(target, name=name, description=description,
                                      toolset=toolset, sync=sync, args=args, listed=listed)
            if spec.name == "close":
                raise ValueError("'close' is built in: pass on_close= to GameBridge for your teardown")
            with self._commands_lock:
                self._commands[spec.name] = spec
            return target

        if func is not None:
            return register(func)
        return register

    def toolset(self, name: str, description: str) -> None:
        """Describe a toolset (say what a caller reaches for it to do)."""
        self._toolset_text[check_name(name, "Toolset name")] = str(description)

    def screenshot(self, capture: Capture | None = None, *,
                   window: Callable[[], tuple[int, int]] | None = None,
                   wait_s: float = SCREENSHOT_WAIT_S) -> Any:
        """Serve ``/screenshot`` from ``capture`` (also a decorator, ``@bridge.screenshot``).

        ``capture()`` (or ``capture(max_width, max_height)``) runs on the game thread
        inside :meth:`pump`, at the first frame after a request, and returns a pygame
        Surface, :class:`~game_bridge_mcp.game.image.Pixels`, PNG/JPEG bytes, an
        :class:`~game_bridge_mcp.game.image.Image`, or None (nothing to show: 503). The
        kit scales and encodes off the game thread. ``window()`` returns the window's
        size in pointer pixels, sent as ``X-Game-Window``; ``wait_s`` is how long a
        request waits for the game's next frame before a 503. See :mod:`._screenshot`.
        """

        def register(target: Capture) -> Capture:
            self._screenshots = Screenshots(target, window=window, wait_s=wait_s)
            return target

        return register(capture) if capture is not None else register

    @property
    def screenshots(self) -> Screenshots | None:
        """The ``/screenshot`` service (``.waiting``: requests waiting for a frame), or None."""
        return self._screenshots

    def state(self, func: StateFn) -> StateFn:
        """Decorator form of ``state=``: the function that returns the game's state."""
        self.state_fn = func
        return func

    def _add_builtin_commands(self) -> None:
        def close() -> None:
            """Shut the game down through its normal teardown."""

        def noop() -> None:
            """Do nothing; completes on the next frame (for checks and latency probes)."""

        for builtin in (close, noop):
            spec = spec_from_function(builtin, toolset=None, listed=False)
            self._commands[spec.name] = spec

    def commands(self) -> list[str]:
        """The names ``/command`` accepts, sorted."""
        with self._commands_lock:
            return sorted(self._commands)

    # ------------------------------------------------------------------ events
    def event(self, message: str, **fields: Any) -> None:
        """Record a recent event (``events: [{"m": message, "frame": N, ...}]`` in
        ``/state``). Safe from any thread; the buffer keeps the newest ``max_events``."""
        entry = {"m": str(message), "frame": self._frame}
        entry.update(fields)
        self._events.append(entry)

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int | None:
        """The bound port (after :meth:`start`)."""
        return None if self._server is None else int(self._server.server_address[1])

    @property
    def url(self) -> str | None:
        port = self.port
        if port is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}"

    @property
    def frame(self) -> int:
        return self._frame

    @property
    def completed_command_id(self) -> int:
        return self._completed

    @property
    def running(self) -> bool:
        """True from :meth:`start` until ``close`` is applied or :meth:`stop` is called."""
        return self._server is not None and not self._closing and not self._stopped.is_set()

    @property
    def closing(self) -> bool:
        """True once ``close`` has been applied (or :meth:`request_stop` called)."""
        return self._closing

    def start(self, port: int | None = 0) -> int:
        """Bind ``host:port`` (0: any free port), serve on a daemon thread, then write
        the registry entry. Returns the bound port. Raises OSError if the port is taken."""
        if self._server is not None:
            raise RuntimeError("this GameBridge is already started")
        server = KitHttpServer(self.host, int(port or 0), self._route)
        self._server = server
        self._server_thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"game-bridge-http-{self.port}", daemon=True)
        self._server_thread.start()
        if self._register:
            self._registration = self._write_registry_entry()
        log.info("game-bridge kit: %s %s serving on %s", self.name, self.version, self.url)
        return int(self.port or 0)

    def _write_registry_entry(self) -> Any:
        try:
            from ..registry.writer import register_instance
        except Exception as exc:  # a vendored kit without the registry still serves
            log.debug("game-bridge kit: no registry writer (%s); not registering", exc)
            return None
        try:
            return register_instance(port=int(self.port or 0), name=self.name, version=self.version,
                                     protocol=PROTOCOL, host=self.host, environ=self._environ)
        except Exception as exc:  # never let advertising break the game
            log.warning("game-bridge kit: could not register the instance: %s", exc)
            return None

    @property
    def registration(self) -> Any:
        """The registry entry written at start (``.path``), or None."""
        return self._registration

    def pump(self) -> int:
        """Advance ``frame`` and apply every queued command, on the calling thread.

        Call once per iteration of the game loop. Returns how many commands ran. When
        one of them is ``close``, the game's ``on_close`` runs here, the registry entry
        is removed, the server stops and :attr:`running` becomes False.
        """
        if self._game_thread is None:
            self._game_thread = threading.current_thread()
        applied = 0
        with self.lock:
            self._frame += 1
            while not self._closing:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                self._apply(item)
                applied += 1
        if self._screenshots is not None and not self._closing:
            self._screenshots.serve(self._frame)  # the frame just drawn, after the commands
        if self._closing:
            self.stop()
        return applied

    def _apply(self, item: _Queued) -> None:
        name = item.spec.name
        record: dict[str, Any] = {"commandId": item.command_id, "cmd": name, "ok": True}
        try:
            if name == "close":
                self._closing = True
                if self.on_close is not None:
                    self.on_close()
            else:
                item.spec.func(**item.kwargs)
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("game-bridge kit: command %r failed: %s", name, detail, exc_info=True)
            record.update(ok=False, error=detail)
            self.event(f"error:{name}", error=detail)
        self._last_command = record
        self._completed = item.command_id

    def request_stop(self) -> None:
        """Ask :meth:`run` to end (from any thread, e.g. a signal handler) without
        running the game's ``on_close``; the loop then calls :meth:`stop`."""
        self._closing = True
        self._wake.set()

    def stop(self) -> None:
        """Remove the registry entry, stop serving and close open connections.
        Idempotent; safe from any thread except an HTTP handler of this server."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        self._wake.set()
        if self._screenshots is not None:
            self._screenshots.stop()
        registration, self._registration = self._registration, None
        if registration is not None:
            try:
                registration.remove()
            except Exception:  # pragma: no cover - Registration.remove never raises
                log.debug("could not remove the registry entry", exc_info=True)
        server = self._server
        if server is not None:
            server.shutdown()
            server.server_close()
            server.close_connections()
        if self._server_thread is not None and self._server_thread is not threading.current_thread():
            self._server_thread.join(timeout=5)
        log.info("game-bridge kit: %s stopped", self.name)

    def run(self, update: Callable[[], Any] | None = None, *, hz: float = 60.0) -> None:
        """A fixed-rate game loop on the calling thread: ``pump()``, then ``update()``
        under :attr:`lock`, ``hz`` times a second, until ``close`` (or
        :meth:`request_stop`); then :meth:`stop`. Falls behind gracefully (no
        catch-up burst) when an update overruns its slot."""
        if self._server is None:
            raise RuntimeError("call start() before run()")
        if not hz > 0:
            raise ValueError(f"hz must be positive, got {hz!r}")
        period = 1.0 / hz
        next_tick = time.monotonic()
        try:
            while self.running:
                self.pump()
                if not self.running:
                    break
                if update is not None:
                    with self.lock:
                        update()
                next_tick += period
                delay = next_tick - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                else:
                    next_tick = time.monotonic()
        finally:
            self.stop()

    def __enter__(self) -> "GameBridge":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ documents
    def health(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"ok": True, "frame": self._frame, "completedCommandId": self._completed}
        if self._screenshots is not None:
            doc["features"] = ["screenshot"]
        return doc

    def snapshot(self) -> dict[str, Any]:
        """The ``/state`` document (call with :attr:`lock` held if the game is running)."""
        base = self.state_fn() if self.state_fn is not None else {}
        if not isinstance(base, Mapping):
            raise TypeError(f"the state function returned a {type(base).__name__}, not a dict")
        doc: dict[str, Any] = {"frame": self._frame}
        sim = self.sim_frame if self.sim_frame is not None else base.get("simFrame")
        if sim is not None:
            doc["simFrame"] = sim
        doc["completedCommandId"] = self._completed
        for key, value in base.items():
            if key not in KIT_STATE_KEYS:
                doc[key] = value
        doc["events"] = list(self._events)
        if self._last_command is not None:
            doc["lastCommand"] = dict(self._last_command)
        return doc

    def manifest(self) -> dict[str, Any]:
        """The ``/tools`` document (protocol 1) built from the registered commands."""
        with self._commands_lock:
            specs = list(self._commands.values())
        toolsets: dict[str, list[CommandSpec]] = {}
        for spec in specs:
            if spec.listed and spec.toolset is not None:
                toolsets.setdefault(spec.toolset, []).append(spec)
        unlisted = sorted(spec.name for spec in specs if not spec.listed)
        passthrough = self.passthrough if self.passthrough is not None else {
            "description": "Commands this game accepts without publishing them as tools.",
            "examples": unlisted}
        return {
            "game": {"name": self.name, "version": self.version, "protocol": PROTOCOL},
            "toolsets": [{"name": name, "description": self._toolset_text.get(name, ""),
                          "tools": [spec.manifest() for spec in tools]}
                         for name, tools in toolsets.items()],
            "passthrough": passthrough,
        }

    # ------------------------------------------------------------------ HTTP routes
    def _route(self, path: str, query: str) -> RouteAnswer:
        if path == "/health":
            return 200, json_bytes(self.health())
        if path == "/state":
            return self._state_answer()
        if path == "/command":
            status, doc = self.queue_command(query)
            return status, json_bytes(doc)
        if path == "/tools":
            return 200, json_bytes(self.manifest())
        if path == "/screenshot" and self._screenshots is not None:
            return self._screenshots.answer(query)
        return 404, json_bytes({"ok": False, "error": f"no such endpoint: {path[:100]}",
                                "endpoints": ["/health", "/state", "/command", "/tools"]})

    def _state_answer(self) -> tuple[int, bytes]:
        try:
            with self.lock:
                return 200, encode_state(self.snapshot())
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("game-bridge kit: /state failed: %s", detail)
            return 500, json_bytes({"ok": False, "error": f"the game's state could not be built: {detail}"})

    def queue_command(self, query: str) -> tuple[int, dict[str, Any]]:
        """Validate a ``/command`` query and queue it: ``(status, answer)``. Runs on the
        HTTP thread; the command itself runs later in :meth:`pump`."""
        try:
            params = urllib.parse.parse_qs(query, keep_blank_values=True, max_num_fields=200)
        except ValueError as exc:
            return 400, {"accepted": False, "error": f"the query string cannot be read: {exc}",
                         "commands": self.commands()}
        names = params.pop("cmd", [])
        if len(names) != 1 or not names[0]:
            problem = "no command: name it with cmd=..." if not names or not names[0] else \
                "cmd was given more than once"
            return 400, {"accepted": False, "error": problem, "commands": self.commands()}
        name = names[0]
        with self._commands_lock:
            spec = self._commands.get(name)
        if spec is None:
            return 400, {"accepted": False, "error": f"unknown command {name[:100]!r}",
                         "commands": self.commands()}
        if self._closing or self._stopped.is_set():
            return 503, {"accepted": False, "error": "the game is closing", "command": name}
        try:
            kwargs = convert_query(spec, params)
        except ArgumentError as exc:
            return 400, {"accepted": False, "error": str(exc), "command": name,
                         "args": [arg.manifest() for arg in spec.args]}
        with self._id_lock:
            command_id = next(self._ids)
            self._queue.put(_Queued(command_id, spec, kwargs))
        return 200, {"accepted": True, "commandId": command_id, "frame": self._frame}
