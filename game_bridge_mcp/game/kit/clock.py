"""The simulation clock: paused or running, frames owed by ``step``, ``simFrame``, and timers
that fire after a number of simulation frames. Pure bookkeeping, called with the kit's lock
held."""

from __future__ import annotations

from typing import Annotated, Any, Callable, Protocol

from .args import Arg, CommandSpec, spec_from_function
from .outcomes import Pending
from ...contract import CLOCK, ENV_START_PAUSED, MAX_STEP_FRAMES

#: Environment variable that starts a game with the clock paused.
START_PAUSED_ENV = ENV_START_PAUSED
_TRUE = frozenset({"1", "true", "yes", "on"})


def start_paused(value: str | None) -> bool:
    """Whether ``GAME_BRIDGE_START_PAUSED``'s value asks for a paused start."""
    return value is not None and value.strip().lower() in _TRUE


class Clock:
    """``enabled`` is the game's opt-in; without it the clock never pauses and
    ``sim_frame`` is left to the game (``GameBridge.sim_frame``)."""

    def __init__(self, enabled: bool, paused: bool = False, fixed_dt: float = 1 / 60) -> None:
        self.enabled = enabled
        self.paused = enabled and paused
        self.sim_frame = 0
        self.fixed_dt = fixed_dt
        self.owed = 0  # simulation frames a step still has to run
        self._timers: list[list[Any]] = []  # [frames left, callback]
        #: The step under way: its completion, the frames it asked for, simFrame at its start.
        self.step: tuple[Pending, int, int] | None = None
        #: Run when a step is cut short (a wrapper lets go of the input it holds).
        self.on_interrupt: list[Callable[[], None]] = []

    def interrupt(self) -> None:
        """``pause`` while a step runs: the step ends at the frame it has reached (it
        completes, saying so and how far it got), and what waits on it goes on."""
        if self.step is None:
            return
        pending, asked, start = self.step
        self.step = None
        self.owed = 0
        if pending.done:
            return
        for release in self.on_interrupt:
            release()
        pending.complete({"simFrame": self.sim_frame, "frames": self.sim_frame - start, "interrupted": True,
                          "asked": asked})

    @property
    def stepping(self) -> bool:
        return self.paused and self.owed > 0

    def dt(self, real_dt: float | None = None) -> float | None:
        """None: do not update this frame (paused, nothing owed). Otherwise the time step:
        ``fixed_dt`` while stepping, else ``real_dt`` (``fixed_dt`` when not given)."""
        if not self.paused:
            return self.fixed_dt if real_dt is None else real_dt
        return self.fixed_dt if self.owed > 0 else None

    def owe(self, frames: int) -> None:
        """A step: run ``frames`` more simulation frames although paused."""
        self.owed += frames

    def after_frames(self, frames: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` once ``frames`` more simulation frames have ended."""
        self._timers.append([frames, callback])

    def end_sim_frame(self) -> list[Callable[[], None]]:
        """One simulation frame has run: count it, pay off a step, and return the timers
        that are now due (the caller runs them)."""
        if self.enabled:
            self.sim_frame += 1
        if self.paused and self.owed > 0:
            self.owed -= 1
        due: list[Callable[[], None]] = []
        if self._timers:
            for timer in self._timers:
                timer[0] -= 1
            due = [timer[1] for timer in self._timers if timer[0] <= 0]
            self._timers = [timer for timer in self._timers if timer[0] > 0]
        return due


class Pausable(Protocol):
    """What the clock's commands need of the game's bridge."""

    def set_paused(self, paused: bool) -> None: ...

    def defer(self, *, hold: bool = False) -> Pending: ...


def clock_commands(bridge: Pausable, clock: Clock) -> list[CommandSpec]:
    """``pause``, ``resume`` and ``step`` for ``bridge``, whose clock is ``clock``."""

    def pause(paused: Annotated[bool, "false resumes (the same as resume)"] = True) -> dict[str, Any]:
        """Stop the game's clock: the world holds still (simFrame stops; frame keeps
        counting and commands still run) until resume, or until step advances it."""
        bridge.set_paused(paused)
        return {"paused": clock.paused, "simFrame": clock.sim_frame}

    def resume() -> dict[str, Any]:
        """Restart the game's clock after pause."""
        bridge.set_paused(False)
        return {"paused": False, "simFrame": clock.sim_frame}

    def step(frames: Annotated[int, Arg(f"Simulation frames to run, 1 to {MAX_STEP_FRAMES}.",
                                        minimum=1, maximum=MAX_STEP_FRAMES)] = 1) -> Pending:
        """Advance the paused game exactly this many simulation frames (fixed time step);
        completes once they have run. A running game is paused first. A pause sent
        meanwhile ends it at the frame it has reached (its result says interrupted)."""
        bridge.set_paused(True)
        pending = bridge.defer(hold=True)
        clock.owe(frames)
        clock.step = (pending, frames, clock.sim_frame)
        pending.complete_after_sim_frames(frames, lambda: {"simFrame": clock.sim_frame, "frames": frames})
        return pending

    return [spec_from_function(command, toolset=CLOCK) for command in (pause, resume, step)]
