"""The bridge's side of ``clock``: ``advance``, a paused launch, and ``wait_for``'s
refusal of a paused game.

Why a module of its own: stepping a paused game until a condition holds is a loop with
rules of its own (one ``step {frames: 1}`` per frame, the condition checked after every
one so it stops at exactly the first frame where it holds, and ``simFrame`` watched to
catch a game whose clock lies), kept apart from the Bridge, which only hands it the
port's GameClient under the port's command lock.

Rules an agent can rely on (the README says them too):

* ``advance`` needs ``clock`` in ``/health`` ``features``; a running game is paused
  first (the answer says so) and stays paused afterwards.
* ``frames`` alone: exactly that many frames, in one ``step``. ``until``: frame by frame,
  at most ``maxFrames`` (default 600) or ``frames`` when given (the smaller of both);
  checked against the state before the first step too, so a condition that already
  holds advances 0 frames. ``{event}`` means an event that appears during the advance.
* Every step must move ``simFrame`` by exactly its frames; otherwise the game's clock is
  broken and ``advance`` stops with ClockBroken (rendered as NotAGameSurface).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from .. import polling
from ..errors import (BridgeError, BridgeUsageError, ClockBroken, CommandTimeout, GameOffline,
                      GamePaused)
from ..jsonio import as_int
from ..wire.client import GameClient
from .digest import event_text, get_path, json_equal, summarise
from .waiting import Condition

#: The environment variable that starts a game paused (extensions.md, ``clock``).
START_PAUSED_ENV = "GAME_BRIDGE_START_PAUSED"
#: ``advance``'s bounds: ``step`` takes 1 to 10000 frames, and so does advance.
MAX_ADVANCE_FRAMES = 10_000
DEFAULT_MAX_FRAMES = 600
#: A single ``step {frames: N}`` may take this much longer than the command timeout per
#: frame (when the game's loop period is not known yet; else twice that period).
STEP_ALLOWANCE_S = 0.05
UNTIL_KEYS = ("path", "equals", "changes", "event")

log = logging.getLogger(__name__)


def parse_until(until: Any) -> Condition:
    """``{path, equals}``, ``{path, changes: true}`` or ``{event}`` as a Condition."""
    if not isinstance(until, Mapping):
        raise BridgeUsageError(f"advance: 'until' must be an object such as {{\"path\": \"game.moving\", "
                               f"\"equals\": 0}}, not {type(until).__name__}.")
    unknown = sorted(str(k) for k in until if k not in UNTIL_KEYS)
    if unknown:
        extra = (" advance is bounded by frames (maxFrames), not by time." if "timeoutMs" in unknown else "")
        raise BridgeUsageError(f"advance: 'until' does not take {', '.join(unknown)}; it takes "
                               f"{', '.join(UNTIL_KEYS)} (the shapes of wait_for).{extra}")
    path, event, changes = until.get("path"), until.get("event"), until.get("changes", False)
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise BridgeUsageError("advance: until.path must be a dotted path into /state, e.g. 'game.moving'.")
    if event is not None and (not isinstance(event, str) or not event):
        raise BridgeUsageError("advance: until.event must be the text to look for in new events, e.g. 'merge'.")
    if not isinstance(changes, bool):
        raise BridgeUsageError(f"advance: until.changes must be true or false, not {changes!r}.")
    condition = Condition(path=path, equals=until.get("equals"), has_equals="equals" in until,
                          changes=changes, event=event)
    try:
        condition.check()
    except BridgeUsageError as exc:
        raise BridgeUsageError(exc.message.replace("wait_for", "advance: until", 1)) from None
    return condition


def new_events(before: list[Any], after: list[Any]) -> list[Any]:
    """The entries of ``after`` (a newer ``/state.events``) not already in ``before``: by
    ``seq`` when every entry has one, else by the longest overlap of ``before``'s end with
    ``after``'s start (each frame is checked, so the two lists differ by little)."""
    seqs = [as_int(e.get("seq")) if isinstance(e, Mapping) else None for e in after]
    if after and all(s is not None for s in seqs):
        old = [as_int(e.get("seq")) for e in before if isinstance(e, Mapping)]
        last = max((s for s in old if s is not None), default=None)
        return after if last is None else [e for e, s in zip(after, seqs) if s is not None and s > last]
    for overlap in range(min(len(before), len(after)), 0, -1):
        if before[-overlap:] == after[:overlap]:
            return after[overlap:]
    return after


