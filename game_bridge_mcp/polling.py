"""The one shape of waiting: check, and until it succeeds or the deadline passes, sleep a
little longer each time. Readiness after a launch, a port going quiet after ``close``, a
process tree going away, and ``wait_for`` all wait this way; only the command
confirmation does not (it sleeps until a predicted frame start: ``wire/client.py``).

Pure standard library; the clock and the sleep are injectable, so a caller can wake
early (a launched game's exit) and tests need no real time.
"""

from __future__ import annotations

import math
import time
from typing import Callable, TypeVar, Union

T = TypeVar("T")
Seconds = Union[float, Callable[[], float]]


class Deadline:
    """A point in time, ``seconds`` from now on ``clock``."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic,
                 start: float | None = None) -> None:
        """``seconds`` after ``start`` (default: now)."""
        self._clock = clock
        self.at = (clock() if start is None else start) + max(0.0, seconds)

    def remaining_s(self) -> float:
        return max(0.0, self.at - self._clock())

    def remaining_ms(self) -> int:
        """Milliseconds left, rounded up and at least 1: a request given this much ends at
        or after the deadline, never just before it."""
        return max(1, math.ceil((self.at - self._clock()) * 1000))

    @property
    def expired(self) -> bool:
        return self._clock() >= self.at


def poll_until(check: Callable[[], T | None], deadline: Deadline, *, first_s: float, max_s: Seconds,
               growth: float = 1.5, sleep: Callable[[float], None] = time.sleep) -> T | None:
    """Call ``check`` until it returns something other than None, and return that, or
    None once the deadline has passed. ``check`` runs at least once, and once more when a
    sleep reaches the deadline. Between calls, sleep ``first_s``, then ``growth`` times
    longer each time up to ``max_s`` (a number, or a callable asked each time), never
    past the deadline. ``check`` may raise to end the wait."""
    interval = first_s
    while True:
        result = check()
        if result is not None:
            return result
        if deadline.expired:
            return None
        cap = max_s() if callable(max_s) else max_s
        sleep(min(interval, cap, deadline.remaining_s()))
        interval = min(interval * growth, cap)


__all__ = ["Deadline", "poll_until"]
