"""The one interface of the ways a command is confirmed (:class:`Strategy`, given a
:class:`Job`), the endpoints they ask (:class:`Requests`), and :func:`verdict`, what every
one of them reads in a snapshot."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from ..contract import CONFIRM_FRAMES, CONFIRMED_BY_FRAMES, CONFIRMED_BY_ID, PENDING
from ..errors import CommandTimeout
from .known import Known, counter
from .transport import DEFAULT_MAX_BYTES

#: A command on a paused game with ``clock`` that is not done after this many of the
#: game's loop frames (it applies queued commands on its next one) waits for the clock to
#: move: input is delivered with the next simulated frame, a command behind a running
#: ``step`` after it. It is answered ``pending`` then (see :meth:`~.client.GameClient.command_and_sync`),
#: and a held ``/state?after=`` is asked for a short hold at a time meanwhile.
PENDING_FRAMES = 3


class Requests(Protocol):
    """The game's endpoints a confirmation asks (the GameClient's, which learn from every answer)."""

    def health(self, *, timeout_ms: int | None = None) -> dict[str, Any]: ...

    def state(self, *, timeout_ms: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
              digest: bool = False) -> dict[str, Any]: ...

    def held_state(self, command_id: int, wait_ms: int, *, view: bool, timeout_s: float) -> dict[str, Any]: ...

    def command(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                timeout_ms: int | None = None) -> dict[str, Any]: ...


@dataclass(slots=True)
class Job:
    """One command being confirmed: what the game answered when it queued it, by when it
    must be confirmed (``deadline`` on the client's clock, ``total_ms`` as asked), whether
    a digest of the state after it is all the caller needs, and whether it may wait for a
    paused game's clock (``pending``)."""

    cmd: str
    command_id: int | None
    queued_frame: int | None
    deadline: float
    total_ms: int
    answer: dict[str, Any]
    digest: bool = False
    pending: bool = False

    def outcome(self, confirmation: str, state: dict[str, Any]) -> dict[str, Any]:
        return {"answer": self.answer, "commandId": self.command_id, "confirmation": confirmation, "state": state}


class Strategy(Protocol):
    """One way to see a command applied."""

    def confirm(self, job: Job) -> dict[str, Any] | None:
        """The outcome (``{"answer", "commandId", "confirmation", "state"}``), or None when
        the game broke the rule this way relies on (the caller confirms another way).
        Raises CommandTimeout when the deadline passes first."""
        ...


def remaining_ms(deadline: float, clock: Callable[[], float]) -> int:
    """What is left until ``deadline``, rounded up, so a poll that times out has always
    reached the command's deadline (rounded down, it could end just before it and
    surface as GameOffline)."""
    return max(1, math.ceil((deadline - clock()) * 1000))


def verdict(job: Job, base_frame: int | None, state: dict[str, Any], known: Known) -> dict[str, Any] | None:
    """What one snapshot says of the command: the outcome, None (not yet), or a
    CommandTimeout raised for a game that restarted meanwhile. A job that may wait for
    the clock is answered ``pending`` once its game stays paused PENDING_FRAMES frames on."""
    port, cmd = known.port, job.cmd
    command_id, queued_frame = job.command_id, job.queued_frame
    completed = counter(state.get("completedCommandId"))
    frame = counter(state.get("frame"))
    if base_frame is not None and frame is not None and frame < base_frame:
        raise CommandTimeout(port, cmd, job.total_ms, message=(
            f"The game on port {port} restarted (frame went back from {base_frame} "
            f"to {frame}) while command '{cmd}' was pending; it was probably lost. Send it again."),
            lastFrame=frame)
    if command_id is not None and completed is not None:
        if completed < command_id:
            start = queued_frame if queued_frame is not None else base_frame
            if (job.pending and state.get("paused") is True and start is not None and frame is not None
                    and frame >= start + PENDING_FRAMES):
                return job.outcome(PENDING, state)
            return None
        if queued_frame is not None and frame == queued_frame:
            known.applies_between_frames = True  # never wait for a frame with this game
        return job.outcome(CONFIRMED_BY_ID, state)
    if frame is None:
        return job.outcome("unconfirmed", state)
    if base_frame is not None and frame >= base_frame + CONFIRM_FRAMES:
        return job.outcome(CONFIRMED_BY_FRAMES, state)
    return None


__all__ = ["Job", "PENDING_FRAMES", "Requests", "Strategy", "remaining_ms", "verdict"]