def _events(state: Mapping[str, Any]) -> list[Any]:
    events = state.get("events")
    return events if isinstance(events, list) else []


class _Until:
    """Evaluates one Condition against each state of an advance."""

    def __init__(self, condition: Condition, first: Mapping[str, Any]) -> None:
        self.condition = condition
        self.initial = get_path(first, condition.path) if condition.path else (False, None)
        self.previous = _events(first)
        self.found: bool = self.initial[0]
        self.value: Any = self.initial[1]

    def holds(self, state: Mapping[str, Any], *, first: bool = False) -> bool:
        c = self.condition
        if c.event is not None:
            current = _events(state)
            fresh = [] if first else [t for t in (event_text(e) for e in new_events(self.previous, current))
                                      if t is not None and c.event in t]
            self.previous = current
            self.found, self.value = bool(fresh), (fresh[0] if fresh else None)
            return bool(fresh)
        self.found, self.value = get_path(state, c.path or "")
        if c.has_equals:
            return self.found and json_equal(self.value, c.equals)
        was_found, was = self.initial
        return self.found != was_found or (self.found and not json_equal(self.value, was))

    def report(self, matched: bool) -> dict[str, Any]:
        c = self.condition
        if c.event is not None:
            return {"event": c.event, **({"value": self.value} if matched else {})}
        out: dict[str, Any] = {"path": c.path, ("value" if matched else "lastValue"): self.value}
        if not self.found:
            out["pathFound"] = False
        if c.changes:
            out["initialValue"] = self.initial[1]
        return out


