"""The :class:`Confirmer`: sends a command and waits until the game has applied it, held
with ``after`` (:mod:`.held`) or polled (:mod:`.polls`) (docs/design.md, "Confirming a
command")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from ..contract import AFTER_FEATURE, CLOCK, CONFIRMED_BY_FRAMES
from ..errors import CommandTimeout, GameOffline
from .frames import FrameClock
from .held import Held
from .known import Known, counter
from .polls import Polling
from .strategy import Job, Requests, Strategy, remaining_ms


class Confirmer:
    """Sends commands to one port and confirms them (see the module docstring)."""

    def __init__(self, requests: Requests, known: Known, frames: FrameClock, *,
                 clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self._requests = requests
        self._known = known
        self._clock = clock
        self.held: Strategy = Held(requests, known, clock=clock)
        self.polling = Polling(requests, known, frames, clock=clock, sleep=sleep)

    def command_and_sync(self, cmd: str, args: Mapping[str, Any] | None, *, total_ms: int,
                         sync: bool = True, digest: bool = False, pending_ok: bool = False) -> dict[str, Any]:
        """Queue a command and wait until the game has applied it (see
        :meth:`~.client.GameClient.command_and_sync`)."""
        known, requests = self._known, self._requests
        deadline = self._clock() + total_ms / 1000.0
        if sync and known.features is None:
            # Learned once a generation (features, how to poll), before the command, so
            # the completedCommandId the game reports before it is known too.
            requests.health(timeout_ms=total_ms)
        generation, before = known.generation, known.completed_id
        may_wait = pending_ok and known.paused is True and CLOCK in (known.features or ())
        answer = requests.command(cmd, args, timeout_ms=remaining_ms(deadline, self._clock))
        command_id = counter(answer.get("commandId"))
        queued_frame = counter(answer.get("frame"))
        if not sync:
            return {"answer": answer, "commandId": command_id, "confirmation": "not-waited", "state": None}
        if (command_id is None or before is None or command_id > before
                or known.generation != generation):  # a restart meanwhile: the old count does not hold
            return self.confirm(Job(cmd, command_id, queued_frame, deadline, total_ms, answer, digest,
                                    pending=may_wait and command_id is not None))
        # An id the game had already reported done would "confirm" the command before it
        # ran (a reused or lying counter): confirm it by frames instead, and say why.
        why = (f"The game answered commandId {command_id}, which is not above the completedCommandId "
               f"{before} it reported before the command was sent, so the command could not be confirmed by its id")
        try:
            outcome = self.confirm(Job(cmd, None, queued_frame, deadline, total_ms, answer, digest))
        except CommandTimeout as exc:
            raise CommandTimeout(known.port, cmd, total_ms, message=f"{exc.message} {why}; nor did its "
                                 "frames advance.", reportedCommandId=command_id) from None
        outcome["idNote"] = why + (" (confirmed by frames advancing instead)."
                                   if outcome["confirmation"] == CONFIRMED_BY_FRAMES else ".")
        outcome["reportedCommandId"] = command_id
        return outcome

    def confirm(self, job: Job) -> dict[str, Any]:
        """Wait for ``job``'s command: held with ``after`` when the game offers it (and
        keeps its rule), else polled."""
        known = self._known
        if job.command_id is not None and known.features is None:
            try:  # which extensions to use and how to poll, learned once (per generation)
                self._requests.health(timeout_ms=remaining_ms(job.deadline, self._clock))
            except GameOffline:
                if self._clock() < job.deadline:
                    raise
                raise CommandTimeout(known.port, job.cmd, job.total_ms, commandId=job.command_id) from None
        if job.command_id is not None and known.uses(AFTER_FEATURE):
            held = self.held.confirm(job)
            if held is not None:
                return held  # else the game broke the rule: confirm as for a game without it
        return self.polling.confirm(job)


__all__ = ["Confirmer"]
