"""What makes a wrapped pygame game do the same thing every time it is sent the same
commands at the same frames (docs/states.md, re-execution): its random generators seeded
before its code runs (``random``'s, and numpy's global one when the game imports numpy),
and pygame's timers (``pygame.time.set_timer``) on the game's virtual time, so a timer
fires after the same frames whether the game runs or is stepped."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import random
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

#: The most times one timer fires at one frame (a game stepped far catches up, bounded).
MAX_CATCH_UP = 10


def seed_generators(seed: int) -> None:
    """Seed ``random`` now, and numpy's global generator now or when the game imports it."""
    random.seed(seed)
    numpy = sys.modules.get("numpy.random")
    if numpy is not None:
        _seed_numpy(numpy, seed)
    elif not any(isinstance(finder, _SeedNumpy) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SeedNumpy(seed))


def _seed_numpy(module: ModuleType, seed: int) -> None:
    try:
        module.seed(seed % 2**32)
    except Exception:  # noqa: BLE001 - a numpy without the legacy global generator: nothing to seed
        pass


class _SeedNumpy(importlib.abc.MetaPathFinder):
    """Seeds ``numpy.random`` right after the game first imports it."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != "numpy.random":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module
        seed = self.seed

        def seeded(module: ModuleType) -> None:
            exec_module(module)
            _seed_numpy(module, seed)

        spec.loader = _Seeded(loader, seeded)
        return spec


class _Seeded(importlib.abc.Loader):
    def __init__(self, loader: Any, run: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._run = run

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._run(module)


@dataclass
class _Timer:
    event: Any
    interval: float
    due: float
    loops: int  # 0: forever


class Timers:
    """``pygame.time.set_timer`` on virtual time: :meth:`fire` (at each frame boundary)
    posts the events whose time has come by ``now()``."""

    def __init__(self, pygame: Any, now: Callable[[], float]) -> None:
        self.pg = pygame
        self.now = now
        self._timers: dict[Any, _Timer] = {}

    def set_timer(self, event: Any, millis: Any, loops: int = 0) -> None:
        key = event.type if hasattr(event, "type") else int(event)
        interval = float(millis)
        if interval <= 0:
            self._timers.pop(key, None)
            return
        self._timers[key] = _Timer(event, interval, self.now() + interval, max(0, int(loops)))

    def fire(self) -> None:
        if not self._timers:
            return
        now = self.now()
        for key, timer in list(self._timers.items()):
            fired = 0
            while timer.due <= now and fired < MAX_CATCH_UP:
                self._post(timer.event)
                fired += 1
                timer.due += timer.interval
                if timer.loops:
                    timer.loops -= 1
                    if timer.loops == 0:
                        del self._timers[key]
                        break
            if timer.due <= now:  # far behind: the rest of the missed firings are dropped
                timer.due = now + timer.interval

    def _post(self, event: Any) -> None:
        pg = self.pg
        try:
            pg.event.post(event if hasattr(event, "type") else pg.event.Event(int(event)))
        except Exception:  # noqa: BLE001 - a full queue or no display: the timer's event is lost, as SDL's would be
            pass


__all__ = ["Timers", "seed_generators"]
