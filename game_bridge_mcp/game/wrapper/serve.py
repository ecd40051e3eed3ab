"""A wrapper's GameBridge, assembled the same way for every engine (the clock is the
wrapper's, the ``input`` toolset is advertised, a launch that asked for ``--paused``
starts paused), its start on the port it was given, what it says on stderr, and the
loop that drives an engine frame by frame for wrappers whose engine runs no loop of its
own (the browser's page, a Gymnasium environment)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..kit import GameBridge
from ..kit.clock import START_PAUSED_ENV
from .input import TOOLSET

#: The paused note after "serving on ...".
PAUSED_NOTE = " (paused: send resume or step)"


class Say:
    """One line on stderr, prefixed with the wrapper's name (stdout may be the game's)."""

    def __init__(self, name: str) -> None:
        self.prefix = f"game-bridge {name}: "

    def __call__(self, message: str) -> None:
        sys.stderr.write(f"{self.prefix}{message}\n")
        sys.stderr.flush()


class Late:
    """The engine, once it exists: the bridge is made first (the engine is given it), and
    its ``state`` and ``on_close`` reach the engine through this."""

    def __init__(self) -> None:
        self.engine: Any = None

    def state(self) -> Mapping[str, Any]:
        return self.engine.state()  # type: ignore[no-any-return]


def assemble(name: str, version: str, *, description: str, input_help: str, paused: bool,
             state: Callable[[], Mapping[str, Any]], on_close: Callable[[], None],
             toolsets: Mapping[str, str] | None = None, register: bool = True, snapshot: Any = False) -> GameBridge:
    """The wrapper's GameBridge: its clock on, paused at the start when ``paused`` (or
    GAME_BRIDGE_START_PAUSED=1), events at the game's simulation frames (the loop also
    turns while the game is held), the ``input`` toolset described as ``input_help``, and
    any toolsets of the wrapper's own; ``register=False`` writes no registry entry;
    ``snapshot`` off unless the wrapper gives its ``(save, load)`` hooks."""
    environ = dict(os.environ)
    if paused:
        environ[START_PAUSED_ENV] = "1"
    # No snapshot by default: the game's state is not the wrapper's to copy; the bridge
    # re-executes it (docs/states.md), which the wrapper makes deterministic. A wrapper that
    # can save its engine's state itself passes its (save, load) hooks.
    return GameBridge(name, version, state=state, on_close=on_close, clock=True, environ=environ,
                      description=description, toolsets={TOOLSET: input_help, **(toolsets or {})}, register=register,
                      snapshot=snapshot, sim_frame_events=True)


def add_commands(bridge: GameBridge, commands: list[Callable[..., Any]], toolset: str = TOOLSET) -> None:
    """``commands`` served in ``toolset``, and the toolset advertised."""
    for func in commands:
        bridge.command(func, toolset=toolset)
    bridge.advertise(toolset)


def start(bridge: GameBridge, port: int, target: str, say: Callable[[str], None]) -> int | None:
    """Serve on ``port`` and say where; None (said why) when the port cannot be had."""
    try:
        bound = bridge.start(port)
    except OSError as exc:
        say(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}")
        return None
    paused = PAUSED_NOTE if bridge.paused else ""
    say(f"{target} ({bridge.name}) serving on http://127.0.0.1:{bound}{paused}")
    return bound


class Engine(Protocol):
    """An engine the wrapper runs frame by frame (:func:`drive`)."""

    #: Why it ended (None while it runs).
    gone: str | None

    def frames(self, count: int) -> None:
        """Run ``count`` frames, each ended for the kit (``bridge.end_sim_frame``) and for
        the input due at its end."""

    def deliver(self) -> None:
        """The input the commands just applied asked for."""

    def frames_to_due(self) -> int:
        """Frames until input is due (a run of frames stops there)."""
        ...

    def idle(self) -> None:
        """Paused, nothing owed: whatever the engine does while held."""


def drive(engine: Engine, bridge: GameBridge, *, hz: float, max_chunk: int) -> None:
    """The frames, until the bridge stops or the engine ends: one per ``1/hz`` s while
    running; while paused, the frames steps owe (in runs up to the next input due, at most
    ``max_chunk``), serving commands in between."""
    period = 1.0 / hz
    next_tick = time.monotonic()
    while bridge.running and engine.gone is None:
        bridge.pump()
        engine.deliver()  # the input those commands asked for
        if not bridge.running or engine.gone is not None:
            break
        if bridge.paused:
            owed = bridge.owed_frames
            if owed > 0:
                engine.frames(min(owed, engine.frames_to_due(), max_chunk))
                if not bridge.stepping:
                    bridge.apply_queued()  # the commands that waited behind the finished step
                    engine.deliver()
            else:
                engine.idle()
                bridge.wait_for_work(period)
            next_tick = time.monotonic()
            continue
        engine.frames(1)  # (and a look at the engine: a command completing now sees this frame)
        next_tick += period
        delay = next_tick - time.monotonic()
        if delay > 0:
            bridge.wait_for_work(delay)
        elif delay < -period:
            next_tick = time.monotonic()  # a frame or more behind: no catch-up burst
