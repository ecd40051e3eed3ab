"""The wrapped game's frame boundary: pygame's flip, events, devices and clock, hooked before
the game's code runs. Runs on the game's thread except :meth:`Wrapper.state` and the window
size, which read what the last flip cached."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable

from ..kit import GameBridge
from ..wrapper.frames import Schedule
from ..wrapper.serve import start
from ._input import Devices
from ._determinism import Timers
from ._time import Clock, VirtualTime

log = logging.getLogger(__name__)

#: How often a held (paused) game turns its serving loop.
HOLD_HZ = 60.0
#: Event types worth publishing, by pygame constant name.
_PUBLISHED = ("KEYDOWN", "KEYUP", "MOUSEBUTTONDOWN", "MOUSEBUTTONUP", "TEXTINPUT", "QUIT")
#: Events published per read of the queue, at most (a flood stays a trickle).
MAX_EVENTS_PER_READ = 16

#: The game's own state hook (see :func:`game_bridge_mcp.game.pygame.state_hook`).
_state_hook: Callable[[], Mapping[str, Any]] | None = None


def set_state_hook(func: Callable[[], Mapping[str, Any]] | None) -> None:
    global _state_hook
    _state_hook = func


class _Pressed:
    """``pygame.key.get_pressed()`` with the injected keys held too (indexed by key code,
    like pygame's own ``ScancodeWrapper``, to which everything else is handed)."""

    __slots__ = ("_real", "_held")

    def __init__(self, real: Any, held: frozenset[int]) -> None:
        self._real = real
        self._held = held

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            return bool(self._real[key]) or key in self._held
        return self._real[key]

    def __len__(self) -> int:
        return len(self._real)

    def __iter__(self) -> Any:
        return iter(self._real)

    def __repr__(self) -> str:
        return f"<pressed keys, {len(self._held)} held by game-bridge>"


class Wrapper:
    """One wrapped game: its bridge, its patches and its frame boundary."""

    def __init__(self, pygame: Any, bridge: GameBridge, *, port: int, target: str,
                 announce: Callable[[str], None]) -> None:
        self.pg = pygame
        self.bridge = bridge
        self.port = port
        self.target = target
        self.announce = announce
        self.devices = Devices(pygame)
        self.vtime = VirtualTime(frozen=bridge.paused)  # a paused launch starts at time 0, every time
        self.timers = Timers(pygame, self.vtime.now)
        self.frames = 0           # flips seen
        self.started = False
        self.schedule = Schedule(at_once=True, name="pygame")  # input is delivered on the game's thread
        self._flips: collections.deque[float] = collections.deque(maxlen=120)
        self._window: tuple[int, int] | None = None
        self._caption = ""
        self._originals: list[tuple[Any, str, Any]] = []
        self._in_frame = False
        self._first_flip = threading.Event()
        self._published = {int(getattr(pygame, name)) for name in _PUBLISHED if hasattr(pygame, name)}
        self._user_first = int(getattr(pygame, "USEREVENT", 0x8000))

    # ------------------------------------------------------------------ patches
    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def install(self) -> None:
        """Replace pygame's frame, input, event and time functions (before the game runs)."""
        pg = self.pg
        flip, update = pg.display.flip, pg.display.update
        get, poll, wait = pg.event.get, pg.event.poll, pg.event.wait
        get_pressed, get_mods = pg.key.get_pressed, pg.key.get_mods
        get_pos, mouse_pressed = pg.mouse.get_pos, pg.mouse.get_pressed

        def hooked_flip() -> Any:
            result = flip()
            self.on_frame()
            return result

        def hooked_update(*args: Any, **kwargs: Any) -> Any:
            result = update(*args, **kwargs)
            self.on_frame()
            return result

        def hooked_get(*args: Any, **kwargs: Any) -> Any:
            events = get(*args, **kwargs)
            self._seen(events)
            return events

        def hooked_poll() -> Any:
            event = poll()
            self._seen([event])
            return event

        def hooked_wait(*args: Any, **kwargs: Any) -> Any:
            event = wait(*args, **kwargs)
            self._seen([event])
            return event

        def hooked_get_pressed() -> Any:
            return _Pressed(get_pressed(), frozenset(self.devices.keys_down))

        def hooked_get_mods() -> int:
            return int(get_mods()) | self.devices.mods()

        def hooked_get_pos() -> Any:
            return self.devices.pointer if self.devices.pointer is not None else get_pos()

        def hooked_mouse_pressed(num_buttons: int = 3, **kwargs: Any) -> Any:
            real = mouse_pressed(num_buttons, **kwargs)
            return tuple(bool(state) or (index + 1) in self.devices.buttons_down
                         for index, state in enumerate(real))

        for owner, name, replacement in (
                (pg.display, "flip", hooked_flip), (pg.display, "update", hooked_update),
                (pg.event, "get", hooked_get), (pg.event, "poll", hooked_poll), (pg.event, "wait", hooked_wait),
                (pg.key, "get_pressed", hooked_get_pressed), (pg.key, "get_mods", hooked_get_mods),
                (pg.mouse, "get_pos", hooked_get_pos), (pg.mouse, "get_pressed", hooked_mouse_pressed),
                (pg.time, "Clock", self._make_clock), (pg.time, "get_ticks", self._ticks),
                (pg.time, "set_timer", self.timers.set_timer)):
            self._patch(owner, name, replacement)
        if hasattr(pg, "Clock"):  # pygame-ce's alias, pygame.Clock
            self._patch(pg, "Clock", self._make_clock)

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    def _make_clock(self) -> Clock:
        return Clock(self.vtime, on_rate=self._on_rate)

    def _ticks(self) -> int:
        return int(self.vtime.now())

    def _on_rate(self, framerate: float) -> None:
        if 0 < framerate <= 10000:
            self.bridge.fixed_dt = 1.0 / framerate

    # ------------------------------------------------------------------ the frame
    def on_frame(self) -> None:
        """After each flip: count the frame, deliver due input, pump, hold while paused."""
        if self._in_frame:
            return
        self._in_frame = True
        try:
            self.frames += 1
            self._flips.append(time.monotonic())
            self._cache_display()
            if self.started and not self.bridge.running:
                return  # closed: the game is on its way out
            self.bridge.end_sim_frame()
            self.schedule.frame_ended()
            if not self.started:
                self._start()  # serving from the first flip, with that frame counted
            self.vtime.hold()
            self.bridge.hold_until_sim(hz=HOLD_HZ, interrupt=self._quit_pending)
            if self.bridge.running and self.bridge.paused:
                self.vtime.step()    # a stepped frame runs next: exactly one step of time
            else:
                self.vtime.release()
            self.timers.fire()  # the timers due by the next frame's time, read by that frame
        finally:
            self._in_frame = False

    def _quit_pending(self) -> bool:
        """A quit waits in pygame's queue (pumped): SDL turns SIGTERM, and SIGINT when the
        game left it to SDL, into one, and so is a window's close button. A paused game
        would never read it, so the hold lets the game's loop run to see it."""
        try:
            return bool(self.pg.event.peek(self.pg.QUIT))
        except Exception:  # noqa: BLE001 - no display or events yet: nothing to read
            return False

    def _start(self) -> None:
        self.started = True
        self._first_flip.set()
        if self._caption and self._caption != "pygame window":
            self.bridge.name = self._caption
        if start(self.bridge, self.port, self.target, self.announce) is None:
            raise SystemExit(1)

    def _cache_display(self) -> None:
        surface = self.pg.display.get_surface()
        self._window = tuple(surface.get_size()) if surface is not None else None
        caption = self.pg.display.get_caption()
        self._caption = str(caption[0]) if caption else ""

    # ------------------------------------------------------------------ input's timing (game/wrapper/input.py)
    def soon(self, action: Callable[[], None]) -> None:
        self.schedule.soon(action)

    def after_frames(self, frames: int, action: Callable[[], None]) -> None:
        """Run ``action`` at the flip that ends the ``frames``-th frame from now."""
        self.schedule.after_frames(frames, action)

    def pointer_origin(self) -> tuple[int, int]:
        return 0, 0

    def defer(self) -> Any:
        return self.bridge.defer()

    def window_size(self) -> tuple[int, int] | None:
        return self._window

    def waited_for_first_flip(self, timeout_s: float) -> bool:
        return self._first_flip.wait(timeout_s)

    # ------------------------------------------------------------------ events
    def _seen(self, events: Any) -> None:
        published = 0
        for event in events:
            kind = getattr(event, "type", None)
            if kind is None:
                continue
            if kind == self.pg.MOUSEMOTION and not getattr(event, "game_bridge", False):
                self.devices.pointer = None  # a real mouse moved: it owns the pointer again
            if published >= MAX_EVENTS_PER_READ:
                continue
            if kind in self._published or self._user_first <= kind < int(getattr(self.pg, "NUMEVENTS", 0xFFFF)):
                self.bridge.event(*self._describe(event))
                published += 1

    def _describe(self, event: Any) -> tuple[str, ...]:
        pg, kind = self.pg, event.type
        if kind in (pg.KEYDOWN, pg.KEYUP):
            return (f"{'keydown' if kind == pg.KEYDOWN else 'keyup'}:{pg.key.name(event.key)}",)
        if kind in (pg.MOUSEBUTTONDOWN, pg.MOUSEBUTTONUP):
            return (f"{'mousedown' if kind == pg.MOUSEBUTTONDOWN else 'mouseup'}:{event.button}",)
        if kind == pg.TEXTINPUT:
            return ("text",)
        if kind == pg.QUIT:
            return ("quit",)
        return (f"userevent:{kind - self._user_first}",)

    # ------------------------------------------------------------------ state and pictures
    def state(self) -> dict[str, Any]:
        """``/state`` (HTTP thread, under the bridge's lock): what the last flip cached,
        the injected devices, and the game's own hook if it set one. ``pygame`` has it
        all; the digest, which keeps scalars, gets the caption as ``ui.screen`` and the
        window, held keys and buttons, pointer and frame rate (0 while held) as ``game``
        scalars (the hook's own ``ui`` and ``game`` fields win)."""
        now = time.monotonic()
        # The frame rate of a held game is 0: it runs no frames of its own (and what it would
        # measure, steps a second, is the agent's pace, which would make /state differ run to run).
        recent = [] if self.bridge.paused else [t for t in self._flips if now - t <= 1.0]
        window = self._window
        keys = sorted(self.devices.names.get(k, str(k)) for k in list(self.devices.keys_down))
        buttons = sorted(self.devices.buttons_down)
        pointer = self.devices.pointer
        doc: dict[str, Any] = {"pygame": {
            "target": self.target, "caption": self._caption, "flips": self.frames,
            "window": {"width": window[0], "height": window[1]} if window else None,
            "fps": len(recent), "keysDown": keys, "buttonsDown": buttons,
            "pointer": list(pointer) if pointer is not None else None}}
        doc["ui"] = {"screen": self._caption or self.target}
        doc["game"] = {"window": f"{window[0]}x{window[1]}" if window else None, "fps": len(recent),
                       "keysDown": ",".join(keys), "buttonsDown": ",".join(map(str, buttons)),
                       "pointer": f"{pointer[0]},{pointer[1]}" if pointer is not None else None}
        hook = _state_hook
        if hook is not None:
            extra = hook()
            if not isinstance(extra, Mapping):
                raise TypeError(f"the game's state hook returned a {type(extra).__name__}, not a dict")
            for key, value in extra.items():
                if key in ("ui", "game") and isinstance(value, Mapping):
                    doc[key] = {**doc[key], **value}
                elif key != "pygame":
                    doc[key] = value
        return doc

    def capture(self) -> Any:
        """The display surface, for ``/screenshot`` (game thread, inside the flip)."""
        surface = self.pg.display.get_surface()
        if surface is None:
            raise RuntimeError("the game has no window (pygame.display.set_mode has not been called, "
                               "or the display was closed)")
        return surface

    def post_quit(self) -> None:
        """``close``: what the window's close button does."""
        self.pg.event.post(self.pg.event.Event(self.pg.QUIT, game_bridge=True))

    def finish(self) -> None:
        self.bridge.stop()
        self.uninstall()
