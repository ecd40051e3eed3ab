"""The polling strategy: polls timed by the game's frame clock, each a :data:`HEALTH` or a
:data:`STATE` poll by what is known of the game at that poll."""

from __future__ import annotations

from typing import Any, Callable, Protocol

from ..contract import CONFIRMED_BY_ID, VIEW_FEATURE
from ..errors import CommandTimeout, GameOffline
from ..polling import Naps
from .frames import FrameClock
from .known import Known, counter
from .strategy import PENDING_FRAMES, Job, Requests, remaining_ms, verdict

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


def state_is_tiny(known: Known, digest: bool) -> bool:
    """Whether the /state a confirmation asks for (its digest, with ``view``) is known
    to cost about what a /health does: then it is polled itself, which saves the
    /state fetch after a /health poll has seen the command done."""
    cost = known.poll_cost(digest)
    return 0.0 < cost <= max(TINY_STATE_S, 1.5 * known.health_cost_s)


class Poll(Protocol):
    """One kind of poll: what it asks, and the longest pause between two of them."""

    def look(self, polling: "Polling", job: Job, base_frame: int | None, state_frame: int | None,
             cheap: bool) -> dict[str, Any] | None:
        """A /state snapshot worth judging, or None (not yet). ``base_frame``: the frame
        the confirmation counts from; ``state_frame``: the frame of the last /state fetched
        for it; ``cheap``: whether /state counted as cheap when this poll began."""
        ...

    def cap_s(self, known: Known, digest: bool) -> float: ...


class HealthPoll:
    """``/health`` carries ``completedCommandId``: poll it until it reports the command."""

    def look(self, polling: "Polling", job: Job, base_frame: int | None, state_frame: int | None,
             cheap: bool) -> dict[str, Any] | None:
        known, requests = polling.known, polling.requests
        assert job.command_id is not None
        if not state_is_tiny(known, job.digest):
            health = requests.health(timeout_ms=remaining_ms(job.deadline, polling.clock))
            completed = counter(health.get("completedCommandId"))
            frame = counter(health.get("frame"))
            restarted = base_frame is not None and frame is not None and frame < base_frame
            waits = (job.pending and base_frame is not None and frame is not None
                     and frame >= base_frame + PENDING_FRAMES)  # /state says whether it waits for the clock
            if not restarted and not waits and (completed is None or completed < job.command_id):
                return None  # a restart goes on to /state, where the verdict reports it
        return requests.state(timeout_ms=remaining_ms(job.deadline, polling.clock), digest=job.digest)

    def cap_s(self, known: Known, digest: bool) -> float:
        # Only the tiny /health is polled and /state is fetched once, at the end:
        # /state's cost must not slow the polls (it would delay the answer by up to 2x it).
        return MAX_CHEAP_INTERVAL_S


class StatePoll:
    """Poll ``/state`` itself; when it is expensive, or this game's frames are known to
    advance, ``/health`` first says whether a frame after the command's has begun."""

    def look(self, polling: "Polling", job: Job, base_frame: int | None, state_frame: int | None,
             cheap: bool) -> dict[str, Any] | None:
        requests = polling.requests
        if base_frame is not None and (not cheap or polling.frames.period_s is not None):
            # Polls land near frame starts, where an early one should cost only a tiny
            # /health: wait for a frame after the command's, and after the last /state.
            health = requests.health(timeout_ms=remaining_ms(job.deadline, polling.clock))
            frame = counter(health.get("frame"))
            if frame is not None and base_frame <= frame <= max(base_frame, state_frame or base_frame):
                return None  # a frame that went back goes on to /state, where the verdict reports it
        return requests.state(timeout_ms=remaining_ms(job.deadline, polling.clock), digest=job.digest)

    def cap_s(self, known: Known, digest: bool) -> float:
        return max(MAX_CHEAP_INTERVAL_S, 2 * known.poll_cost(digest))


HEALTH = HealthPoll()
STATE = StatePoll()


