"""The one shape of waiting (check, sleep a little longer, until a deadline), how a call's wait
is cancelled, and how a long wait reports progress (docs/design.md, "Cancelling a call").
Standard library only; the clock and the sleep are injectable."""

from __future__ import annotations

import contextvars
import math
import sys
import threading
import time
from typing import Any, Callable, ContextManager, TypeVar, Union

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


#: The longest a cancelled call's waits go on (sleeps shorter than this are not
#: interrupted, only checked before and after).
CANCEL_LATENCY_S = 0.05


class Cancelled(BaseException):
    """The client cancelled the call this work belongs to: stop and unwind."""

    def __init__(self, message: str = "The call was cancelled by the client.") -> None:
        super().__init__(message)


class CancelToken:
    """Set once, by whoever owns the call; read by every wait in it. Thread-safe. Every
    call has one, and most are never waited on nor cancelled: the Event a wait sleeps on
    is made by the first wait."""

    def __init__(self) -> None:
        self._cancelled = False
        self._event: threading.Event | None = None
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Cancel: wake every wait and run every registered callback (once)."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a callback that fails must not stop the others
                pass

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s``; True (at once) when cancelled meanwhile."""
        with self._lock:
            if self._cancelled:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(max(0.0, timeout_s))

    def add_callback(self, callback: Callable[[], None]) -> int | None:
        """Run ``callback`` on cancellation; None (and not run) if already cancelled."""
        with self._lock:
            if self._cancelled:
                return None
            self._next += 1
            self._callbacks[self._next] = callback
            return self._next

    def remove_callback(self, handle: int | None) -> None:
        if handle is not None:
            with self._lock:
                self._callbacks.pop(handle, None)


_current: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("game_bridge_cancel", default=None)


def current_token() -> CancelToken | None:
    """The token of the call this code runs for, if any."""
    return _current.get()


class _Set:
    """``with`` a context variable set to a value, then reset: the scopes below, as classes
    (every call enters several; a generator-based context manager costs several times more)."""

    __slots__ = ("_var", "_value", "_reset")

    def __init__(self, var: "contextvars.ContextVar[Any]", value: Any) -> None:
        self._var = var
        self._value = value

    def __enter__(self) -> None:
        self._reset = self._var.set(self._value)

    def __exit__(self, *_exc: object) -> None:
        self._var.reset(self._reset)


class _Unchanged:
    """``with`` that changes nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_exc: object) -> None:
        return None


_UNCHANGED = _Unchanged()


def cancel_scope(token: CancelToken | None) -> ContextManager[None]:
    """Run the block as part of the call ``token`` belongs to."""
    return _Set(_current, token)


def cancel_requested() -> bool:
    """True when the current call has been cancelled (without raising)."""
    token = _current.get()
    return token is not None and token.cancelled


def check_cancelled() -> None:
    """Raise :class:`Cancelled` when the current call has been cancelled."""
    token = _current.get()
    if token is not None and token.cancelled:
        raise Cancelled()


#: Linux's prctl option for a thread's timer slack, and the slack asked for (ns).
PR_SET_TIMERSLACK = 29
FINE_TIMER_SLACK_NS = 1000
_fine_timers = threading.local()


def fine_timers() -> None:
    """Make this thread's timed waits end when asked: Linux lets a thread's sleeps run up to
    its timer slack late (50 us by default), and a confirmation's sleep until just before
    a predicted frame start then polls that much after it (a 300 us sleep measured 384 us,
    335 with this). Once per thread; nothing where the system has no such setting."""
    if getattr(_fine_timers, "done", False):
        return
    _fine_timers.done = True
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, FINE_TIMER_SLACK_NS, 0, 0, 0)
        except (OSError, AttributeError, ImportError):
            pass


def sleep(seconds: float) -> None:
    """``time.sleep`` that ends early, raising :class:`Cancelled`, when the call is
    cancelled. Short sleeps (the sub-millisecond polls of a confirmation) stay plain
    sleeps, checked before and after, so they cost what they cost before. The thread's
    timers are made precise first (:func:`fine_timers`)."""
    fine_timers()
    token = _current.get()
    if token is None:
        if seconds > 0:
            time.sleep(seconds)
        return
    if token.cancelled:
        raise Cancelled()
    if seconds <= CANCEL_LATENCY_S:
        if seconds > 0:
            time.sleep(seconds)
    elif token.wait(seconds):
        raise Cancelled()
    if token.cancelled:
        raise Cancelled()


_cancellable_sleep = sleep  # poll_until's ``sleep`` argument hides the name


#: How many recent naps a :class:`Naps` learns from, how many it needs first, and the most
#: it wakes early by.
NAP_SAMPLES = 16
NAP_MIN_SAMPLES = 4
NAP_MAX_EARLY_S = 0.0005


