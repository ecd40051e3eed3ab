"""The game kit: :class:`GameBridge` serves the game-bridge contract from a Python game.

docs/game-side.md says how to use it, and which thread runs what.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any, Callable, TypeVar, overload

from ...contract import (AFTER_FEATURE, CLOCK, DESCRIPTION_CHARS, EVENTS_FEATURE, PROTOCOL, RESULTS, SCREENSHOT,
                         SCREENSHOT_FEATURE, VIEW_FEATURE)
from . import loop as _loop
from .args import Arg, spec_from_function
from ...contract import CLOCK_COMMANDS
from .clock import START_PAUSED_ENV, Clock, clock_commands, start_paused
from .commands import CommandQueue, CommandTable, builtin_specs
from .events import DEFAULT_EVENT_BUFFER, DEFAULT_STATE_EVENTS, EventLog
from ..server.http import RouteAnswer, json_bytes
from .outcomes import Outcomes, Pending
from .ports import DEBUG_PORT_ENV, debug_port_from_argv
from .routes import Handler, kit_routes, snapshot_service
from .screenshot import WAIT_S as SCREENSHOT_WAIT_S
from .screenshot import Capture, Screenshots
from .serving import Serving
from .state import RawJson, encode_state, misplaced_screen, state_document

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
#: A screenshot capture function (see :meth:`GameBridge.screenshot`), kept as its own type by the decorator.
C = TypeVar("C", bound=Callable[..., Any])
StateFn = Callable[[], Mapping[str, Any]]

#: Default number of recent events published in ``/state``.
DEFAULT_MAX_EVENTS = DEFAULT_STATE_EVENTS
#: Keys of ``/state`` that the kit owns (a state function's keys of these names are
#: replaced; ``paused`` too when the kit runs the clock).
KIT_STATE_KEYS = ("frame", "simFrame", "completedCommandId", "events", "commandResults")
#: The extensions every kit game implements (``/health.features``).
BASE_FEATURES = (RESULTS, AFTER_FEATURE, VIEW_FEATURE, EVENTS_FEATURE)
CLOCK_TOOLSET = CLOCK
#: A description longer than this is published, but the bridge shows about this much.
DESCRIPTION_SHOWN = DESCRIPTION_CHARS


class GameBridge:
    """One game's debug surface (docs/game-side.md says which thread runs what).

    ``name``/``version`` identify the game in ``/tools`` and the registry entry;
    ``description`` (what the game is, its rules, how to win or lose) is
    ``game.description`` there. ``state`` returns the game's part of ``/state`` (a
    mapping); ``digest``, optional, a cheap one for ``view=digest`` (without it the kit
    cuts the full state before encoding it). ``on_close`` is the game's teardown, run
    on the game thread when an agent sends ``close``. ``clock=True`` adds ``pause``,
    ``resume`` and ``step`` and runs the update only when the clock allows
    (``GAME_BRIDGE_START_PAUSED=1`` starts paused). ``/state`` shows the newest
    ``max_events`` events; ``/events`` reads the last ``event_buffer``.
    ``register=False`` skips the registry entry; ``environ`` is read for
    ``GAME_BRIDGE_INSTANCES`` / ``GAME_BRIDGE_HOME`` / ``GAME_BRIDGE_START_PAUSED``.
    With the clock it saves and loads itself (``snapshot``; ``(save, load)`` hooks; False: off).
    """

    def __init__(self, name: str = "Python game", version: str = "0.0.0", *,
                 state: StateFn | None = None, on_close: Callable[[], Any] | None = None,
                 toolsets: Mapping[str, str] | None = None,
                 passthrough: Mapping[str, Any] | None = None,
                 description: str | None = None, digest: StateFn | None = None,
                 clock: bool = False, max_events: int = DEFAULT_MAX_EVENTS,
                 event_buffer: int = DEFAULT_EVENT_BUFFER, register: bool = True,
                 environ: Mapping[str, str] | None = None, host: str = "127.0.0.1",
                 screenshot: Capture | None = None, snapshot: Any = None, sim_frame_events: bool = False) -> None:
        self.name = str(name)
        self.version = str(version)
        self.description = None if description is None else str(description)
        if self.description is not None and len(self.description) > DESCRIPTION_SHOWN:
            log.warning("game-bridge kit: the description has %d characters; the bridge shows "
                        "about %d", len(self.description), DESCRIPTION_SHOWN)
        self.state_fn: StateFn | None = state
        self.digest_fn: StateFn | None = digest
        self.on_close: Callable[[], Any] | None = on_close
        self.passthrough: dict[str, Any] | None = dict(passthrough) if passthrough is not None else None
        self.host = host
        self._register = register
        self._environ = environ
        paused_env = (os.environ if environ is None else environ).get(START_PAUSED_ENV)
        if not clock and start_paused(paused_env):
            log.warning("game-bridge kit: %s is set but %s has no clock (GameBridge(clock=True)); "
                        "it starts running", START_PAUSED_ENV, self.name)
        #: Held while commands are applied, while ``run()`` updates the game, and while
        #: ``/state`` is built. Reentrant, so a command may call code that takes it.
        self.lock = threading.RLock()
        self._clock = Clock(bool(clock), start_paused(paused_env))
        self._sim_frame: int | None = None
        self._kit_keys = frozenset(KIT_STATE_KEYS + (("paused",) if clock else ()))
        self._features = list(BASE_FEATURES) + ([CLOCK] if clock else [])
        self._table = CommandTable(toolsets)
        self._outcomes = Outcomes()
        self._queue = CommandQueue(self._table, self._outcomes, self.lock, self._run_on_close,
                                   self._clock.after_frames)
        self._queue.interrupt = self._clock.interrupt
        self._clock.on_interrupt.append(lambda: self.event("step:interrupted", simFrame=self._clock.sim_frame))
        self._events = EventLog(event_buffer, max_events)
        #: Events at ``simFrame``, not the loop's count (a wrapper's loop turns while held).
        self._sim_frame_events = bool(sim_frame_events) and bool(clock)
        self._frame = 0
        self._screen_said = False  # a top-level 'screen' in the state was warned about
        self._routes: dict[str, Handler] = kit_routes(self)
        self._serving = Serving(host, self._route)
        self._game_thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._wake = threading.Event()
        self._screenshots: Screenshots | None = None
        if screenshot is not None:
            self.screenshot(screenshot)
        self._add_builtin_commands()
        self._loop_fns: tuple[Any, ...] = ()
        self._serving.posts = self._snapshots = snapshot_service(self, snapshot, bool(clock))

    # ------------------------------------------------------------------ registration
    @overload
    def command(self, func: F, /, *, name: str | None = None, description: str | None = None,
                toolset: str | None = "play", sync: bool = True, args: Mapping[str, "str | Arg"] | None = None,
                listed: bool = True) -> F: ...

    @overload
    def command(self, func: None = None, /, *, name: str | None = None, description: str | None = None,
                toolset: str | None = "play", sync: bool = True, args: Mapping[str, "str | Arg"] | None = None,
                listed: bool = True) -> Callable[[F], F]: ...

    def command(self, func: F | None = None, /, *, name: str | None = None,
                description: str | None = None, toolset: str | None = "play",
                sync: bool = True, args: Mapping[str, "str | Arg"] | None = None,
                listed: bool = True) -> F | Callable[[F], F]:
        """Register a command (usable bare, ``@bridge.command``, or with options).

        The function's name (or ``name``), its docstring summary (or ``description``)
        and its typed parameters become the ``/tools`` entry in ``toolset``; a parameter
        with no default is required. ``args`` maps argument names to descriptions or to
        :class:`Arg` (bounds, choices), which may also come from ``Annotated[T, "text",
        Arg(...)]`` and a Google-style ``Args:`` docstring section. What the function
        returns is the outcome's ``result``; what it raises is an ``ok: false`` outcome
        with its message. ``sync=False`` tells the bridge not to wait for the command;
        ``listed=False`` accepts it without publishing it.
        """

        def register(target: F) -> F:
            spec = spec_from_function(target, name=name, description=description,
                                      toolset=toolset, sync=sync, args=args, listed=listed)
            if spec.name == "close":
                raise ValueError("'close' is built in: pass on_close= to GameBridge for your teardown")
            if self._clock.enabled and spec.name in CLOCK_COMMANDS:
                raise ValueError(f"{spec.name!r} is the clock's command (clock=True); "
                                 "call set_paused() from yours, under another name")
            self._table.add(spec)
            return target

        if func is not None:
            return register(func)
        return register

    def on_step_interrupted(self, release: Callable[[], None]) -> None:
        """Call ``release`` (on the game thread) when a pause cuts a step short."""
        self._clock.on_interrupt.append(release)

    def toolset(self, name: str, description: str) -> None:
        """Describe a toolset (say what a caller reaches for it to do)."""
        self._table.describe(name, description)

    @overload
    def screenshot(self, capture: C, /, *, window: Callable[[], tuple[int, int] | None] | None = None,
                   wait_s: float = SCREENSHOT_WAIT_S, hasher: Callable[..., str] | None = None) -> C: ...

    @overload
    def screenshot(self, capture: None = None, /, *, window: Callable[[], tuple[int, int] | None] | None = None,
                   wait_s: float = SCREENSHOT_WAIT_S, hasher: Callable[..., str] | None = None) -> Callable[[C], C]: ...

    def screenshot(self, capture: C | None = None, /, *,
                   window: Callable[[], tuple[int, int] | None] | None = None,
                   wait_s: float = SCREENSHOT_WAIT_S, hasher: Callable[..., str] | None = None) -> C | Callable[[C], C]:
        """Serve ``/screenshot`` from ``capture`` (also a decorator, ``@bridge.screenshot``).

        ``capture()`` (or ``capture(max_width, max_height)``) runs on the game thread
        inside :meth:`pump`, at the first frame after a request, and returns a pygame
        Surface, :class:`~game_bridge_mcp.game.image.Pixels`, PNG/JPEG bytes, an
        :class:`~game_bridge_mcp.game.image.Image`, or None (nothing to show: 503). The
        kit scales and encodes off the game thread. ``window()`` returns the window's
        size in pointer pixels, sent as ``X-Game-Window``; ``wait_s`` is how long a
        request waits for the game's next frame before a 503; ``hasher(region)`` hashes
        the picture for ``?hash=1`` (else the capture's pixels are). See :mod:`.screenshot`.
        """

        def register(target: C) -> C:
            self._screenshots = Screenshots(target, window=window, wait_s=wait_s, hasher=hasher,
                                            on_request=self._wake_if_paused)
            self._routes[SCREENSHOT] = self._screenshots.answer
            self.advertise(SCREENSHOT_FEATURE)
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

    def commands(self) -> list[str]:
        """The names ``/command`` accepts, sorted."""
        return self._table.names()

    def add_route(self, path: str, handler: Handler) -> None:
        """Serve another GET endpoint: ``handler(query)`` answers ``(status, json_bytes)``
        or an :class:`~game_bridge_mcp.game.server.http.Answer`, on an HTTP thread."""
        if not path.startswith("/"):
            raise ValueError(f"a route path starts with '/', not {path!r}")
        self._routes[path] = handler

    def advertise(self, *features: str) -> None:
        """Add names to ``/health.features``. Only for what the game implements exactly
        as docs/contract.md says: ``check`` tests every advertised feature."""
        for feature in features:
            if str(feature) not in self._features:
                self._features.append(str(feature))

    @property
    def features(self) -> list[str]:
        return list(self._features)

    def snapshot_skip(self, *objects: Any) -> None:
        """Keep these objects (files, connections) out of snapshots: a load leaves them."""
        if self._snapshots is not None:
            self._snapshots.service.skip(*objects)

    def game_callables(self) -> list[Any]:
        """What the game gave the kit (its state, loop and commands): where snapshots find it."""
        return [self.state_fn, self.digest_fn, *self._loop_fns, *self._table.functions()]

    def _add_builtin_commands(self) -> None:
        for spec in builtin_specs():  # close and noop
            self._table.add(spec)
        if self._clock.enabled:
            for spec in clock_commands(self, self._clock):
                self._table.add(spec)
            self._table.describe(CLOCK_TOOLSET, "Stop the game's clock while you think and advance "
                                 "it frame by frame: pause, step, resume.", replace=False)

    # ------------------------------------------------------------------ events
    def event(self, message: str, **fields: Any) -> None:
        """Record an event: ``{"seq": N, "m": message, "frame": F, **fields}`` in
        ``/state.events`` (the newest ``max_events``) and ``/events`` (by ``seq``).
        Safe from any thread; ``seq`` counts 1, 2, ... over the life of the process."""
        frame = self._clock.sim_frame if self._sim_frame_events else self._frame
        self._events.add(message, frame, fields)

    def events_since(self, since: int, limit: int = 100) -> dict[str, Any]:
        """The ``/events`` answer: ``{events, next, dropped}``."""
        return self._events.since(since, limit)

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int | None:
        """The bound port (after :meth:`start`)."""
        return self._serving.port

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
        return self._outcomes.completed

    @property
    def running(self) -> bool:
        """True from :meth:`start` until ``close`` is applied or :meth:`stop` is called."""
        return self._serving.server is not None and not self._queue.closing and not self._stopped.is_set()

    @property
    def closing(self) -> bool:
        """True once ``close`` has been applied (or :meth:`request_stop` called)."""
        return self._queue.closing

    def start(self, port: int | None = 0) -> int:
        """Bind ``host:port`` (0: any free port), serve on a daemon thread, then write
        the registry entry. Returns the bound port. Raises OSError if the port is taken."""
        bound = self._serving.start(int(port or 0), register=self._register, name=self.name,
                                    version=self.version, environ=self._environ)
        log.info("game-bridge kit: %s %s serving on %s", self.name, self.version, self.url)
        return bound

    @property
    def registration(self) -> Any:
        """The registry entry written at start (``.path``), or None."""
        return self._serving.registration

    def _run_on_close(self) -> None:
        if self.on_close is not None:
            self.on_close()

    def request_stop(self) -> None:
        """Ask :meth:`run` to end (from any thread, e.g. a signal handler) without
        running the game's ``on_close``; the loop then calls :meth:`stop`."""
        self._queue.closing = True
        self._wake.set()

    def stop(self) -> None:
        """Release held requests, remove the registry entry, stop serving and close open
        connections. Idempotent; safe from any thread except an HTTP handler of this server."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        self._wake.set()
        self._outcomes.stop()
        if self._screenshots is not None:
            self._screenshots.stop()
        self._serving.stop()
        log.info("game-bridge kit: %s stopped", self.name)

    def __enter__(self) -> "GameBridge":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ commands
    def pump(self) -> int:
        """Advance ``frame`` and apply every queued command, on the calling thread.

        Call once per iteration of the game loop. Returns how many commands ran. When
        one of them is ``close``, the game's ``on_close`` runs here, the registry entry
        is removed, the server stops and :attr:`running` becomes False.
        """
        if self._game_thread is None:
            self._game_thread = threading.current_thread()
        self._wake.clear()  # a command queued from here on ends the next wait_for_work
        with self.lock:
            self._frame += 1
            applied = self._queue.drain()
        if self._screenshots is not None and not self._queue.closing:
            self._screenshots.serve(self._frame)  # the frame just drawn, after the commands
        if self._queue.closing:
            self.stop()
        return applied

    def apply_queued(self) -> int:
        """Apply queued commands now without counting a frame (e.g. those that waited
        behind a ``step`` that has just finished)."""
        applied = self._queue.drain()
        if self._queue.closing:
            self.stop()
        return applied

    def queue_command(self, query: str) -> tuple[int, dict[str, Any]]:
        """Validate a ``/command`` query and queue it: ``(status, answer)``. Runs on the
        HTTP thread; the command itself runs later in :meth:`pump`."""
        status, doc = self._queue.accept(query, self._frame, self.closing or self._stopped.is_set())
        if status == 200 and self._clock.paused:
            self._wake.set()  # a paused loop applies it now rather than at its next tick
        return status, doc

    def defer(self, *, hold: bool = False) -> Pending:
        """Inside a command: complete it later. Return the handle from the command and
        call its ``complete(result)`` / ``fail(reason)`` (or
        ``complete_after_sim_frames(n)``) when done. ``hold=True`` keeps the commands
        queued after it waiting until then (``step`` does); otherwise they still run,
        and only their completion waits for this one's."""
        return self._queue.defer(hold)

    def wait_completed(self, after: int, timeout_s: float) -> bool:
        """Block (an HTTP thread) until ``completedCommandId >= after``, ``timeout_s``
        passed or the game stopped; returns whether it completed."""
        if self._stopped.is_set():
            return self._outcomes.completed >= after
        return self._outcomes.wait(after, timeout_s)

    def _wake_if_paused(self) -> None:
        if self._clock.paused:
            self._wake.set()  # a paused loop captures now rather than at its next tick

    def wait_for_work(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s`` (a loop between frames), ending early when a command
        or a screenshot request arrives for a paused game, or the bridge stops."""
        self._wake.wait(timeout_s)

    # ------------------------------------------------------------------ the clock
    @property
    def clock(self) -> bool:
        """Whether the game opted into the kit's clock (``clock=True``)."""
        return self._clock.enabled

    @property
    def paused(self) -> bool:
        return self._clock.paused

    def set_paused(self, paused: bool) -> None:
        """Pause or resume the clock (what ``pause``/``resume`` do), e.g. from the game's
        own pause button. Needs ``clock=True``."""
        if not self._clock.enabled:
            raise RuntimeError("this game has no clock: pass clock=True to GameBridge")
        with self.lock:
            self._clock.paused = bool(paused)
            if not paused:
                self._clock.owed = 0

    def owe_frames(self, frames: int) -> None:
        """A command that steps a paused game as ``step`` does (gym's ``act``): ``frames`` more
        simulation frames run although paused (complete it with ``complete_after_sim_frames``)."""
        with self.lock:
            if self._clock.enabled and self._clock.paused:
                self._clock.owe(int(frames))

    @property
    def stepping(self) -> bool:
        """Paused, with frames a ``step`` still owes."""
        return self._clock.stepping

    @property
    def owed_frames(self) -> int:
        """Simulation frames the ``step`` commands applied so far still owe (0 unless
        stepping): a loop that can run several frames at once runs at most these."""
        return self._clock.owed if self._clock.paused else 0

    @property
    def fixed_dt(self) -> float:
        """The time step of stepped frames (``run`` sets it to ``1/hz``; default 1/60)."""
        return self._clock.fixed_dt

    @fixed_dt.setter
    def fixed_dt(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f"fixed_dt must be positive, got {value!r}")
        self._clock.fixed_dt = float(value)

    @property
    def sim_frame(self) -> int | None:
        """``simFrame``: with ``clock=True`` the kit's count of simulation frames;
        otherwise whatever the game sets here (None: not published)."""
        return self._clock.sim_frame if self._clock.enabled else self._sim_frame

    @sim_frame.setter
    def sim_frame(self, value: int | None) -> None:
        if self._clock.enabled:
            self._clock.sim_frame = int(value or 0)
        else:
            self._sim_frame = value

    def sim_dt(self, real_dt: float | None = None) -> float | None:
        """Ask, after :meth:`pump`, whether to update this frame: None means do not
        (paused); otherwise the time step to use (:attr:`fixed_dt` while stepping, else
        ``real_dt``). After the update call :meth:`end_sim_frame`."""
        return self._clock.dt(real_dt)

    def end_sim_frame(self) -> None:
        """One simulation frame (one update) has run: counts ``simFrame``, pays off a
        ``step`` and completes what waited for it."""
        with self.lock:
            for callback in self._clock.end_sim_frame():
                callback()

    def hold_until_sim(self, *, hz: float = 60.0, interrupt: Callable[[], bool] | None = None) -> bool:
        """For a loop that cannot skip its update (a hook at a display flip): pump, and
        while paused keep pumping ``hz`` times a second (at once when a command arrives)
        until a simulation frame is due. True: run one; False: the bridge stopped.
        ``interrupt``, asked at each turn while held, ends the hold early (True) when
        the game's own loop must run: a quit request it has to read, for one."""
        return _loop.hold_until_sim(self, hz, interrupt)

    def run(self, update: Callable[[], Any] | None = None, *, hz: float = 60.0,
            render: Callable[[], Any] | None = None) -> None:
        """A fixed-rate game loop on the calling thread, ``hz`` times a second until
        ``close`` (or :meth:`request_stop`), then :meth:`stop`: ``pump()``; ``update()``
        under :attr:`lock` when the clock allows (the frames a ``step`` owes run back to
        back, within the frame's time); ``render()`` under the lock, every frame, paused
        or not. Falls behind gracefully (no catch-up burst) when an update overruns."""
        if self._serving.server is None:
            raise RuntimeError("call start() before run()")
        self._loop_fns = (update, render)
        _loop.run(self, update, hz, render)

    # ------------------------------------------------------------------ documents
    def health(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"ok": True, "frame": self._frame,
                               "completedCommandId": self._outcomes.completed,
                               "features": list(self._features)}
        if self._clock.enabled:
            doc["simFrame"] = self._clock.sim_frame
            doc["paused"] = self._clock.paused
        return doc

    def snapshot(self, view: str = "full") -> dict[str, Any]:
        """The ``/state`` document, whole or ``"digest"`` (call with :attr:`lock` held if
        the game is running)."""
        return self._document(view, self._outcomes.recent())

    def _document(self, view: str, results: Any) -> dict[str, Any]:
        digest = view == "digest"
        source = self.digest_fn if digest and self.digest_fn is not None else self.state_fn
        base = source() if source is not None else {}
        if not self._screen_said and misplaced_screen(base):
            self._screen_said = True
            log.warning("game-bridge kit: the state has a top-level 'screen', which the bridge does not read; "
                        "put it in ui.screen (docs/contract.md)")
        return state_document(base, digest=digest, frame=self._frame,
                              sim_frame=self.sim_frame, completed=self._outcomes.completed,
                              paused=self._clock.paused if self._clock.enabled else None,
                              events=self._events.tail(), results=results,
                              kit_keys=self._kit_keys)

    def encoded_state(self, view: str = "full") -> bytes:
        """:meth:`snapshot` as strict JSON, built and encoded under :attr:`lock`."""
        with self.lock:  # (commandResults encoded once an entry: the same bytes)
            return encode_state(self._document(view, self._outcomes.recent_encoded()))

    def manifest(self) -> dict[str, Any]:
        """The ``/tools`` document (protocol 1) built from the registered commands."""
        game: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.description:
            game["description"] = self.description
        return self._table.manifest(game, self.passthrough, last=(CLOCK_TOOLSET,))

    def _route(self, path: str, query: str) -> RouteAnswer:
        handler = self._routes.get(path)
        if handler is None:
            return 404, json_bytes({"ok": False, "error": f"no such endpoint: {path[:100]}",
                                    "endpoints": sorted(self._routes)})
        return handler(query)


__all__ = ["BASE_FEATURES", "DEBUG_PORT_ENV", "GameBridge", "KIT_STATE_KEYS", "PROTOCOL",
           "Pending", "RawJson", "START_PAUSED_ENV", "debug_port_from_argv", "encode_state"]