class Polling:
    """The polling strategy (see the module docstring)."""

    def __init__(self, requests: Requests, known: Known, frames: FrameClock, *,
                 clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.requests = requests
        self.known = known
        self.frames = frames
        self.clock = clock
        #: Sleeps until a moment (a frame's start), aimed by how late this host wakes.
        self._naps = Naps(sleep, clock)

    def poll_for(self, command_id: int | None) -> Poll:
        """The kind of poll to ask now."""
        return HEALTH if self.known.health_has_completed_id and command_id is not None else STATE

    def confirm(self, job: Job) -> dict[str, Any]:
        interval = 0.0
        last: dict[str, Any] = {}
        base_frame = job.queued_frame
        plan = self.frame_plan(job.queued_frame, self.clock(), job.digest)
        if plan is not None:  # the command runs on a later frame: no use asking sooner
            self._naps.nap(min(plan[0], job.deadline) - self.clock())
        expected_start = plan[1] if plan is not None else None
        while True:
            try:
                state = self._look(job, base_frame, counter(last.get("frame")))
            except GameOffline:
                if self.clock() < job.deadline:
                    raise
                state = None  # the poll ran into the command's own deadline: a CommandTimeout
            if state is not None:
                last = state
                outcome = verdict(job, base_frame, state, self.known)
                if outcome is not None:
                    if expected_start is not None and outcome["confirmation"] == CONFIRMED_BY_ID:
                        self.frames.note_applied(expected_start, self.clock())  # when to poll next time
                    return outcome
                if base_frame is None and job.pending:
                    base_frame = counter(state.get("frame"))
                if job.command_id is None or counter(state.get("completedCommandId")) is None:
                    frame = counter(state.get("frame"))
                    if base_frame is None:
                        base_frame = frame
            now = self.clock()
            if now >= job.deadline:
                raise CommandTimeout(self.known.port, job.cmd, job.total_ms, commandId=job.command_id,
                                     lastCompletedCommandId=counter(last.get("completedCommandId")),
                                     lastFrame=counter(last.get("frame")))
            pause, interval = self.next_wait(job.queued_frame, interval, job.command_id, now, job.digest)
            self._naps.nap(min(pause, job.deadline - now))

    def _look(self, job: Job, base_frame: int | None, state_frame: int | None) -> dict[str, Any] | None:
        """One poll step: a /state snapshot worth checking, or None (not yet).

        ``state_frame`` is the frame of the last /state fetched for this command: without
        completedCommandId in /health, /state is fetched again only once a newer frame
        has begun."""
        cheap = self.known.poll_cost(job.digest) < CHEAP_STATE_S
        if self.known.health_has_completed_id is None and job.command_id is not None:
            self.requests.health(timeout_ms=remaining_ms(job.deadline, self.clock))  # learn which way to poll, once
        state = self.poll_for(job.command_id).look(self, job, base_frame, state_frame, cheap)
        known = self.known
        if (state is not None and job.digest and job.command_id is not None and known.uses(VIEW_FEATURE)
                and known.health_has_completed_id and counter(state.get("completedCommandId")) is None):
            known.broken(VIEW_FEATURE, "its view=digest answer left out completedCommandId")
            state = self.requests.state(timeout_ms=remaining_ms(job.deadline, self.clock))
        return state

    def next_wait(self, queued_frame: int | None, interval: float, command_id: int | None,
                  now: float, digest: bool = False) -> tuple[float, float]:
        """How long to wait before the next poll, and the interval to carry on from."""
        backoff = min(max(interval * 2, FIRST_INTERVAL_S), self.poll_for(command_id).cap_s(self.known, digest))
        plan = self.frame_plan(queued_frame, now, digest)
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

    def frame_plan(self, queued_frame: int | None, now: float,
                   digest: bool = False) -> tuple[float, float, float] | None:
        """When the frame after the newest one seen is predicted to start, and when to
        poll for it (about one poll's round trip earlier), with the period; None when
        there is no prediction or it should not be used."""
        known, frames = self.known, self.frames
        seen = frames.last_frame
        period = frames.period_s
        if seen is None or period is None:
            return None
        if queued_frame is not None and seen <= queued_frame and known.applies_between_frames:
            return None
        starts = frames.next_frame_at(seen)
        if starts is None:
            return None
        if queued_frame is not None and seen > queued_frame and now - (starts - period) < min(SETTLE_S, period / 2):
            return None  # a frame after the command has just begun: the game may still be applying it
        cost = known.poll_cost(digest)
        tiny = known.health_has_completed_id and state_is_tiny(known, digest)
        probe = (known.health_cost_s if (known.health_has_completed_id and not tiny) or cost >= CHEAP_STATE_S
                 else cost)
        poll_at = min(starts - min(max(probe, MIN_LEAD_S), MAX_LEAD_S), now + MAX_FRAME_WAIT_S)
        return poll_at, starts, period


__all__ = ["BURST_S", "CHEAP_STATE_S", "FIRST_INTERVAL_S", "HEALTH", "HealthPoll", "MAX_CHEAP_INTERVAL_S",
           "MAX_FRAME_WAIT_S", "MAX_LEAD_S", "MIN_LEAD_S", "Poll", "Polling", "SETTLE_S", "STATE", "StatePoll",
           "TINY_STATE_S", "WINDOW_POLLS", "state_is_tiny"]
