"""The bridge's side of ``clock``: ``advance`` (frame by frame until a condition, with
``simFrame`` watched for a clock that lies), a paused launch, and ``wait_for``'s refusal of a
paused game; the rules are docs/clock.md's."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Callable

from .. import polling
from ..contract import CLOCK, ENV_START_PAUSED, MAX_STEP_FRAMES, VIEW_FEATURE
from ..errors import (BridgeError, BridgeUsageError, ClockBroken, CommandFailed, CommandTimeout,
                      GameOffline, GamePaused, NotAGameSurface)
from ..jsonio import as_int
from ..wire.client import GameClient
from ..wire.known import Look
from .digest import get_path, shown_value
from . import inputs as timed_inputs
from .events import Shown, answer_digest
from .outcome import command_outcome
from .waiting import Condition, check_screen, with_screen

#: The environment variable that starts a game paused (``clock``).
START_PAUSED_ENV = ENV_START_PAUSED
#: ``advance``'s bounds: ``step``'s.
MAX_ADVANCE_FRAMES = MAX_STEP_FRAMES
DEFAULT_MAX_FRAMES = 600
#: A single ``step {frames: N}`` may take this much longer than the command timeout per
#: frame (when the game's loop period is not known yet; else twice that period).
STEP_ALLOWANCE_S = 0.05
#: A game whose simFrame went further than a step from the bridge's last look is looked at
#: again once its loop has turned this many frames (a clock that runs while paused moves).
STILL_LOOPS = 3

log = logging.getLogger(__name__)


def parse_until(until: Any) -> Condition:
    """``{path, equals}``, ``{path, changes: true}`` or ``{event}`` as a Condition (the
    shapes and checks of ``wait_for`` and ``call_tool``'s ``until``; no ``timeoutMs``:
    advance is bounded by frames)."""
    if isinstance(until, Mapping) and "timeoutMs" in until:
        raise BridgeUsageError("advance's until takes no timeoutMs: advance is bounded by frames "
                               "(maxFrames, default 600), not by time.")
    condition, _timeout = Condition.from_spec(until, what="advance's until", timeout=False)
    return condition


def until_shape(condition: Condition) -> str:
    """The condition as the JSON an agent would pass back, for messages."""
    import json

    if condition.event is not None:
        shape: dict[str, Any] = {"event": condition.event}
    elif condition.screen is not None:
        shape = {"screen": condition.screen, **({"frames": condition.frames} if condition.screen == "stable" else {})}
    elif condition.changes:
        shape = {"path": condition.path, "changes": True}
    else:
        shape = {"path": condition.path, "equals": condition.equals}
    try:
        return json.dumps(shape, default=str)[:300]
    except (TypeError, ValueError):
        return "{...}"


class Advance:
    """One ``advance`` call on one port (the caller holds the port's command lock)."""

    def __init__(self, client: GameClient, shown: Shown, *, timeout_ms: int, behind: int | None = None) -> None:
        self.client = client
        #: What the agent has been shown of the instance (its events cursor).
        self.shown = shown
        #: The newest command waiting for the clock (answered as pending), whose completion
        #: a step's waits for; None when none waits.
        self.behind = behind
        #: The state the advance ended on (for what the caller reports of pending commands).
        self.last_state: dict[str, Any] | None = None
        self.port = client.port
        self.timeout_ms = timeout_ms
        self.advanced = 0
        self.notes: list[str] = []
        self.condition: Condition | None = None
        #: Ask for ``view=digest`` (a game with ``view`` then sends only the digest's
        #: fields): the answer is a digest, and the condition reads digest fields.
        self.digest = True

    def run(self, frames: Any, until: Any, max_frames: Any, inputs: Any = None) -> dict[str, Any]:
        count = _frames_arg("frames", frames)
        bound = _frames_arg("maxFrames", max_frames)
        condition = parse_until(until) if until is not None else None
        if condition is None and bound is not None:
            raise BridgeUsageError("advance: maxFrames bounds an 'until'; to run a fixed number of frames "
                                   "give only 'frames'.")
        if inputs is not None:  # timed input: core/inputs.py
            if condition is not None:
                raise BridgeUsageError("advance: inputs run over a fixed number of frames: give 'frames', "
                                       "not 'until' (then advance with until from there).")
            return timed_inputs.run(self, count or 0, timed_inputs.parse(inputs, count))
        self.condition = condition
        self.digest = condition is None or condition.digest_answers is not False
        if condition is None:
            look = self._paused_look()
            if look is not None:  # two requests: the step and its answer, checked against the look
                return self.answer(self.step_from(count or 1, look), matched=True)
        else:
            check_screen(self.client, condition)
        state = self.start()
        generation = self.client.generation
        if condition is None:
            state = self.step(count or 1, state, generation)
            return self.answer(state, matched=True)
        bounds = [b for b in (count, bound) if b is not None]
        limit = min(bounds) if bounds else DEFAULT_MAX_FRAMES
        state = with_screen(self.client, condition, state)  # (a picture condition: its hash beside it)
        watch = condition.watch(baseline=state)
        matched = watch.observe(state)  # what already holds needs no frame
        while not matched and self.advanced < limit:
            polling.check_cancelled()  # a cancelled call ends between frames, not after maxFrames
            state = with_screen(self.client, condition, self.step(1, state, generation))
            matched = watch.observe(state)
            if not matched:
                polling.report_progress(self.advanced, limit, f"advancing until {condition.describe()}: "
                                                              f"{self.advanced} of at most {limit} frames")
        if not matched:
            self.notes.append(f"until {until_shape(condition)} did not hold within {limit} frames; "
                              "the game stays paused here. Advance again to go on.")
        seen: dict[str, Any] = ({"event": condition.event} if condition.event is not None
                                else {} if condition.screen is not None  # (the digest's screen is ui.screen)
                                else {"path": condition.path})
        seen.update(watch.report())
        if matched and condition.event is None and condition.screen is None:
            seen["value"] = shown_value(watch.value)  # the value the condition held with (as wait_for says it)
        if condition.changes and watch.initial is not None:
            seen["initialValue"] = shown_value(watch.initial[1])
        return self.answer(state, matched=matched, **seen)

    # ------------------------------------------------------------------ parts
    def start(self) -> dict[str, Any]:
        """Check the game has a clock, pause it when it runs; the state to start from."""
        self.client.health()
        features = self.client.features or frozenset()
        if CLOCK not in features:
            shown = ", ".join(sorted(features)) or "none"
            raise BridgeUsageError(
                f"The game on port {self.port} has no clock: its /health features ({shown}) do not include "
                "'clock', so it cannot be paused or stepped and advance cannot run it frame by frame. "
                "Use wait_for to watch it run, or give the game the clock extension (the kit: "
                "GameBridge(clock=True)).", port=self.port, features=sorted(features))
        state = self._whole_if_needed(self.client.state(digest=self.digest))
        if state.get("paused") is not True:
            outcome = self.client.command_and_sync("pause", {}, timeout_ms=self.timeout_ms, digest=self.digest)
            paused = outcome.get("state")
            state = self._whole_if_needed(paused if isinstance(paused, dict) else self.client.state(digest=self.digest))
            if state.get("paused") is not True:
                raise ClockBroken(self.port, f"it was asked to pause and /state still says paused: "
                                             f"{state.get('paused')!r}", frames_advanced=0)
            self.notes.append(f"The game was running; advance paused it first (at simFrame "
                              f"{state.get('simFrame')}). It stays paused: call_tool resume lets it run.")
        if as_int(state.get("simFrame")) is None:
            self.notes.append("/state has no simFrame, so advance cannot check that each step ran exactly "
                              "its frames.")
        return state

    def step(self, frames: int, before: dict[str, Any], generation: int) -> dict[str, Any]:
        """A step of ``frames`` from ``before`` (a state of this generation), checked by it."""
        state, _command_id = self._send_step(frames, before, generation)
        self._verify(frames, before, state)
        self.advanced += frames
        return state

    def _send_step(self, frames: int, before: Mapping[str, Any], generation: int) -> tuple[dict[str, Any], int | None]:
        """``step {frames}`` sent and confirmed: the state after and its commandId; the
        errors of a game that went away, restarted, timed out or refused it, worded."""
        timeout_ms = self.timeout_ms
        if frames > 1:  # one step of many frames: allow for the game's frames on top
            period = self.client.frames.period_s
            per_frame = STEP_ALLOWANCE_S if period is None else max(0.001, 2 * period)
            timeout_ms += int(frames * per_frame * 1000)
        try:
            if self._blocked():
                outcome = self._step_behind(frames, before, timeout_ms)
            else:
                outcome = self.client.command_and_sync("step", {"frames": frames}, timeout_ms=timeout_ms,
                                                       digest=self.digest)
        except polling.Cancelled:
            self._interrupt()
            raise
        except GameOffline as exc:
            raise GameOffline(self.port, message=(
                f"The game on port {self.port} stopped answering during advance, {self._where(before)}: "
                f"{exc.message.splitlines()[0]}"), cause=exc.cause, endpoint=exc.endpoint, detail=exc.detail,
                launch_hint=self.client.launch_hint) from None
        except NotAGameSurface as exc:
            if not self._went_away():
                raise
            # An answer cut off as the game went away (its connection closed mid-body): it died.
            raise GameOffline(self.port, message=(
                f"The game on port {self.port} went away during advance, {self._where(before)}: its last "
                f"answer was cut off ({exc.detail}) and the port now refuses connections."),
                cause="reset", endpoint="/state", detail=exc.detail, launch_hint=self.client.launch_hint) from None
        except CommandTimeout as exc:
            raise CommandTimeout(self.port, "step", timeout_ms, message=(
                f"advance on port {self.port} stopped {self._where(before)}: {exc.message}"),
                framesAdvanced=self.advanced) from None
        state = outcome.get("state")
        state = self._whole_if_needed(state if isinstance(state, dict) else self.client.state(digest=self.digest))
        command_id = as_int(outcome.get("commandId"))
        done = command_outcome(state, command_id, result=False)  # (step's result is not shown)
        if done.ok is False:
            raise CommandFailed(self.port, "advance", done.reason or "", command="step",
                                command_id=command_id, after=answer_digest(self.shown, self.client, state))
        if self.client.generation != generation:
            raise GameOffline(self.port, message=(
                f"The game on port {self.port} restarted during advance ({self._where(before)}): frame went "
                "backwards, so its clock and world are new. Launch or pause it again before advancing."),
                cause="reset", endpoint="/state", launch_hint=self.client.launch_hint)
        return state, command_id

    # ------------------------------------------------------- a step without a look first
    def _paused_look(self) -> Look | None:
        """What the bridge last saw of the game, when ``advance {frames}`` may step from it
        without asking ``/health`` and ``/state`` first: the game advertises ``clock``
        (``/health`` read in this generation), no command waits for the clock, and the
        client's look can stand for the game now (``GameClient.paused_look``)."""
        if CLOCK not in (self.client.features or ()) or self._blocked():
            return None
        return self.client.paused_look()

    def step_from(self, frames: int, look: Look) -> dict[str, Any]:
        """A step of a game last seen paused at ``look``: the step's answers are checked
        against it instead of a look first. Its commandId right after the look's
        completedCommandId means no command ran in between, so ``simFrame`` must have gone
        from the look's exactly ``frames`` on; any other id means commands this bridge did
        not send ran (it says so, and looks first from then on). A game found running after
        it is paused and stepped as a running game is; one that ran on meanwhile is looked
        at again to tell a clock that runs while paused from something that resumed it."""
        generation = self.client.generation
        before = {"simFrame": look.sim_frame}
        state, command_id = self._send_step(frames, before, generation)
        others = command_id is None or command_id != look.completed_id + 1
        if others:
            self.client.others_commanded()
        if state.get("paused") is not True:  # resumed since the look: what a look first would have found
            state = self.start()
            return self.step(frames, state, self.client.generation)
        if others:
            self.notes.append(
                f"Commands this bridge did not send reached the game since it last looked, or its command ids "
                f"skip (completedCommandId {look.completed_id} then, this step's commandId {command_id}), so whether this step ran exactly "
                f"{frames} frames could not be checked by simFrame; advance looks at the game before each step "
                "from now on.")
        else:
            end = as_int(state.get("simFrame"))
            if end is not None and end > look.sim_frame + frames:
                self._ran_on(frames, look.sim_frame, end, state, command_id)
            else:
                self._verify(frames, before, state)
        self.advanced += frames
        return state

    def _interrupt(self) -> None:
        """The call was cancelled while a step ran: a pause ends the step at the frame it has
        reached (the kit's clock; the game's result and its step:interrupted event say
        where), rather than letting it run every frame it was asked for. It is waited on, so
        that the bridge knows the frame the game stopped at (what is sent next is recorded
        there: re-execution steps the cut step as far, core/states/reexec.py)."""
        with polling.cancel_scope(None):  # (sent for the call that is ending)
            try:
                self.client.command_and_sync("pause", {}, timeout_ms=2000, digest=True)
            except BridgeError as exc:
                log.info("port %s: a pause after a cancelled advance was not sent: %s", self.port, exc)

    def _ran_on(self, frames: int, start: int, end: int, after: Mapping[str, Any], command_id: int | None) -> None:
        """``simFrame`` went further than the step from the look, with no command between:
        either the clock runs while paused (ClockBroken), or something other than the
        bridge let the game run after the look (the game's own pause control) and the step
        paused it first, as a step does. The game is looked at again once its loop has
        turned a few frames: only a game still paused, with no command since the step's,
        whose ``simFrame`` moved meanwhile broke its clock; one whose ``simFrame`` holds is
        the second case, and anything else (another command, a game running again, a loop
        that did not turn) cannot be told apart, and is said in a note."""
        later = self._after_loops(after, STILL_LOOPS)
        moved = None if later is None else as_int(later.get("simFrame"))
        quiet = later is not None and as_int(later.get("completedCommandId")) == command_id
        if quiet and later is not None and later.get("paused") is True and moved is not None and moved != end:
            raise ClockBroken(self.port, f"its simFrame ran on while paused: it was {start} when the bridge last "
                                         f"looked, step {{frames: {frames}}} left it at {end}, not {start + frames}, "
                                         f"and {STILL_LOOPS}+ loop frames later, still paused with no command since, "
                                         f"it said {moved}", frames_advanced=self.advanced)
        if quiet and later is not None and later.get("paused") is True:
            self.notes.append(
                f"The game ran on after the bridge last saw it paused at simFrame {start}: something other than "
                f"this bridge let it run (the game's own pause control?) and the step paused it at simFrame "
                f"{end - frames}, then ran {frames} frame{'' if frames == 1 else 's'}. It stays paused: call_tool "
                "resume lets it run.")
            return
        self.client.others_commanded()  # what it saw cannot be trusted: look first from now on
        seen = ("its loop did not turn again within the command timeout" if later is None
                else f"{STILL_LOOPS}+ loop frames later it said simFrame {moved}, paused: {later.get('paused')!r}, "
                     f"completedCommandId {later.get('completedCommandId')!r}")
        self.notes.append(
            f"The game ran on after the bridge last saw it paused at simFrame {start}: step {{frames: {frames}}} "
            f"left it at {end}, not {start + frames}, and {seen}, so whether its clock holds while paused could "
            "not be told; advance looks at the game before each step from now on.")

    def _after_loops(self, after: Mapping[str, Any], loops: int) -> dict[str, Any] | None:
        """``/state`` once the game's loop ``frame`` is ``loops`` past ``after``'s (None when
        it has none, or does not get there within the command timeout)."""
        frame = as_int(after.get("frame"))
        if frame is None:
            return None
        deadline = polling.Deadline(self.timeout_ms / 1000.0)
        period = self.client.frames.period_s
        while True:
            state = self.client.state(timeout_ms=max(1, deadline.remaining_ms()), digest=self.digest)
            now = as_int(state.get("frame"))
            if now is not None and now >= frame + loops:
                return state
            if deadline.expired:
                return None
            polling.sleep(min(0.005, period or 0.005))

    def _blocked(self) -> bool:
        """Whether a command answered as pending is still not done (so a step's completion
        will not be published until it is)."""
        completed = self.client.completed_id
        return self.behind is not None and (completed is None or completed < self.behind)

    def _step_behind(self, frames: int, before: Mapping[str, Any], timeout_ms: int) -> dict[str, Any]:
        """A step queued behind a pending command: sent, then confirmed by ``simFrame``
        reaching ``frames`` more (its own completion waits for the pending command's)."""
        start = as_int(before.get("simFrame"))
        if start is None:  # nothing else to go by: its completion
            return self.client.command_and_sync("step", {"frames": frames}, timeout_ms=timeout_ms, digest=self.digest)
        sent = self.client.command_and_sync("step", {"frames": frames}, timeout_ms=timeout_ms, sync=False)
        deadline = polling.Deadline(timeout_ms / 1000.0)
        while True:
            state = self.client.state(timeout_ms=max(1, deadline.remaining_ms()), digest=self.digest)
            now = as_int(state.get("simFrame"))
            done = as_int(state.get("completedCommandId"))
            if (now is not None and now >= start + frames) or (
                    done is not None and sent.get("commandId") is not None and done >= int(sent["commandId"])):
                return {"commandId": sent.get("commandId"), "confirmation": "simFrame", "state": state}
            if deadline.expired:
                raise CommandTimeout(self.port, "step", timeout_ms, commandId=sent.get("commandId"))
            polling.sleep(0.0005)

    def _went_away(self, within_s: float = 1.0) -> bool:
        """Whether the port stops accepting connections within ``within_s`` (a game that
        is exiting closes its listener a moment after its connections)."""
        deadline = time.monotonic() + within_s
        while True:
            if self.client.port_is_quiet(timeout_ms=100):
                return True
            if time.monotonic() >= deadline:
                return False
            polling.sleep(0.02)

    def _whole_if_needed(self, state: dict[str, Any]) -> dict[str, Any]:
        """A digest without the ``game.<key>`` the condition reads (it is not a scalar now,
        or not there): the whole state instead, and the whole state from then on."""
        c = self.condition
        if (self.digest and c is not None and c.digest_answers is None and self.client.uses(VIEW_FEATURE)
                and not get_path(state, c.path or "")[0]):
            self.digest = False
            return self.client.state()
        return state

    def _verify(self, frames: int, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        start, end = as_int(before.get("simFrame")), as_int(after.get("simFrame"))
        if after.get("paused") is not True:
            raise ClockBroken(self.port, f"after step {{frames: {frames}}} /state says paused: "
                                         f"{after.get('paused')!r} (was another client resuming it?)",
                              frames_advanced=self.advanced)
        if start is None or end is None or end == start + frames:
            return
        if end > start + frames:
            why = (f"its simFrame ran on while paused: step {{frames: {frames}}} took it from {start} to {end}, "
                   f"not {start + frames}")
        else:
            why = (f"step {{frames: {frames}}} completed with simFrame {end}, {end - start} frames from {start} "
                   f"instead of {frames}: it publishes step's completion before its frames have run")
        raise ClockBroken(self.port, why, frames_advanced=self.advanced)

    def _where(self, before: Mapping[str, Any]) -> str:
        return f"after {self.advanced} frames (simFrame {before.get('simFrame')})"

    def answer(self, state: Mapping[str, Any], *, matched: bool, **condition: Any) -> dict[str, Any]:
        self.last_state = dict(state)
        digest = answer_digest(self.shown, self.client, state)  # the whole digest; each event once
        result: dict[str, Any] = {"port": self.port, "tool": "advance", "matched": matched,
                                  "framesAdvanced": self.advanced, **condition, **digest}
        if self.notes:
            result["note"] = " ".join(self.notes)
        return result


def _frames_arg(name: str, value: Any) -> int | None:
    """A frame count from the (schema-checked) arguments: None, or a whole 1..10000."""
    if value is None:
        return None
    number = as_int(value)
    if number is None or isinstance(value, bool) or not 1 <= number <= MAX_ADVANCE_FRAMES:
        raise BridgeUsageError(f"advance: '{name}' must be a whole number of frames from 1 to "
                               f"{MAX_ADVANCE_FRAMES}, not {value!r}.")
    return number


# ---------------------------------------------------------------------- paused launch
def confirm_paused_launch(client: GameClient, stop: Callable[[], Any], *, timeout_ms: int) -> dict[str, Any]:
    """After ``launch_instance {paused: true}``: the game must advertise ``clock`` (else it
    is stopped and the launch refused) and be paused (a game that ignored
    ``GAME_BRIDGE_START_PAUSED`` is paused now, and the answer says so)."""

    def stop_quietly() -> None:
        try:
            stop()
        except BridgeError as exc:  # the refusal below is the news; a failed stop is logged
            log.warning("port %s: stopping the refused launch failed: %s", client.port, exc.render())

    try:
        client.health()
        features = client.features or frozenset()
        if CLOCK not in features:
            stop_quietly()
            shown = ", ".join(sorted(features)) or "none"
            raise BridgeUsageError(
                f"launch_instance {{paused: true}}: the game launched on port {client.port} does not advertise "
                f"'clock' in /health features ({shown}), so it cannot start paused; it has been stopped. "
                "Launch it without paused, or give the game the clock extension (the kit: "
                "GameBridge(clock=True)).", port=client.port, features=sorted(features))
        state = client.state()
        out: dict[str, Any] = {"paused": True}
        if state.get("paused") is not True:
            outcome = client.command_and_sync("pause", {}, timeout_ms=timeout_ms)
            paused = outcome.get("state")
            state = paused if isinstance(paused, dict) else client.state()
            out["note"] = (f"The game did not start paused ({START_PAUSED_ENV}=1 is not honoured), so the "
                           f"bridge paused it at simFrame {state.get('simFrame')}: two launches may not start "
                           "from the same frame. `game-bridge-mcp check --launch` tests this.")
        if state.get("simFrame") is not None:
            out["simFrame"] = state.get("simFrame")
        return out
    except BridgeUsageError:
        raise
    except BridgeError:
        stop_quietly()
        raise


# ---------------------------------------------------------------------- wait_for
class RefusePaused:
    """Wraps ``wait_for``'s poll: once a look shows the game paused (and the condition did
    not already hold on it), the next poll fails at once with GamePaused, since waiting
    on a stopped clock could only time out."""

    def __init__(self, poll: Callable[[int | None], dict[str, Any]], port: int, condition: Condition, *,
                 last: Mapping[str, Any] | None = None) -> None:
        self.poll = poll
        self.port = port
        self.condition = condition
        #: The newest state looked at (``last``: one already in hand, e.g. a command's).
        self.last: Mapping[str, Any] | None = last

    def __call__(self, remaining_ms: int | None) -> dict[str, Any]:
        if self.last is not None and self.last.get("paused") is True:
            shape = until_shape(self.condition)
            raise GamePaused(
                f"The game on port {self.port} is paused (simFrame {self.last.get('simFrame')}), so "
                f"waiting for {shape} could only time out: nothing moves until it is stepped. Step it until "
                f"the condition holds with call_tool {{\"name\": \"advance\", \"arguments\": {{\"until\": {shape}}}}}, "
                "or let it run with call_tool resume.", port=self.port, paused=True)
        state = self.poll(remaining_ms)
        self.last = state
        return state


__all__ = ["Advance", "DEFAULT_MAX_FRAMES", "MAX_ADVANCE_FRAMES", "RefusePaused", "START_PAUSED_ENV", "until_shape",
           "confirm_paused_launch", "parse_until"]
