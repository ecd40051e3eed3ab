"""How a command is confirmed: GameClient's command-then-confirm cycle (``Confirming``).

``/command`` only queues; the game applies the command later, on its own thread.
:meth:`Confirming.command_and_sync` notes the returned ``commandId`` and waits until the
game reports ``completedCommandId >= commandId`` (or, without it, ``frame`` advancing by
two), then returns the state after the command. docs/tools.md ("How a command is
confirmed") says how for users; here ``_confirm`` runs the polling loop, ``_frame_plan``
and ``_next_wait`` decide when to ask (from the game's :class:`~.frames.FrameClock`),
``_next_state`` what to ask (``/health`` or ``/state``), and a game that advertises
``after`` is asked once instead (``_confirm_held``).

A mixin: :class:`~.client.GameClient` is the one owner of what is known about a port, and
this part of it only reads and updates that (its frame clock, features, costs, the last
``completedCommandId``) through the attributes and methods declared below.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

from ..contract import CONFIRM_FRAMES, CONFIRMED_BY_FRAMES, CONFIRMED_BY_ID, MAX_HOLD_MS, PENDING
from ..errors import CommandTimeout, GameOffline
from ..jsonio import as_int
from .frames import FrameClock
from .transport import DEFAULT_MAX_BYTES


def counter(value: Any) -> int | None:
    """A counter the game reports (``frame``, ``commandId``, ``completedCommandId``): a
    whole number from 0 to 2**53, else None (unknown), so an absurd one (``1e400``, a
    400-digit number, -5) is never arithmetic's problem or a port's for good."""
    return as_int(value, minimum=0)


#: Poll intervals (seconds): the first poll is immediate, then these grow to the cap.
FIRST_INTERVAL_S = 0.0002
MAX_CHEAP_INTERVAL_S = 0.002
#: A /state fetch slower than this is "expensive": poll /health first.
CHEAP_STATE_S = 0.002
#: A /state (or its digest) no slower than this (or 1.5 /health) is polled itself, even
#: when /health carries completedCommandId: one round trip fewer per confirmation.
TINY_STATE_S = 0.0005
#: The longest wait for a predicted frame start (a slow loop gets an extra poll instead).
MAX_FRAME_WAIT_S = 0.05
#: After a frame that follows the command begins, keep polling at short intervals for
#: this long (at most half a frame): a game may apply commands a little into its frame.
SETTLE_S = 0.002
#: Around a predicted frame start, poll back to back for at most this long (or a quarter
#: frame) before backing off: the frame is due, and each poll is a fraction of a millisecond.
BURST_S = 0.001
#: Within a learned window longer than BURST_S, at most about this many polls.
WINDOW_POLLS = 5
#: How early to poll before a predicted frame start: about one poll's round trip, so the
#: poll reaches the game as the frame begins (and a poll that lands just before it
#: re-measures the frame's start).
MIN_LEAD_S = 0.00005
MAX_LEAD_S = 0.00015
#: ``after``: the longest hold docs/contract.md allows (ms); how much of the deadline
#: is kept for a held answer's transfer (plus twice what a /state of the kind asked
#: costs); a held answer this much (or 5 %) shorter than its waitMs, without the command,
#: breaks the rule; a hold of at least this many ms that lasted all of waitMs although the
#: command was done breaks it too (see GameClient._confirm_held).
MAX_WAIT_MS = MAX_HOLD_MS
HELD_RESERVE_S = 0.02
EARLY_TOLERANCE_S = 0.005
HANG_CHECK_MS = 200
#: A command on a paused game with ``clock`` that is not done after this many of the
#: game's loop frames (it applies queued commands on its next one) waits for the clock to
#: move: input is delivered with the next simulated frame, a command behind a running
#: ``step`` after it. It is answered ``pending`` then (see ``command_and_sync``), and a
#: held ``/state?after=`` is asked for at most PENDING_HOLD_MS at a time meanwhile.
PENDING_FRAMES = 3
PENDING_HOLD_MS = 100


class Confirming:
    """The confirmation half of :class:`~.client.GameClient` (see the module docstring)."""

    if TYPE_CHECKING:  # provided by GameClient
        port: int
        timeout_ms: int
        frames: FrameClock
        generation: int
        features: frozenset[str] | None
        completed_id: int | None
        paused: bool | None
        health_has_completed_id: bool | None
        applies_between_frames: bool
        state_cost_s: float
        digest_cost_s: float
        health_cost_s: float
        _clock: Callable[[], float]
        _sleep: Callable[[float], None]

        def health(self, *, timeout_ms: int | None = None) -> dict: ...
        def state(self, *, timeout_ms: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                  digest: bool = False) -> dict: ...
        def _state(self, path: str, *, timeout_s: float, max_bytes: int, view: bool = False,
                   held: bool = False) -> dict: ...
        def command(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                    timeout_ms: int | None = None) -> dict: ...
        def uses(self, name: str) -> bool: ...
        def _broken(self, name: str, why: str) -> None: ...

    def command_and_sync(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                         timeout_ms: int | None = None, sync: bool = True, digest: bool = False,
                         pending_ok: bool = False) -> dict:
        """Queue a command and wait until the game has applied it.

        Returns ``{"answer", "commandId", "confirmation", "state"}`` where ``state`` is a
        ``/state`` snapshot taken after the command ran (None when ``sync`` is False,
        ``confirmation: "not-waited"``). ``digest``: the digest of that state is all the
        caller needs (a game with ``view`` then sends only the digest's fields).

        ``pending_ok``: on a game with ``clock`` that was paused when the command was sent,
        a command still not done ``PENDING_FRAMES`` loop frames later, with ``/state``
        still paused, waits for the clock: it is answered at once with ``confirmation:
        "pending"`` and the state then, instead of waiting for a clock nobody moves.

        A game that advertises ``after`` is asked once, ``/state?after=<commandId>``, and
        answers when the command is done; others are polled (see the module docstring)."""
        total_ms = self.timeout_ms if timeout_ms is None else int(timeout_ms)
        deadline = self._clock() + total_ms / 1000.0
        if sync and self.features is None:
            # Learned once a generation (features, how to poll), before the command, so
            # the completedCommandId the game reports before it is known too.
            self.health(timeout_ms=total_ms)
        generation, before = self.generation, self.completed_id
        may_wait = pending_ok and self.paused is True and "clock" in (self.features or ())
        answer = self.command(cmd, args, timeout_ms=self._remaining_ms(deadline))
        command_id = counter(answer.get("commandId"))
        queued_frame = counter(answer.get("frame"))
        if not sync:
            return {"answer": answer, "commandId": command_id, "confirmation": "not-waited", "state": None}
        if (command_id is None or before is None or command_id > before
                or self.generation != generation):  # a restart meanwhile: the old count does not hold
            return self._confirm(cmd, command_id, queued_frame, deadline, total_ms, answer, digest,
                                 pending=may_wait and command_id is not None)
        # An id the game had already reported done would "confirm" the command before it
        # ran (a reused or lying counter): confirm it by frames instead, and say why.
        why = (f"The game answered commandId {command_id}, which is not above the completedCommandId "
               f"{before} it reported before the command was sent, so the command could not be confirmed by its id")
        try:
            outcome = self._confirm(cmd, None, queued_frame, deadline, total_ms, answer, digest)
        except CommandTimeout as exc:
            raise CommandTimeout(self.port, cmd, total_ms, message=f"{exc.message} {why}; nor did its "
                                 "frames advance.", reportedCommandId=command_id) from None
        outcome["idNote"] = why + (" (confirmed by frames advancing instead)."
                                   if outcome["confirmation"] == CONFIRMED_BY_FRAMES else ".")
        outcome["reportedCommandId"] = command_id
        return outcome

    def _remaining_ms(self, deadline: float) -> int:
        # Rounded up, so a poll that times out has always reached the command's deadline
        # (rounded down, it could end just before it and surface as GameOffline).
        return max(1, math.ceil((deadline - self._clock()) * 1000))

    def _confirm(self, cmd: str, command_id: int | None, queued_frame: int | None,
                 deadline: float, total_ms: int, answer: dict, digest: bool = False,
                 pending: bool = False) -> dict:
        if command_id is not None and self.features is None:
            try:  # which extensions to use and how to poll, learned once (per generation)
                self.health(timeout_ms=self._remaining_ms(deadline))
            except GameOffline:
                if self._clock() < deadline:
                    raise
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id) from None
        if command_id is not None and self.uses("after"):
            held = self._confirm_held(cmd, command_id, queued_frame, deadline, total_ms, answer, digest, pending)
            if held is not None:
                return held  # else the game broke the rule: confirm as for a game without it
        interval = 0.0
        last: dict = {}
        base_frame = queued_frame
        plan = self._frame_plan(queued_frame, self._clock(), digest)
        if plan is not None:  # the command runs on a later frame: no use asking sooner
            self._sleep(max(0.0, min(plan[0], deadline) - self._clock()))
        expected_start = plan[1] if plan is not None else None
        while True:
            try:
                state = self._next_state(command_id, base_frame, deadline, counter(last.get("frame")), digest,
                                         pending)
            except GameOffline:
                if self._clock() < deadline:
                    raise
                state = None  # the poll ran into the command's own deadline: a CommandTimeout
            if state is not None:
                last = state
                verdict = self._verdict(cmd, command_id, queued_frame, base_frame, total_ms, answer, state, pending)
                if verdict is not None:
                    if expected_start is not None and verdict["confirmation"] == CONFIRMED_BY_ID:
                        self.frames.note_applied(expected_start, self._clock())  # when to poll next time
                    return verdict
                if base_frame is None and pending:
                    base_frame = counter(state.get("frame"))
                if command_id is None or counter(state.get("completedCommandId")) is None:
                    frame = counter(state.get("frame"))
                    if base_frame is None:
                        base_frame = frame
            now = self._clock()
            if now >= deadline:
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id,
                                     lastCompletedCommandId=counter(last.get("completedCommandId")),
                                     lastFrame=counter(last.get("frame")))
            pause, interval = self._next_wait(queued_frame, interval, command_id, now, digest)
            self._sleep(min(pause, max(0.0, deadline - now)))

    def _verdict(self, cmd: str, command_id: int | None, queued_frame: int | None, base_frame: int | None,
                 total_ms: int, answer: dict, state: dict, pending: bool = False) -> dict | None:
        """What one snapshot says of the command: the outcome, None (not yet), or a
        CommandTimeout raised for a game that restarted meanwhile. ``pending``: a command
        on a paused game, which may wait for the clock (see ``command_and_sync``)."""
        completed = counter(state.get("completedCommandId"))
        frame = counter(state.get("frame"))
        if base_frame is not None and frame is not None and frame < base_frame:
            raise CommandTimeout(self.port, cmd, total_ms, message=(
                f"The game on port {self.port} restarted (frame went back from {base_frame} "
                f"to {frame}) while command '{cmd}' was pending; it was probably lost. Send it again."),
                lastFrame=frame)
        if command_id is not None and completed is not None:
            if completed < command_id:
                start = queued_frame if queued_frame is not None else base_frame
                if (pending and state.get("paused") is True and start is not None and frame is not None
                        and frame >= start + PENDING_FRAMES):
                    return {"answer": answer, "commandId": command_id, "confirmation": PENDING, "state": state}
                return None
            if queued_frame is not None and frame == queued_frame:
                self.applies_between_frames = True  # never wait for a frame with this game
            return {"answer": answer, "commandId": command_id, "confirmation": CONFIRMED_BY_ID, "state": state}
        if frame is None:
            return {"answer": answer, "commandId": command_id, "confirmation": "unconfirmed", "state": state}
        if base_frame is not None and frame >= base_frame + CONFIRM_FRAMES:
            return {"answer": answer, "commandId": command_id, "confirmation": CONFIRMED_BY_FRAMES, "state": state}
        return None

    def _confirm_held(self, cmd: str, command_id: int, queued_frame: int | None, deadline: float,
                      total_ms: int, answer: dict, digest: bool, pending: bool = False) -> dict | None:
        """``after`` (docs/contract.md): ``/state?after=<id>&waitMs=<what is left>``, asked
        again only when it was held for all of ``waitMs``. None when the game broke the
        rule (answered early without the command, or without ``completedCommandId``):
        the caller confirms by polling, and the feature is not used again until restart.

        ``waitMs`` leaves a little of the deadline for the answer's transfer, so even a game
        that holds for all of ``waitMs`` when the command is long done answers in time."""
        while True:
            remaining_s = deadline - self._clock()
            if remaining_s <= 0:
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id)
            view = digest and self.uses("view")
            cost = self.digest_cost_s if view else self.state_cost_s
            reserve_s = min(remaining_s / 4, HELD_RESERVE_S + 2 * cost)
            wait_ms = max(0, min(PENDING_HOLD_MS if pending else MAX_WAIT_MS, int((remaining_s - reserve_s) * 1000)))
            path = f"/state?after={command_id}&waitMs={wait_ms}" + ("&view=digest" if view else "")
            sent = self._clock()
            try:
                state = self._state(path, timeout_s=remaining_s, max_bytes=DEFAULT_MAX_BYTES, view=view, held=True)
            except GameOffline:
                if self._clock() < deadline:
                    raise
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id) from None
            held_s = self._clock() - sent
            verdict = self._verdict(cmd, command_id, queued_frame, queued_frame, total_ms, answer, state, pending)
            completed = counter(state.get("completedCommandId"))
            if completed is None:
                self._broken("view" if view else "after", "its /state answered without completedCommandId")
                return None
            if verdict is not None and verdict["confirmation"] == PENDING:
                return verdict
            if verdict is not None:
                if wait_ms >= HANG_CHECK_MS and held_s >= wait_ms / 1000 * 0.98:
                    # The command may have been done long before: a game that holds for all
                    # of waitMs would cost every call its whole deadline.
                    self._broken("after", f"held /state for all of waitMs ({wait_ms} ms) although the command was done")
                return verdict
            if held_s < wait_ms / 1000 - max(EARLY_TOLERANCE_S, 0.05 * wait_ms / 1000):
                self._broken("after", f"answered /state?after={command_id} after {held_s * 1000:.0f} ms of "
                             f"waitMs={wait_ms} with completedCommandId {completed}")
                return None

    def _next_wait(self, queued_frame: int | None, interval: float, command_id: int | None,
                   now: float, digest: bool = False) -> tuple[float, float]:
        """How long to wait before the next poll, and the interval to carry on from."""
        backoff = min(max(interval * 2, FIRST_INTERVAL_S), self._interval_cap(command_id, digest))
        plan = self._frame_plan(queued_frame, now, digest)
        if plan is None:
            return backoff, backoff
        poll_at, starts, period = plan
        if poll_at - now > backoff:
            return poll_at - now, 0.0  # nothing changes before the next frame: sleep until just before it
        window = self.frames.apply_window(min(BURST_S, period / 4))
        if now < starts + window:
            # The frame is due about now, and recent commands were applied within
            # ``window`` of a predicted start: poll across it (back to back for the
            # first millisecond, then a few polls spread over the rest).
            if now < starts + BURST_S:
                return 0.0, 0.0
            return min(window / WINDOW_POLLS, starts + window - now), 0.0
        return backoff, backoff  # it is late: back off as without a prediction

    def poll_cost(self, digest: bool = False) -> float:
        """What the last ``/state`` of the kind ``state(digest=digest)`` asks cost (seconds)."""
        return self.digest_cost_s if digest and self.uses("view") else self.state_cost_s

    def _frame_plan(self, queued_frame: int | None, now: float,
                    digest: bool = False) -> tuple[float, float, float] | None:
        """When the frame after the newest one seen is predicted to start, and when to
        poll for it (about one poll's round trip earlier), with the period; None when
        there is no prediction or it should not be used."""
        seen = self.frames.last_frame
        period = self.frames.period_s
        if seen is None or period is None:
            return None
        if queued_frame is not None and seen <= queued_frame and self.applies_between_frames:
            return None
        starts = self.frames.next_frame_at(seen)
        if starts is None:
            return None
        if queued_frame is not None and seen > queued_frame and now - (starts - period) < min(SETTLE_S, period / 2):
            return None  # a frame after the command has just begun: the game may still be applying it
        cost = self.poll_cost(digest)
        tiny = self.health_has_completed_id and self._state_is_tiny(digest)
        probe = self.health_cost_s if (self.health_has_completed_id and not tiny) or cost >= CHEAP_STATE_S else cost
        poll_at = min(starts - min(max(probe, MIN_LEAD_S), MAX_LEAD_S), now + MAX_FRAME_WAIT_S)
        return poll_at, starts, period

    def _state_is_tiny(self, digest: bool) -> bool:
        """Whether the /state a confirmation asks for (its digest, with ``view``) is known
        to cost about what a /health does: then it is polled itself, which saves the
        /state fetch after a /health poll has seen the command done."""
        cost = self.poll_cost(digest)
        return 0.0 < cost <= max(TINY_STATE_S, 1.5 * self.health_cost_s)

    def _interval_cap(self, command_id: int | None, digest: bool = False) -> float:
        if self.health_has_completed_id and command_id is not None:
            # Only the tiny /health is polled and /state is fetched once, at the end:
            # /state's cost must not slow the polls (it would delay the answer by up to 2x it).
            return MAX_CHEAP_INTERVAL_S
        return max(MAX_CHEAP_INTERVAL_S, 2 * self.poll_cost(digest))

    def _next_state(self, command_id: int | None, base_frame: int | None,
                    deadline: float, state_frame: int | None, digest: bool = False,
                    pending: bool = False) -> dict | None:
        """One poll step: a /state snapshot worth checking, or None (not yet).

        ``state_frame`` is the frame of the last /state fetched for this command: without
        completedCommandId in /health, /state is fetched again only once a newer frame
        has begun."""
        cheap = self.poll_cost(digest) < CHEAP_STATE_S
        if self.health_has_completed_id is None and command_id is not None:
            self.health(timeout_ms=self._remaining_ms(deadline))  # learn which way to poll, once
        if self.health_has_completed_id and command_id is not None:
            if not self._state_is_tiny(digest):
                health = self.health(timeout_ms=self._remaining_ms(deadline))
                completed = counter(health.get("completedCommandId"))
                frame = counter(health.get("frame"))
                restarted = base_frame is not None and frame is not None and frame < base_frame
                waits = (pending and base_frame is not None and frame is not None
                         and frame >= base_frame + PENDING_FRAMES)  # /state says whether it waits for the clock
                if not restarted and not waits and (completed is None or completed < command_id):
                    return None  # a restart goes on to /state, where _confirm reports it
        elif base_frame is not None and (not cheap or self.frames.period_s is not None):
            # /state is expensive, or this game's frames are known to advance (so polls
            # land near frame starts, where an early one should cost only a tiny
            # /health): wait for a frame after the command's, and after the last /state.
            health = self.health(timeout_ms=self._remaining_ms(deadline))
            frame = counter(health.get("frame"))
            if frame is not None and base_frame <= frame <= max(base_frame, state_frame or base_frame):
                return None  # a frame that went back goes on to /state, where _confirm reports it
        state = self.state(timeout_ms=self._remaining_ms(deadline), digest=digest)
        if (digest and command_id is not None and self.uses("view") and self.health_has_completed_id
                and counter(state.get("completedCommandId")) is None):
            self._broken("view", "its view=digest answer left out completedCommandId")
            state = self.state(timeout_ms=self._remaining_ms(deadline))
        return state
