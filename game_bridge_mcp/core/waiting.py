"""``wait_for``: poll ``/state`` until a condition holds, under one absolute deadline.

Kept apart from the Bridge because it is a loop over snapshots with no state of its own:
the Bridge hands it a ``poll`` function (one ``/state`` fetch, given the time left) and
gets back the JSON-ready result. The condition is checked against the current state
first; on timeout the result says ``matched: false`` with the last value seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from .. import polling
from .digest import all_events, get_path, json_equal
from ..errors import BridgeUsageError, GameOffline

MAX_WAIT_MS = 600_000
DEFAULT_WAIT_MS = 5000


@dataclass(frozen=True)
class Condition:
    """Exactly one of: ``path`` equals ``equals``; ``path`` changes; an ``event`` appears."""

    path: str | None = None
    equals: Any = None
    has_equals: bool = False
    changes: bool = False
    event: str | None = None

    def check(self) -> None:
        if sum([self.has_equals, self.changes, self.event is not None]) != 1:
            raise BridgeUsageError("wait_for needs exactly one condition: path + equals, path + changes: true, or event.")
        if (self.has_equals or self.changes) and not self.path:
            raise BridgeUsageError("wait_for: 'path' is required with 'equals' or 'changes' "
                                   "(a dotted path into /state, e.g. 'game.score').")


def wait_for_state(poll: Callable[[int | None], dict[str, Any]], condition: Condition, *,
                   timeout_ms: int | None, poll_cost_s: Callable[[], float]) -> dict[str, Any]:
    """Poll until ``condition`` holds or the deadline passes.

    ``poll(timeout_ms)`` fetches one snapshot (``None``: the usual request timeout, used
    for the first look); ``poll_cost_s()`` is what the last fetch cost, so a big state is
    polled no faster than every other fetch's worth of time."""
    condition.check()
    total_ms = DEFAULT_WAIT_MS if timeout_ms is None else min(int(timeout_ms), MAX_WAIT_MS)
    started = time.monotonic()
    deadline = started + total_ms / 1000.0
    interval = 0.001
    polls = 0
    initial: tuple[bool, Any] | None = None
    matched, found, value, last_state = False, False, None, {}
    while True:
        remaining = None if polls == 0 else max(1, int((deadline - time.monotonic()) * 1000))
        try:
            state = poll(remaining)
        except GameOffline:
            if polls and time.monotonic() >= deadline:
                break  # a poll cut short by the wait's own deadline: not matched
            raise
        polls += 1
        last_state = state
        if condition.event is not None:
            hits = [e for e in all_events(state) if condition.event in e]
            matched, value = bool(hits), (hits[-1] if hits else None)
            found = matched
        else:
            found, value = get_path(state, condition.path or "")
            if condition.has_equals:
                matched = found and json_equal(value, condition.equals)
            elif initial is None:
                initial = (found, value)
            else:
                matched = found != initial[0] or (found and not json_equal(value, initial[1]))
        now = time.monotonic()
        if matched or now >= deadline:
            break
        interval = min(interval * 1.5, max(0.025, 2 * poll_cost_s()))
        polling.sleep(min(interval, max(0.0, deadline - now)))
    result: dict[str, Any] = {"tool": "wait_for", "matched": matched}
    if condition.event is not None:
        result["event"] = condition.event
        if matched:
            result["value"] = value
    else:
        result["path"] = condition.path
        result["value" if matched else "lastValue"] = value
        if not found:
            result["pathFound"] = False
        if condition.changes and initial is not None:
            result["initialValue"] = initial[1]
    result.update({"elapsedMs": int((time.monotonic() - started) * 1000), "polls": polls})
    if isinstance(last_state.get("frame"), (int, float)):
        result["frame"] = last_state["frame"]
    if not matched:
        result["note"] = f"Not matched within {total_ms}ms."
    return result