def _until_shape(condition: Condition) -> str:
    import json

    if condition.event is not None:
        shape: dict[str, Any] = {"event": condition.event}
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

    def __init__(self, client: GameClient, *, timeout_ms: int) -> None:
        self.client = client
        self.port = client.port
        self.timeout_ms = timeout_ms
        self.advanced = 0
        self.notes: list[str] = []

    def run(self, frames: Any, until: Any, max_frames: Any) -> dict[str, Any]:
        count = _frames_arg("frames", frames)
        bound = _frames_arg("maxFrames", max_frames)
        condition = parse_until(until) if until is not None else None
        if condition is None and bound is not None:
            raise BridgeUsageError("advance: maxFrames bounds an 'until'; to run a fixed number of frames "
                                   "give only 'frames'.")
        state = self._start()
        generation = self.client.generation
        if condition is None:
            state = self._step(count or 1, state, generation)
            return self._answer(state, matched=True)
        bounds = [b for b in (count, bound) if b is not None]
        limit = min(bounds) if bounds else DEFAULT_MAX_FRAMES
        watch = _Until(condition, state)
        matched = watch.holds(state, first=True)
        while not matched and self.advanced < limit:
            polling.check_cancelled()  # a cancelled call ends between frames, not after maxFrames
            state = self._step(1, state, generation)
            matched = watch.holds(state)
        if not matched:
            self.notes.append(f"until {_until_shape(condition)} did not hold within {limit} frames; "
                              "the game stays paused here. Advance again to go on.")
        return self._answer(state, matched=matched, **watch.report(matched))

    # ------------------------------------------------------------------ parts
    def _start(self) -> dict[str, Any]:
        """Check the game has a clock, pause it when it runs; the state to start from."""
        self.client.health()
        features = self.client.features or frozenset()
        if "clock" not in features:
            shown = ", ".join(sorted(features)) or "none"
            raise BridgeUsageError(
                f"The game on port {self.port} has no clock: its /health features ({shown}) do not include "
                "'clock', so it cannot be paused or stepped and advance cannot run it frame by frame. "
                "Use wait_for to watch it run, or give the game the clock extension (the kit: "
                "GameBridge(clock=True)).", port=self.port, features=sorted(features))
        state = self.client.state()
        if state.get("paused") is not True:
            outcome = self.client.command_and_sync("pause", {}, timeout_ms=self.timeout_ms)
            paused = outcome.get("state")
            state = paused if isinstance(paused, dict) else self.client.state()
            if state.get("paused") is not True:
                raise ClockBroken(self.port, f"it was asked to pause and /state still says paused: "
                                             f"{state.get('paused')!r}", frames_advanced=0)
            self.notes.append(f"The game was running; advance paused it first (at simFrame "
                              f"{state.get('simFrame')}). It stays paused: call_tool resume lets it run.")
        if as_int(state.get("simFrame")) is None:
            self.notes.append("/state has no simFrame, so advance cannot check that each step ran exactly "
                              "its frames.")
        return state

    def _step(self, frames: int, before: dict[str, Any], generation: int) -> dict[str, Any]:
        timeout_ms = self.timeout_ms
        if frames > 1:  # one step of many frames: allow for the game's frames on top
            period = self.client.frames.period_s
            per_frame = STEP_ALLOWANCE_S if period is None else max(0.001, 2 * period)
            timeout_ms += int(frames * per_frame * 1000)
        try:
            outcome = self.client.command_and_sync("step", {"frames": frames}, timeout_ms=timeout_ms)
        except GameOffline as exc:
            raise GameOffline(self.port, message=(
                f"The game on port {self.port} stopped answering during advance, {self._where(before)}: "
                f"{exc.message.splitlines()[0]}"), cause=exc.cause, endpoint=exc.endpoint, detail=exc.detail,
                launch_hint=self.client.launch_hint) from None
        except CommandTimeout as exc:
            raise CommandTimeout(self.port, "step", timeout_ms, message=(
                f"advance on port {self.port} stopped {self._where(before)}: {exc.message}"),
                framesAdvanced=self.advanced) from None
        state = outcome.get("state")
        if not isinstance(state, dict):
            state = self.client.state()
        if self.client.generation != generation:
            raise GameOffline(self.port, message=(
                f"The game on port {self.port} restarted during advance ({self._where(before)}): frame went "
                "backwards, so its clock and world are new. Launch or pause it again before advancing."),
                cause="reset", endpoint="/state", launch_hint=self.client.launch_hint)
        self._verify(frames, before, state)
        self.advanced += frames
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

    def _answer(self, state: Mapping[str, Any], *, matched: bool, **condition: Any) -> dict[str, Any]:
        digest = summarise(state)
        digest.pop("completedCommandId", None)
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
        if "clock" not in features:
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

    def __init__(self, poll: Callable[[int | None], dict[str, Any]], port: int, condition: Condition) -> None:
        self.poll = poll
        self.port = port
        self.condition = condition
        self.last: Mapping[str, Any] | None = None

    def __call__(self, remaining_ms: int | None) -> dict[str, Any]:
        if self.last is not None and self.last.get("paused") is True:
            shape = _until_shape(self.condition)
            raise GamePaused(
                f"The game on port {self.port} is paused (simFrame {self.last.get('simFrame')}), so "
                f"waiting for {shape} could only time out: nothing moves until it is stepped. Step it until "
                f"the condition holds with call_tool {{\"name\": \"advance\", \"arguments\": {{\"until\": {shape}}}}}, "
                "or let it run with call_tool resume.", port=self.port, paused=True)
        state = self.poll(remaining_ms)
        self.last = state
        return state


__all__ = ["Advance", "DEFAULT_MAX_FRAMES", "MAX_ADVANCE_FRAMES", "RefusePaused", "START_PAUSED_ENV",
           "confirm_paused_launch", "new_events", "parse_until"]
