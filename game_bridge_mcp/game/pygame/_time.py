"""The wrapped game's sense of time: ``pygame.time.Clock`` and ``get_ticks`` replaced by a
:class:`VirtualTime` that stops while the game is held and takes fixed steps while stepped
(docs/design.md, "The pygame wrapper")."""

from __future__ import annotations

import collections
import time
from typing import Callable

#: The step used when the game never said its frame rate (``tick()`` with no argument).
DEFAULT_FRAME_MS = 1000.0 / 60.0


class VirtualTime:
    """Milliseconds as the game should see them. ``real_ms`` is the real clock."""

    def __init__(self, real_ms: Callable[[], float] | None = None, *, frozen: bool = False) -> None:
        self._real = real_ms or (lambda: time.monotonic() * 1000.0)
        self._start = self._real()
        self._excluded = 0.0
        #: ``frozen``: a game started paused sees no time pass until it is stepped, not even
        #: while it starts (which takes however long it takes): every launch starts at 0.
        self._frozen: float | None = 0.0 if frozen else None
        #: The frame's step while stepping (the game's ``tick`` rate when it gave one).
        self.frame_ms = DEFAULT_FRAME_MS

    def now(self) -> float:
        if self._frozen is not None:
            return self._frozen
        return self._real() - self._start - self._excluded

    @property
    def frozen(self) -> bool:
        """True while the game is held or stepped (time moves only by steps)."""
        return self._frozen is not None

    def hold(self) -> None:
        """The game is held at its flip: time stops."""
        if self._frozen is None:
            self._frozen = self.now()

    def step(self) -> None:
        """One stepped frame is about to run: time advances by exactly one step."""
        self.hold()
        assert self._frozen is not None
        self._frozen += self.frame_ms

    def release(self) -> None:
        """The game runs freely again, continuing from the time it had."""
        if self._frozen is not None:
            self._excluded = self._real() - self._start - self._frozen
            self._frozen = None


class Clock:
    """A stand-in for ``pygame.time.Clock`` that reads :class:`VirtualTime`."""

    def __init__(self, vtime: VirtualTime, on_rate: Callable[[float], None] | None = None) -> None:
        self._vtime = vtime
        self._on_rate = on_rate
        self._last = vtime.now()
        self._last_real = time.monotonic()
        self._time = 0.0
        self._raw = 0.0
        self._recent: collections.deque[float] = collections.deque(maxlen=10)

    def _tick(self, framerate: float, busy: bool) -> int:
        if framerate and framerate > 0:
            step = 1000.0 / framerate
            if step != self._vtime.frame_ms:
                self._vtime.frame_ms = step
                if self._on_rate is not None:
                    self._on_rate(framerate)
        if self._vtime.frozen:
            # Stepping (or held): no sleeping, and each frame lasts exactly one step.
            elapsed = self._vtime.frame_ms
            self._raw = 0.0
            self._last = self._vtime.now()
            self._last_real = time.monotonic()
        else:
            self._raw = (time.monotonic() - self._last_real) * 1000.0
            if framerate and framerate > 0:
                wait_s = (1000.0 / framerate - self._raw) / 1000.0
                if wait_s > 0:
                    if busy:
                        deadline = time.monotonic() + wait_s
                        while time.monotonic() < deadline:
                            pass
                    else:
                        time.sleep(wait_s)
            now = self._vtime.now()
            elapsed = max(0.0, now - self._last)
            self._last = now
            self._last_real = time.monotonic()
        self._time = elapsed
        self._recent.append(elapsed)
        return int(round(elapsed))

    def tick(self, framerate: float = 0) -> int:
        """Milliseconds since the previous tick (a fixed step while stepping); with
        ``framerate``, sleep so the loop runs at most that many frames a second."""
        return self._tick(framerate, busy=False)

    def tick_busy_loop(self, framerate: float = 0) -> int:
        return self._tick(framerate, busy=True)

    def get_time(self) -> int:
        return int(round(self._time))

    def get_rawtime(self) -> int:
        return int(round(self._raw))

    def get_fps(self) -> float:
        if not self._recent:
            return 0.0
        average = sum(self._recent) / len(self._recent)
        return 1000.0 / average if average > 0 else 0.0

    def __repr__(self) -> str:
        return f"<Clock(fps={self.get_fps():.2f})>"
