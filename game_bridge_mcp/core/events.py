"""Events in the answers, each once, with its fields, bounded; and ``get_events``, from
``/events`` when the game advertises it, else from ``/state``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Callable

from ..wire.client import GameClient
from ..wire.events import NewEvents, seq_of
from .digest import bounded, event_text, summarise

#: One event's JSON, and all the events of one answer, in characters.
MAX_EVENT_CHARS = 300
MAX_EVENTS_CHARS = 1500
#: All the events of one get_events answer, in characters.
MAX_PAGE_CHARS = 60_000
DEFAULT_LIMIT = 100


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def shown(new: NewEvents) -> dict[str, Any]:
    """The answer's fields for what the cursor found new."""
    if not new.numbered:
        texts = [t for t in (event_text(e) for e in new.events) if t is not None]
        out: dict[str, Any] = {"events": texts}
        if new.note:
            out["eventsNote"] = new.note
        return out
    events = [bounded(e, MAX_EVENT_CHARS)[0] for e in new.events]
    left_out = new.left_out
    while len(events) > 1 and _size(events) > MAX_EVENTS_CHARS:
        events.pop(0)  # the oldest go first; get_events has them
        left_out += 1
    out = {"events": events} if events else {}
    if left_out:
        since = new.since
        if since is None and new.events:
            since = (seq_of(new.events[0]) or 1) - 1
        out["eventsLeftOut"] = {"count": left_out, "since": since}
    if new.note:
        out["eventsNote"] = new.note
    return out


def answer_events(client: GameClient, state: Mapping[str, Any]) -> dict[str, Any]:
    """The events of ``state`` that are new since the bridge's last answer for this port
    (the cursor moves past them), as answer fields."""
    return shown(client.events.take(state.get("events"), advertised=client.has_feature("events")))


def answer_digest(client: GameClient, state: Mapping[str, Any]) -> dict[str, Any]:
    """The whole digest of ``state`` for an answer about ``client``'s port: :func:`summarise`
    with the events no answer has shown yet (the cursor moves past them: call it once
    per answer)."""
    digest = summarise(state)
    digest["events"] = []  # none new is said too: the field is always there
    digest.update(answer_events(client, state))
    return digest


def get_events(client: GameClient, state: Callable[[], Mapping[str, Any]], *, since: int | None,
               limit: int | None) -> dict[str, Any]:
    """``get_events {since?, limit?}``: ``{events, next, dropped}`` after ``since`` (default:
    the bridge's cursor, so only what no answer has shown yet). From ``GET /events`` when
    the game advertises ``events``; otherwise from ``/state``'s recent events, saying so.
    Moves the cursor past what it returns."""
    cursor = client.events.seq
    start = since if since is not None else (cursor or 0)
    count = DEFAULT_LIMIT if limit is None else limit
    notes: list[str] = []
    if "events" in client.learn_features():
        page = client.events_page(start, count)
        events: list[Any] = list(page.events)
        nxt, dropped = page.next, page.dropped
    else:
        recent = state().get("events")
        entries = [e for e in recent if isinstance(e, Mapping)] if isinstance(recent, list) else []
        if not any(seq_of(e) is not None for e in entries):
            texts = [t for t in (event_text(e) for e in (recent if isinstance(recent, list) else [])) if t is not None]
            return {"events": texts[-count:], "next": None, "dropped": None,
                    "note": ("This game neither serves /events nor numbers its events (seq): these are its "
                             "recent events from /state, and the bridge cannot tell which are new.")}
        numbered = [e for e in entries if (seq_of(e) or 0) > start]
        events = numbered[:count]
        oldest = min((seq_of(e) or 0 for e in entries if seq_of(e) is not None), default=start + 1)
        dropped = oldest > start + 1
        nxt = seq_of(events[-1]) or start if events else start
        notes.append("This game does not advertise events (GET /events): these are from /state's recent events.")
    out_events: list[Any] = []
    used = 0
    for event in events:
        value, _cut = bounded(event, MAX_EVENT_CHARS)
        used += _size(value) + 1
        if used > MAX_PAGE_CHARS:
            nxt = seq_of(out_events[-1]) or start if out_events else start
            notes.append(f"Cut at {len(out_events)} events to fit {MAX_PAGE_CHARS} characters; ask again from next.")
            break
        out_events.append(value)
    if not events and start > 0:
        newest = _newest(state())
        if newest is not None and newest < start:
            notes.append(f"since {start} is beyond the game's newest event ({newest}): it may have restarted. "
                         f"next is {newest}, its newest.")
            nxt = newest
            if cursor is not None and newest < cursor:
                client.events.rewind(newest)
    if out_events or nxt > (cursor or 0):
        client.events.advance(nxt)
    result: dict[str, Any] = {"events": out_events, "next": nxt, "dropped": dropped}
    if notes:
        result["note"] = " ".join(notes)
    return result


def _newest(state: Mapping[str, Any]) -> int | None:
    events = state.get("events")
    seqs = [s for s in (seq_of(e) for e in events) if s is not None] if isinstance(events, list) else []
    return max(seqs) if seqs else (0 if isinstance(events, list) else None)