class Naps:
    """Sleeps aimed at a moment. A sleep ends late by the thread's timer slack and, on a
    virtual machine, by the wake-up of a halted CPU (30-50 us measured on the 2-CPU machine
    the performance docs describe): a poll aimed just before a frame would land after it.
    This learns how late its recent sleeps woke (the median of the last
    :data:`NAP_SAMPLES`) and asks that much less, never more than half of a pause."""

    def __init__(self, sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
        self._sleep = sleep
        self._clock = clock
        self._late: list[float] = []

    def early_s(self) -> float:
        """How much earlier than asked a nap now aims (0 until it has learned)."""
        samples = sorted(self._late)
        if len(samples) < NAP_MIN_SAMPLES:
            return 0.0
        return min(samples[len(samples) // 2], NAP_MAX_EARLY_S)

    def nap(self, seconds: float) -> None:
        """Sleep about ``seconds`` (see the class docstring); none at all is asked as a sleep
        of 0 (a cancellable sleep still checks for cancellation), and learns nothing."""
        if seconds <= 0:
            self._sleep(0.0)
            return
        asked = seconds - min(self.early_s(), seconds / 2)
        started = self._clock()
        self._sleep(asked)
        late = self._clock() - started - asked
        self._late.append(late if late > 0 else 0.0)
        if len(self._late) > NAP_SAMPLES:
            del self._late[0]


class _OnCancel:
    __slots__ = ("_callback", "_token", "_handle")

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback

    def __enter__(self) -> None:
        token = self._token = _current.get()
        if token is not None:
            handle = self._handle = token.add_callback(self._callback)
            if handle is None:
                raise Cancelled()

    def __exit__(self, *_exc: object) -> None:
        if self._token is not None:
            self._token.remove_callback(self._handle)


def on_cancel(callback: Callable[[], None]) -> ContextManager[None]:
    """Run ``callback`` at once if the call is cancelled while the block runs (from the
    cancelling thread: it must be quick and thread-safe, e.g. shutting down a socket).
    Raises :class:`Cancelled` on entry when the call is already cancelled."""
    return _OnCancel(callback)


#: Seconds between progress reports of one call (and before its first).
PROGRESS_INTERVAL_S = 0.3
ProgressFn = Callable[[float, "float | None", str], None]


class _Throttled:
    """A progress callback sent at most once every ``interval_s``, the first after it."""

    def __init__(self, callback: ProgressFn, interval_s: float, clock: Callable[[], float]) -> None:
        self.callback = callback
        self.interval_s = interval_s
        self.clock = clock
        self.next_s = clock() + interval_s
        self.lock = threading.Lock()

    def __call__(self, done: float, total: float | None, message: str) -> None:
        now = self.clock()
        with self.lock:
            if now < self.next_s:
                return
            self.next_s = now + self.interval_s
        self.callback(done, total, message)


_progress: contextvars.ContextVar[_Throttled | None] = contextvars.ContextVar("game_bridge_progress", default=None)


def progress_scope(callback: ProgressFn | None, *, interval_s: float | None = None,
                   clock: Callable[[], float] = time.monotonic) -> ContextManager[None]:
    """Run the block with ``callback`` receiving its waits' progress, at most once every
    ``interval_s`` (default :data:`PROGRESS_INTERVAL_S`); None: no progress."""
    if callback is None and _progress.get() is None:
        return _UNCHANGED  # no progress in, none out: nothing to set (most calls)
    every = PROGRESS_INTERVAL_S if interval_s is None else interval_s
    return _Set(_progress, _Throttled(callback, every, clock) if callback is not None else None)


def current_progress() -> _Throttled | None:
    """The current call's progress reporter (to hand to a thread of its own), if any."""
    return _progress.get()


def progress_of(reporter: _Throttled | None) -> ContextManager[None]:
    """Run the block (in another thread) reporting to a call's reporter from :func:`current_progress`."""
    return _Set(_progress, reporter)


def report_progress(done: float, total: float | None, message: str) -> None:
    """Tell the client how far the current call's wait is (when it asked; throttled). A
    broken callback never breaks the wait."""
    reporter = _progress.get()
    if reporter is None:
        return
    try:
        reporter(done, total, message)
    except Exception:  # noqa: BLE001 - progress is advice; the wait goes on
        pass


def poll_until(check: Callable[[], T | None], deadline: Deadline, *, first_s: float, max_s: Seconds,
               growth: float = 1.5, sleep: Callable[[float], None] | None = None) -> T | None:
    """Call ``check`` until it returns something other than None, and return that, or
    None once the deadline has passed. ``check`` runs at least once, and once more when a
    sleep reaches the deadline. Between calls, sleep ``first_s``, then ``growth`` times
    longer each time up to ``max_s`` (a number, or a callable asked each time), never
    past the deadline. ``check`` may raise to end the wait. A cancelled call ends it
    with :class:`Cancelled` (``sleep`` defaults to this module's cancellable :func:`sleep`;
    a sleep of one's own should not outlast :data:`CANCEL_LATENCY_S` by much)."""
    pause = sleep or _cancellable_sleep
    interval = first_s
    while True:
        check_cancelled()
        result = check()
        if result is not None:
            return result
        if deadline.expired:
            return None
        cap = max_s() if callable(max_s) else max_s
        pause(min(interval, cap, deadline.remaining_s()))
        interval = min(interval * growth, cap)


__all__ = ["CANCEL_LATENCY_S", "PROGRESS_INTERVAL_S", "CancelToken", "Cancelled", "Deadline", "cancel_requested",
           "Naps", "cancel_scope", "check_cancelled", "current_progress", "current_token", "on_cancel", "poll_until",
           "progress_of", "progress_scope", "report_progress", "sleep"]
