"""The state and waiting tools: ``get_state``, ``get_health`` and ``wait_for``."""

from __future__ import annotations

from typing import Any

from .commands import condition_polls, digest
from ..host import Host
from .. import clock
from ..waiting import Condition, wait_for_state
from ...contract import condition_properties
from .shapes import BOOL, INT, STR, answer, from_game, rooted, with_digest
from .unit import PORT, ToolDef, schema

#: ``wait_for``'s ``equals`` when it was not given (None is a value to wait for).
UNSET: Any = object()

# ----------------------------------------------------------------------------- get_state

STATE_DIGEST = with_digest(answer("get_state {summary: true}'s answer", {"port": INT}, ("port",)))
WHOLE_STATE = {"type": "object", "title": "get_state's answer: the game's own /state, as it sent it"}


def get_state(bridge: Host, *, port: Any = None, summary: bool | None = False) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    state = bridge.guarded(target, lambda: bridge.client(target).state(digest=bool(summary)))
    if summary:
        return {"port": target, **digest(bridge, target, state)}
    return state


GET_STATE = ToolDef(
    "get_state", "Read the game state",
    "The game's full /state snapshot, or with summary: true a compact digest of all of it (frame, screen, "
    "visible element labels, text: the game's text picture of the screen, paused, scalar game fields, "
    "and the events no answer showed yet). Prefer the summary unless you need entities.",
    schema({"port": PORT, "summary": {"type": "boolean", "description": "Return the compact digest instead of the full snapshot (default false)."}}),
    get_state, rooted({"anyOf": [STATE_DIGEST, WHOLE_STATE], "type": "object"}), read_only=True, idempotent=True)

# ----------------------------------------------------------------------------- get_health

HEALTH_ANSWER = answer("get_health's answer: GET /health", {
    "port": INT, "ok": from_game("Whether the game says it is fine"), "frame": from_game("The frame counter"),
    "features": from_game("The extensions the game serves"),
}, ("port",))


def get_health(bridge: Host, *, port: Any = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    health = bridge.guarded(target, lambda: bridge.client(target).health())
    # The bridge's port stands first and cannot be overwritten by a /health that says "port" itself.
    return {"port": target, **{key: value for key, value in health.items() if key != "port"}}


GET_HEALTH = ToolDef(
    "get_health", "Check the game is alive",
    "Liveness and the frame counter (GET /health). Cheap; use it to see whether an instance is up.",
    schema({"port": PORT}),
    get_health, HEALTH_ANSWER, read_only=True, idempotent=True)

# ----------------------------------------------------------------------------- wait_for

WAIT_ANSWER = with_digest(answer("wait_for's answer", {
    "port": INT, "tool": {"const": "wait_for"}, "matched": BOOL, "path": STR, "event": STR,
    "value": from_game("The value the condition held with"), "lastValue": from_game("The value at the deadline"),
    "initialValue": from_game("With changes: the value it changed from"), "pathFound": BOOL,
    "elapsedMs": INT, "polls": INT,
}, ("port", "tool", "matched", "elapsedMs", "polls")))


def wait_for(bridge: Host, *, port: Any = None, path: str | None = None, equals: Any = UNSET,
             changes: bool | None = False, event: str | None = None, timeout_ms: Any = None) -> dict[str, Any]:
    """``equals`` left out and ``equals=None`` differ: the latter waits for null."""
    target = bridge.resolve_port(port)
    condition = Condition(path=path, equals=None if equals is UNSET else equals,
                          has_equals=equals is not UNSET, changes=bool(changes), event=event)
    condition.check()
    poll, cost = condition_polls(bridge, target, condition)
    result, state = wait_for_state(clock.RefusePaused(poll, target, condition), condition,
                                   timeout_ms=timeout_ms, poll_cost_s=cost)
    return {"port": target, **result, **digest(bridge, target, state)}


WAIT_FOR = ToolDef(
    "wait_for", "Wait for a condition in the state",
    "Poll /state until a path equals a value (path + equals), a path changes (path + changes: true), or "
    "an event appears (event: text contained in an event). Checked against the current state first. "
    "Use it for what a command cannot report: a screenshot reaching disk, a board settling, frame N. "
    "Answers with the digest of the matching state; on timeout matched: false with the last value seen. "
    "After a command, call_tool's until does the same in one call. A paused game (clock) is refused at "
    "once: step it with advance instead.",
    schema({"port": PORT, **condition_properties(
        path="Dotted path into /state, e.g. 'game.pendingMerges' or 'ui.elements.0.label'.",
        equals="The value to wait for (any JSON).",
        changes="Wait until the value at path differs from now.",
        event="Wait until an event containing this text is among the recent events.",
        timeout="The deadline (default 5000).")}),
    wait_for, rooted(WAIT_ANSWER), read_only=True)
