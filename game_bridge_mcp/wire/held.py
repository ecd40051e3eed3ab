"""The ``after`` strategy: ``/state?after=<commandId>&waitMs=`` held by the game until the
command is done, and the game's rule checked (one caught breaking it is polled instead)."""

from __future__ import annotations

from typing import Any, Callable

from ..contract import AFTER_FEATURE, MAX_HOLD_MS, PENDING, VIEW_FEATURE
from ..errors import CommandTimeout, GameOffline
from .known import Known, counter
from .strategy import Job, Requests, verdict

#: The longest hold docs/contract.md allows (ms); how much of the deadline is kept for a
#: held answer's transfer (plus twice what a /state of the kind asked costs); a held
#: answer this much (or 5 %) shorter than its waitMs, without the command, breaks the
#: rule; a hold of at least this many ms that lasted all of waitMs although the command
#: was done breaks it too.
MAX_WAIT_MS = MAX_HOLD_MS
HELD_RESERVE_S = 0.02
EARLY_TOLERANCE_S = 0.005
HANG_CHECK_MS = 200
#: While a command may wait for a paused game's clock, each hold is at most this long
#: (so the wait is answered ``pending`` soon; see strategy.PENDING_FRAMES).
PENDING_HOLD_MS = 100


class Held:
    """The ``after`` strategy (see the module docstring)."""

    def __init__(self, requests: Requests, known: Known, *, clock: Callable[[], float]) -> None:
        self._requests = requests
        self._known = known
        self._clock = clock

    def confirm(self, job: Job) -> dict[str, Any] | None:
        """The outcome, or None when the game broke the rule (the caller confirms by
        polling). ``waitMs`` leaves a little of the deadline for the answer's transfer, so
        even a game that holds for all of ``waitMs`` when the command is long done
        answers in time."""
        known, clock = self._known, self._clock
        assert job.command_id is not None
        command_id = job.command_id
        while True:
            remaining_s = job.deadline - clock()
            if remaining_s <= 0:
                raise CommandTimeout(known.port, job.cmd, job.total_ms, commandId=command_id)
            view = job.digest and known.uses(VIEW_FEATURE)
            cost = known.digest_cost_s if view else known.state_cost_s
            reserve_s = min(remaining_s / 4, HELD_RESERVE_S + 2 * cost)
            wait_ms = max(0, min(PENDING_HOLD_MS if job.pending else MAX_WAIT_MS, int((remaining_s - reserve_s) * 1000)))
            sent = clock()
            try:
                state = self._requests.held_state(command_id, wait_ms, view=view, timeout_s=remaining_s)
            except GameOffline:
                if clock() < job.deadline:
                    raise
                raise CommandTimeout(known.port, job.cmd, job.total_ms, commandId=command_id) from None
            held_s = clock() - sent
            outcome = verdict(job, job.queued_frame, state, known)
            completed = counter(state.get("completedCommandId"))
            if completed is None:
                known.broken(VIEW_FEATURE if view else AFTER_FEATURE, "its /state answered without completedCommandId")
                return None
            if outcome is not None and outcome["confirmation"] == PENDING:
                return outcome
            if outcome is not None:
                if wait_ms >= HANG_CHECK_MS and held_s >= wait_ms / 1000 * 0.98:
                    # The command may have been done long before: a game that holds for all
                    # of waitMs would cost every call its whole deadline.
                    known.broken(AFTER_FEATURE, f"held /state for all of waitMs ({wait_ms} ms) although the command was done")
                return outcome
            if held_s < wait_ms / 1000 - max(EARLY_TOLERANCE_S, 0.05 * wait_ms / 1000):
                known.broken(AFTER_FEATURE, f"answered /state?after={command_id} after {held_s * 1000:.0f} ms of "
                             f"waitMs={wait_ms} with completedCommandId {completed}")
                return None


__all__ = ["EARLY_TOLERANCE_S", "HANG_CHECK_MS", "HELD_RESERVE_S", "Held", "MAX_WAIT_MS", "PENDING_HOLD_MS"]
