"""The kit's own game loop (:func:`run`, and :func:`hold_until_sim` for a loop it cannot own),
written only against :class:`GameBridge`'s public API, as a game with its own loop would be."""

from __future__ import annotations

import time
import threading
from typing import Any, Callable, Protocol


class Loopable(Protocol):
    """The part of :class:`GameBridge`'s public API a loop uses."""

    lock: threading.RLock

    @property
    def running(self) -> bool: ...

    @property
    def paused(self) -> bool: ...

    @property
    def stepping(self) -> bool: ...

    @property
    def fixed_dt(self) -> float: ...

    @fixed_dt.setter
    def fixed_dt(self, value: float) -> None: ...

    def pump(self) -> int: ...

    def apply_queued(self) -> int: ...

    def sim_dt(self, real_dt: float | None = None) -> float | None: ...

    def end_sim_frame(self) -> None: ...

    def wait_for_work(self, timeout_s: float) -> None: ...

    def stop(self) -> None: ...


def run(bridge: Loopable, update: Callable[[], Any] | None, hz: float,
        render: Callable[[], Any] | None) -> None:
    if not hz > 0:
        raise ValueError(f"hz must be positive, got {hz!r}")
    period = 1.0 / hz
    bridge.fixed_dt = period
    next_tick = time.monotonic()
    try:
        while bridge.running:
            bridge.pump()
            if not bridge.running:
                break
            simulate(bridge, update, time.monotonic() + period)
            if render is not None:
                with bridge.lock:
                    render()
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay > 0 and not bridge.stepping:
                bridge.wait_for_work(delay)
            else:
                next_tick = time.monotonic()  # behind (or stepping): no catch-up burst
    finally:
        bridge.stop()


def simulate(bridge: Loopable, update: Callable[[], Any] | None, deadline: float) -> int:
    """One loop frame's updates: one when running; while stepping, as many as the steps
    owe (the finished step's followers applied in between) until ``deadline``."""
    ran = 0
    while bridge.running and bridge.sim_dt() is not None:
        if update is not None:
            with bridge.lock:
                update()
        bridge.end_sim_frame()
        ran += 1
        if not bridge.paused:
            return ran
        if not bridge.stepping:
            bridge.apply_queued()  # the commands that waited behind the finished step
            if not bridge.stepping:
                return ran
        if time.monotonic() >= deadline:
            return ran
    return ran


def hold_until_sim(bridge: Loopable, hz: float, interrupt: Callable[[], bool] | None = None) -> bool:
    period = 1.0 / hz
    while True:
        bridge.pump()
        if not bridge.running:
            return False
        if bridge.sim_dt() is not None:
            return True
        if interrupt is not None and interrupt():
            return True  # the game's own loop must run now (to read a quit, say)
        bridge.wait_for_work(period)
