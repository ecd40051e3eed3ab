"""Conditions on the game's state (``{path, equals}``, ``{path, changes}``, ``{event}``) and on
its picture (``{screen: "changes"}``, ``{screen: "stable", frames}``, optionally in a region),
watched state by state, and waiting for one under one absolute deadline: the one
implementation behind ``wait_for``, ``until`` and ``advance``. A picture condition reads the
hash its caller fetched beside each state (``screen.py``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import polling
from ..contract import (CONDITION_KEYS, CONDITION_SHAPES, DEFAULT_STABLE_FRAMES, DEFAULT_WAIT_MS, MAX_STEP_FRAMES,
                        MAX_WAIT_MS, SCREEN_WAITS, TIMEOUT_KEY)
from ..contract import SCREENSHOT_FEATURE
from ..wire.client import GameClient
from ..wire.screen import Region, ScreenHash, screen_hash
from .digest import digest_keeps, event_text, get_path, json_equal, shown_value
from ..errors import BridgeUsageError, GameOffline
from ..jsonio import as_int

#: The keys of a condition given as an object (``until``, ``advance``'s ``until``), and its shapes.
SHAPES = CONDITION_SHAPES


@dataclass(frozen=True)
class Condition:
    """Exactly one of: ``path`` equals ``equals``; ``path`` changes; an ``event`` appears
    (an event whose text contains ``event``). ``has_equals`` tells ``equals: null`` (wait
    for null) from no ``equals``."""

    path: str | None = None
    equals: Any = None
    has_equals: bool = False
    changes: bool = False
    event: str | None = None
    #: ``changes`` or ``stable``: the picture, not the state.
    screen: str | None = None
    #: With ``stable``: frames the picture holds still.
    frames: int = DEFAULT_STABLE_FRAMES
    region: Region | None = None
    #: The tool the condition belongs to, for messages.
    what: str = "wait_for"

    def check(self) -> None:
        if sum([self.has_equals, self.changes, self.event is not None, self.screen is not None]) != 1:
            raise BridgeUsageError(f"{self.what} needs exactly one condition: path + equals, path + changes: true, "
                                   "event, or screen.")
        if self.screen is not None:
            if self.screen not in SCREEN_WAITS or self.path is not None:
                raise BridgeUsageError(f"{self.what}: screen is \"changes\" or \"stable\" (with frames), on its own "
                                       f"or with a region; got screen {str(self.screen)[:40]!r}"
                                       + (" and a path" if self.path is not None else "") + ".")
            if isinstance(self.frames, bool) or not isinstance(self.frames, int) or not 1 <= self.frames <= MAX_STEP_FRAMES:
                raise BridgeUsageError(f"{self.what}: frames must be a whole number from 1 to {MAX_STEP_FRAMES}.")
            return
        if (self.has_equals or self.changes) and not self.path:
            raise BridgeUsageError(f"{self.what}: 'path' is required with 'equals' or 'changes' "
                                   "(a dotted path into /state, e.g. 'game.score').")
        if self.event is not None and (not isinstance(self.event, str) or not self.event):
            raise BridgeUsageError(f"{self.what}: 'event' must be a non-empty text to look for in the events.")
        if self.path is not None and not isinstance(self.path, str):
            raise BridgeUsageError(f"{self.what}: 'path' must be a dotted path as text, e.g. 'game.score'.")

    @classmethod
    def from_spec(cls, spec: Any, *, what: str = "until", timeout: bool = True) -> tuple["Condition", int | None]:
        """A condition given as an object: ``{path, equals}``, ``{path, changes: true}`` or
        ``{event}``, plus ``timeoutMs`` when ``timeout`` (returned apart; None when not
        given). Raises BridgeUsageError naming what is wrong with any other shape."""
        keys = CONDITION_KEYS + ((TIMEOUT_KEY,) if timeout else ())
        usage = f"{what} takes {SHAPES}" + (", with an optional timeoutMs" if timeout else "")
        if not isinstance(spec, Mapping):
            raise BridgeUsageError(f"{usage}; got {type(spec).__name__}.")
        unknown = [str(k) for k in spec if k not in keys]
        if unknown:
            raise BridgeUsageError(f"{what}: unknown key '{unknown[0][:64]}'. {usage}.")
        changes = spec.get("changes", False)
        if not isinstance(changes, bool):
            raise BridgeUsageError(f"{what}: 'changes' must be true (or left out), not {changes!r:.60}.")
        timeout_ms = None
        if timeout and spec.get("timeoutMs") is not None:
            timeout_ms = as_int(spec.get("timeoutMs"))
            if timeout_ms is None or not 1 <= timeout_ms <= MAX_WAIT_MS:
                raise BridgeUsageError(f"{what}: 'timeoutMs' must be a whole number of milliseconds from 1 to {MAX_WAIT_MS}.")
        if ("frames" in spec or "region" in spec) and "screen" not in spec:
            raise BridgeUsageError(f"{what}: frames and region go with screen. {usage}.")
        region = Region.parse(spec["region"], what) if spec.get("region") is not None else None
        frames = spec.get("frames", DEFAULT_STABLE_FRAMES)
        condition = cls(path=spec.get("path"), equals=spec.get("equals"), has_equals="equals" in spec,
                        changes=changes, event=spec.get("event"), screen=spec.get("screen"),
                        frames=DEFAULT_STABLE_FRAMES if frames is None else frames, region=region, what=what)
        condition.check()
        return condition, timeout_ms

    @property
    def needs_baseline(self) -> bool:
        """Whether it should be watched from a state taken before the action (``changes``
        differs from it; ``event`` must be new since it)."""
        return self.changes or self.event is not None or self.screen == "changes"

    @property
    def digest_answers(self) -> bool | None:
        """Whether ``/state?view=digest`` is enough to evaluate it: True; None (a
        ``game.<key>``, kept in the digest only while its value is a scalar); or False."""
        if self.event is not None or self.screen is not None:
            return True
        keeps = digest_keeps(self.path or "")
        if keeps is None and self.has_equals and isinstance(self.equals, (dict, list)):
            return False  # awaited to equal an object or a list: never in the digest
        return keeps

    def watch(self, baseline: Mapping[str, Any] | None = None) -> "Watch":
        """A fresh evaluation of this condition (see the module's docstring)."""
        return Watch(self, baseline)

    def describe(self) -> str:
        """The condition in words: ``game.moving equals 0``."""
        if self.screen is not None:
            where = f"{self.region.describe()} of the picture" if self.region is not None else "the picture"
            return f"{where} changes" if self.screen == "changes" else f"{where} holds still for {self.frames} frames"
        if self.event is not None:
            return f"an event containing {self.event!r:.80}"
        if self.changes:
            return f"{self.path} changes"
        return f"{self.path} equals {self.equals!r:.80}"


@dataclass(frozen=True)
class Until:
    """``call_tool``'s ``until``: a condition to wait for after the command, and how long."""

    condition: Condition
    timeout_ms: int | None = None

    @classmethod
    def parse(cls, spec: Any) -> "Until | None":
        """None when ``spec`` is None; BridgeUsageError for a shape that is not a condition."""
        if spec is None:
            return None
        condition, timeout_ms = Condition.from_spec(spec, what="until")
        return cls(condition, timeout_ms)


def _seq(event: Any) -> int | None:
    return as_int(event.get("seq")) if isinstance(event, Mapping) else None


def new_entries(before: list[Any], after: list[Any]) -> list[Any]:
    """The entries of ``after`` (a newer ``/state.events``, without ``seq``) that were not
    in ``before``: those past the longest end of ``before`` that ``after`` starts with."""
    for overlap in range(min(len(before), len(after)), 0, -1):
        if before[-overlap:] == after[:overlap]:
            return after[overlap:]
    return after


@dataclass
class Watch:
    """One evaluation of a Condition over successive states; :meth:`observe` each one."""

    condition: Condition
    baseline: Mapping[str, Any] | None = None
    matched: bool = False
    found: bool = False
    value: Any = None
    initial: tuple[bool, Any] | None = None
    _since_seq: int | None = field(default=None, repr=False)
    #: Without seq: the events of the last state looked at (from the baseline on).
    _previous: list[Any] | None = field(default=None, repr=False)
    #: ``screen``: the picture's hash last seen, the frame it was first seen at, the last frame.
    _shown: tuple[str, int | None] | None = field(default=None, repr=False)
    last_change: int | None = None
    _frame: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.baseline is None:
            return
        if self.condition.screen is not None:
            self._see(self.baseline)
            return
        if self.condition.event is not None:
            events = self.baseline.get("events")
            seqs = [s for s in (_seq(e) for e in events) if s is not None] if isinstance(events, list) else []
            self._since_seq = max(seqs) if seqs else None
            self._previous = list(events) if isinstance(events, list) else []
        elif self.condition.changes:
            self.initial = get_path(self.baseline, self.condition.path or "")

    def _see(self, state: Mapping[str, Any]) -> bool:
        """The picture beside ``state``: whether it differs from the one seen before."""
        seen = getattr(state, "screen", None)
        if seen is None:
            raise BridgeUsageError(f"{self.condition.what}: no picture was fetched beside the state "
                                   "(the bridge's own mistake: please report it).")
        frame = as_int(state.get("simFrame"))
        frame = as_int(state.get("frame")) if frame is None else frame
        self._frame = frame
        self.found, self.value = True, seen.hash
        if self._shown is None or self._shown[0] != seen.hash:
            changed = self._shown is not None
            self._shown = (seen.hash, frame)
            if changed:
                self.last_change = frame
            return changed
        return False

    def observe(self, state: Mapping[str, Any]) -> bool:
        """Evaluate the condition in ``state``; True when it holds there."""
        condition = self.condition
        if condition.screen is not None:
            first = self._shown is None
            changed = self._see(state)
            if condition.screen == "changes":
                self.matched = changed
            else:
                assert self._shown is not None
                since = self._shown[1]
                self.matched = not first and since is not None and self._frame is not None and \
                    self._frame - since >= condition.frames
            return self.matched
        if condition.event is not None:
            events = state.get("events")
            entries = list(events) if isinstance(events, list) else []
            if self._previous is not None and not any(_seq(e) is not None for e in entries):
                entries, self._previous = new_entries(self._previous, entries), entries
            hits = []
            for entry in entries:
                seq = _seq(entry)
                if self._since_seq is not None and seq is not None and seq <= self._since_seq:
                    continue
                text = event_text(entry)
                if text is not None and condition.event in text:
                    hits.append(text)
            self.matched = bool(hits)
            self.found = self.matched
            self.value = hits[-1] if hits else None
            return self.matched
        self.found, self.value = get_path(state, condition.path or "")
        if condition.has_equals:
            self.matched = self.found and json_equal(self.value, condition.equals)
        elif self.initial is None:
            self.initial = (self.found, self.value)
            self.matched = False
        else:
            before_found, before = self.initial
            self.matched = self.found != before_found or (self.found and not json_equal(self.value, before))
        return self.matched

    def report(self) -> dict[str, Any]:
        """What was seen, compactly: ``value`` when matched by a change or an event, else
        ``lastValue``; ``pathFound: false`` when the path was never there."""
        condition = self.condition
        out: dict[str, Any] = {}
        if condition.screen is not None:
            out["screenHash"] = self.value
            if self.last_change is not None:
                out["lastChangeFrame"] = self.last_change
            return out
        if condition.event is not None:
            if self.matched:
                out["value"] = self.value
            return out
        if self.matched:
            if condition.changes:
                out["value"] = shown_value(self.value)
        else:
            out["lastValue"] = shown_value(self.value)
            if not self.found:
                out["pathFound"] = False
        return out

    def miss_note(self, total_ms: int) -> str:
        """Why it did not hold, for the answer at the deadline."""
        condition = self.condition
        if condition.screen == "stable":
            changed = (f"; it last changed at frame {self.last_change}" if self.last_change is not None
                       else "; it never held still long enough")
            return f"{condition.describe()} did not happen within {total_ms}ms{changed}."
        if condition.path is not None and not self.found:
            return (f"{condition.path} was not in the state within {total_ms}ms. Check the path "
                    "(dotted, e.g. game.score) against get_state.")
        return f"{condition.describe()} did not happen within {total_ms}ms."


@dataclass(frozen=True)
class Waited:
    """How a wait ended: whether the watch held, the state it held in (or the last one),
    how many states were fetched, and how long it took."""

    matched: bool
    state: Mapping[str, Any]
    polls: int
    elapsed_ms: int
    total_ms: int


def wait_until(poll: Callable[[int | None], Mapping[str, Any]], watch: Watch, *,
               timeout_ms: int | None, poll_cost_s: Callable[[], float],
               first: Mapping[str, Any] | None = None) -> Waited:
    """Poll until ``watch`` holds or the deadline passes.

    ``poll(timeout_ms)`` fetches one snapshot (``None``: the usual request timeout, used for
    the first look); ``poll_cost_s()`` is what the last fetch cost, so a big state is polled
    no faster than every other fetch's worth of time. ``first``, when given, is a state
    already in hand (the one a command was confirmed in), observed before any fetch."""
    total_ms = DEFAULT_WAIT_MS if timeout_ms is None else min(int(timeout_ms), MAX_WAIT_MS)
    started = time.monotonic()
    deadline = polling.Deadline(total_ms / 1000.0, start=started)
    polls = 0
    last: Mapping[str, Any] = first if first is not None else {}
    if first is not None and watch.observe(first):
        return Waited(True, first, 0, 0, total_ms)

    def look() -> bool | None:
        nonlocal polls, last
        remaining = None if polls == 0 and first is None else deadline.remaining_ms()
        try:
            state = poll(remaining)
        except GameOffline:
            if (polls or first is not None) and deadline.expired:
                return False  # a poll cut short by the wait's own deadline: not matched
            raise
        polls += 1
        last = state
        if watch.observe(state):
            return True
        elapsed_ms = int((time.monotonic() - started) * 1000)
        polling.report_progress(elapsed_ms, total_ms, f"waiting for {watch.condition.describe()}: "
                                                      f"{elapsed_ms} of {total_ms} ms, {polls} looks")
        return None

    # 1.5 ms, growing by half each time, to at most every other fetch's worth of time.
    polling.poll_until(look, deadline, first_s=0.0015, max_s=lambda: max(0.025, 2 * poll_cost_s()))
    return Waited(watch.matched, last, polls, int((time.monotonic() - started) * 1000), total_ms)


def wait_for_state(poll: Callable[[int | None], Mapping[str, Any]], condition: Condition, *,
                   timeout_ms: int | None, poll_cost_s: Callable[[], float]) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """``wait_for``: poll until ``condition`` holds; the answer's fields (without the
    digest) and the state it ended on (the matching one, or the last one seen). The
    condition is checked against the current state first; ``changes`` against it too."""
    condition.check()
    watch = condition.watch()
    waited = wait_until(poll, watch, timeout_ms=timeout_ms, poll_cost_s=poll_cost_s)
    result: dict[str, Any] = {"tool": "wait_for", "matched": waited.matched}
    if condition.screen is not None:
        result.update(watch.report())  # (no "screen" key: the digest's screen is ui.screen)
    elif condition.event is not None:
        result["event"] = condition.event
        if waited.matched:
            result["value"] = shown_value(watch.value)
    else:
        result["path"] = condition.path
        result["value" if waited.matched else "lastValue"] = shown_value(watch.value)
        if not watch.found:
            result["pathFound"] = False
        if condition.changes and watch.initial is not None:
            result["initialValue"] = shown_value(watch.initial[1])
    result.update({"elapsedMs": waited.elapsed_ms, "polls": waited.polls})
    if not waited.matched:
        result["note"] = watch.miss_note(waited.total_ms)
    return result, waited.state


# ----------------------------------------------------------------------------- the picture beside a state

class Seen(dict):  # type: ignore[type-arg]
    """A state, with the picture's hash taken right after it (``screen``)."""

    screen: ScreenHash | None = None


def check_screen(client: GameClient, condition: Condition) -> None:
    """A picture condition needs the game's pictures: BridgeUsageError naming the feature
    when its ``/health`` does not list ``screenshot``."""
    if condition.screen is None:
        return
    features = client.features if client.features is not None else client.learn_features()
    if SCREENSHOT_FEATURE not in features:
        shown = ", ".join(sorted(features)) or "none"
        raise BridgeUsageError(
            f"{condition.what}: the game on port {client.port} does not serve screenshots (its /health features: "
            f"{shown}), so its picture cannot be watched. Wait on its state instead ({{path, changes: true}} or "
            "{event}), or give it the screenshot feature.", port=client.port, feature=SCREENSHOT_FEATURE)


def with_screen(client: GameClient, condition: Condition, state: dict[str, Any], *,
                timeout_ms: int | None = None) -> dict[str, Any]:
    """``state`` as it is, or (a picture condition) with the picture's hash beside it."""
    if condition.screen is None:
        return state
    seen = Seen(state)
    seen.screen = screen_hash(client, condition.region, timeout_ms=timeout_ms)
    return seen
