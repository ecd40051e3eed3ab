"""The state and waiting tools: ``get_state``, ``get_health`` and ``wait_for``; a state read in
parts (``get_state {path, offset, limit}``: a subtree, or a page of a list, an object's keys or a
string) and what an answer too large to send says instead: how large it was and which parts to
read (docs/tools.md, "Answers have a size cap")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .commands import condition_polls, digest
from ..host import Host
from .. import clock
from ..waiting import Condition, check_screen, wait_for_state
from ...contract import DEFAULT_STABLE_FRAMES, condition_properties
from ...wire.screen import Region
from ...errors import BridgeUsageError
from ..digest import get_path
from .shapes import BOOL, INT, STR, answer, from_game, rooted, with_digest
from .unit import PORT, ToolDef, schema

#: ``wait_for``'s ``equals`` when it was not given (None is a value to wait for).
UNSET: Any = object()

# ----------------------------------------------------------------------------- parts

#: The most bytes one answer may take on the wire (its JSON-RPC line: the text block and the
#: structuredContent together, an image included). The TypeScript SDK's stdio transport drops
#: the connection on a message over 10 MiB; this stays well under it.
ANSWER_LIMIT = 4 * 1024 * 1024
#: What a part may take as JSON so that its answer fits whatever it holds: the line carries
#: it twice (text and structuredContent), the text's copy escaped (at most twice as long).
PART_BUDGET = (ANSWER_LIMIT - 64 * 1024) // 3
#: The parts an oversized answer names, largest first.
MAX_NAMED_PARTS = 8
#: The keys or items shown where a path stops.
MAX_SHOWN_KEYS = 20

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


class AnswerTooLarge(BridgeUsageError):
    """An answer over :data:`ANSWER_LIMIT`: not sent; the message says how large it was
    and how to read it in parts (``parts``: the calls to make). Rendered as the
    BridgeUsageError it is (the agent must ask differently); its own type lets code tell it apart."""

    def __init__(self, message: str, *, size: int, parts: list[str]) -> None:
        super().__init__(message, tooLarge=True, bytes=size, limit=ANSWER_LIMIT, parts=parts)
        self.parts = parts

    @property
    def name(self) -> str:
        return "BridgeUsageError"


def _json_size(value: Any) -> int:
    text = _ENCODE(value)
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"an object of {len(value)} keys"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return type(value).__name__


def _page_size(count: int, size: int) -> int:
    """How many of ``count`` items (``size`` bytes together) one part can hold."""
    return max(1, min(count, int(count * PART_BUDGET / max(size, 1))))


def _how_to_read(path: str, value: Any, size: int) -> str:
    """The get_state call that reads ``value`` (at ``path``, ``size`` bytes) whole, or its first part."""
    quoted = json.dumps(path, ensure_ascii=False)
    if size <= PART_BUDGET:
        return f"get_state {{path: {quoted}}}"
    if isinstance(value, (list, Mapping)) and len(value) > 1:
        return f"get_state {{path: {quoted}, offset: 0, limit: {_page_size(len(value), size)}}}"
    if isinstance(value, str):
        return f"get_state {{path: {quoted}, offset: 0, limit: {PART_BUDGET // 4}}}"
    if isinstance(value, Mapping):  # one huge key: go into it
        return _how_to_read(_join(path, next(iter(value))), next(iter(value.values())), size)
    if isinstance(value, list):
        return _how_to_read(_join(path, 0), value[0], size)
    return f"get_state {{path: {quoted}}}"


#: An object over PART_BUDGET with at most this many keys is named by its keys' parts; a
#: larger one is paged by its keys.
MAX_EXPANDED_KEYS = 64


def outline(value: Any, path: str = "") -> list[str]:
    """The largest parts of ``value`` (at ``path`` in the state), each as the call that reads
    it and what it is: at most MAX_NAMED_PARTS, largest first, each fitting an answer. An
    object too large for one part is named by its own parts, down to lists, strings and
    objects of many keys, which are read a page at a time."""
    parts = [(path, value, _json_size(value))]
    for _ in range(4 * MAX_NAMED_PARTS):  # open the largest object that does not fit, a bounded number of times
        opened = next((entry for entry in sorted(parts, key=lambda e: -e[2])
                       if entry[2] > PART_BUDGET and isinstance(entry[1], Mapping)
                       and 0 < len(entry[1]) <= MAX_EXPANDED_KEYS), None)
        if opened is None:
            break
        parts.remove(opened)
        parts += [(_join(opened[0], key), item, _json_size(item)) for key, item in opened[1].items()]
    parts.sort(key=lambda entry: -entry[2])
    return [f"{_how_to_read(where, item, size)}: {_kind(item)}, {size:,} bytes"
            for where, item, size in parts[:MAX_NAMED_PARTS]]


def too_large(value: Any, size: int, tool: str, arguments: Mapping[str, Any]) -> AnswerTooLarge:
    """What an answer of ``size`` bytes over the limit says instead: for a state read
    (``get_state``, also through ``call_tool``), which parts to read; for any other
    answer, how to ask for less."""
    head = (f"The answer is {size:,} bytes, over the {ANSWER_LIMIT:,} an answer may take (MCP clients drop "
            "larger messages, and the connection with them), so it was not sent.")
    asked = arguments
    if tool == "call_tool":
        tool = str(arguments.get("name") or "")
        inner = arguments.get("arguments")
        asked = inner if isinstance(inner, Mapping) else {}
    if tool != "get_state" or not isinstance(value, Mapping):
        hint = ("Ask for less: a smaller maxWidth/maxHeight for a screenshot, a smaller limit for events, "
                "get_state {path} for a part of a state.")
        return AnswerTooLarge(f"{head} {hint}", size=size, parts=[])
    path = str(asked.get("path") or "")
    part = value.get("value", value) if path else value
    parts = outline(part, path)
    listed = "".join(f"\n  {line}" for line in parts)
    return AnswerTooLarge(f"{head} Read the state in parts with get_state {{path, offset, limit}} (through call_tool); its largest "
                          f"parts{' under ' + json.dumps(path) if path else ''}:{listed}", size=size, parts=parts)


def _stops_at(document: Any, path: str) -> str:
    """Where ``path`` stops in ``document``: the longest prefix found, and what is there."""
    segments = [s for s in path.replace("[", ".").replace("]", "").split(".") if s != ""]
    for cut in range(len(segments) - 1, -1, -1):
        prefix = ".".join(segments[:cut])
        found, value = get_path(document, prefix)
        if not found:
            continue
        where = f"'{prefix}'" if prefix else "the state"
        if isinstance(value, Mapping):
            keys = ", ".join(str(k) for k in list(value)[:MAX_SHOWN_KEYS])
            more = f" and {len(value) - MAX_SHOWN_KEYS} more" if len(value) > MAX_SHOWN_KEYS else ""
            return f"{where} is an object with keys: {keys or '(none)'}{more}"
        return f"{where} is {_kind(value)}"
    return "the state has none of it"


def state_part(document: Any, path: str, offset: int | None, limit: int | None) -> dict[str, Any]:
    """``get_state {path, offset, limit}``'s answer (without its port): the value at
    ``path`` whole, or with ``offset``/``limit`` one page of it (a list's items, an
    object's keys in order, a string's characters) with ``total`` and ``next``."""
    found, value = get_path(document, path)
    if not found:
        raise BridgeUsageError(f"get_state: the state has nothing at '{path}' ({_stops_at(document, path)}). "
                               "Paths are dotted keys and list indexes, e.g. 'game.board.0'.", path=path)
    if offset is None and limit is None:
        return {"path": path, "value": value}
    start = offset or 0
    if isinstance(value, list):
        total = len(value)
        end = total if limit is None else min(total, start + limit)
        page: Any = value[start:end]
    elif isinstance(value, Mapping):
        keys = list(value)
        total = len(keys)
        end = total if limit is None else min(total, start + limit)
        page = {key: value[key] for key in keys[start:end]}
    elif isinstance(value, str):
        total = len(value)
        end = total if limit is None else min(total, start + limit)
        page = value[start:end]
    else:
        raise BridgeUsageError(f"get_state: '{path}' is {_kind(value)}; offset and limit page a list, an object's "
                               "keys or a string. Leave them out to read it whole.", path=path)
    end = max(end, start)
    return {"path": path, "offset": start, "total": total, "value": page, "next": end if end < total else None}


# ----------------------------------------------------------------------------- get_state

STATE_DIGEST = with_digest(answer("get_state {summary: true}'s answer", {"port": INT}, ("port",)))
WHOLE_STATE = {"type": "object", "title": "get_state's answer: the game's own /state, as it sent it"}
STATE_PART = answer("get_state {path, offset, limit}'s answer: a part of the state", {
    "port": INT, "path": STR, "value": from_game("The value at path (with offset/limit: one page of it)"),
    "offset": INT, "total": {"type": "integer", "description": "Items, keys or characters at path in all"},
    "next": {"type": ["integer", "null"], "description": "The offset of the next page (null: this was the last)"},
}, ("port", "path", "value"))


def get_state(bridge: Host, *, port: Any = None, summary: bool | None = False, path: str | None = None,
              offset: int | None = None, limit: int | None = None) -> dict[str, Any]:
    paged = offset is not None or limit is not None
    if summary and (path is not None or paged):
        raise BridgeUsageError("get_state: summary reads a digest of the whole state; path, offset and limit read "
                               "a part of it whole. Ask for one or the other.")
    target = bridge.resolve_port(port)
    state = bridge.guarded(target, lambda: bridge.client(target).state(digest=bool(summary)))
    if summary:
        return {"port": target, **digest(bridge, target, state)}
    if path is not None or paged:
        return {"port": target, **state_part(state, path or "", offset, limit)}
    return state


GET_STATE = ToolDef(
    "get_state", "Read the game state",
    "The game's full /state snapshot, or with summary: true a compact digest of all of it (frame, screen, "
    "visible element labels, text: the game's text picture of the screen, paused, scalar game fields, "
    "and the events no answer showed yet). Prefer the summary unless you need entities. path reads one part "
    "(e.g. 'game.entities'), offset and limit one page of it (a list's items, an object's keys, a string's "
    f"characters); a state too large for one answer ({ANSWER_LIMIT // (1024 * 1024)} MiB) is refused with "
    "the parts to read.",
    schema({"port": PORT,
            "summary": {"type": "boolean", "description": "Return the compact digest instead of the full snapshot (default false)."},
            "path": {"type": "string", "description": "Dotted path of the part to read, e.g. 'game.entities' or 'ui.elements.0' (default: the whole state)."},
            "offset": {"type": "integer", "minimum": 0, "description": "With path: the first item, key or character of the page (default 0)."},
            "limit": {"type": "integer", "minimum": 1, "description": "With path: how many items, keys or characters the page holds (default: to the end)."}}),
    get_state, rooted({"anyOf": [STATE_DIGEST, STATE_PART, WHOLE_STATE], "type": "object"}), read_only=True,
    idempotent=True)

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
    "screenHash": STR, "lastChangeFrame": INT,
    "elapsedMs": INT, "polls": INT,
}, ("port", "tool", "matched", "elapsedMs", "polls")))


def wait_for(bridge: Host, *, port: Any = None, path: str | None = None, equals: Any = UNSET,
             changes: bool | None = False, event: str | None = None, screen: str | None = None,
             frames: Any = None, region: Any = None, timeout_ms: Any = None) -> dict[str, Any]:
    """``equals`` left out and ``equals=None`` differ: the latter waits for null."""
    target = bridge.resolve_port(port)
    if (frames is not None or region is not None) and screen is None:
        raise BridgeUsageError("wait_for: frames and region go with screen ('changes' or 'stable').")
    condition = Condition(path=path, equals=None if equals is UNSET else equals,
                          has_equals=equals is not UNSET, changes=bool(changes), event=event, screen=screen,
                          frames=DEFAULT_STABLE_FRAMES if frames is None else frames,
                          region=Region.parse(region, "wait_for") if region is not None else None)
    condition.check()
    bridge.guarded(target, lambda: check_screen(bridge.client(target), condition))
    poll, cost = condition_polls(bridge, target, condition)
    result, state = wait_for_state(clock.RefusePaused(poll, target, condition), condition,
                                   timeout_ms=timeout_ms, poll_cost_s=cost)
    return {"port": target, **result, **digest(bridge, target, state)}


WAIT_FOR = ToolDef(
    "wait_for", "Wait for a condition in the state",
    "Poll /state until a path equals a value (path + equals), a path changes (path + changes: true), "
    "an event appears (event: text contained in an event), or the picture changes or holds still (screen: "
    "'changes' or 'stable' with frames; region for a part of it). Checked against the current state first. "
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
