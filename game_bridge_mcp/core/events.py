"""Events in the answers, each once (:class:`Shown`, the instance's events cursor), with its
fields, bounded; and ``get_events``, from ``/events`` when the game advertises it, else from
``/state``."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from ..contract import EVENTS_FEATURE
from ..wire.client import GameClient
from ..wire.events import seq_of
from .digest import bounded, event_text, summarise

#: At most this many new events are shown in one answer (the newest of them).
SHOWN = 10

#: One event's JSON, and all the events of one answer, in characters.
MAX_EVENT_CHARS = 300
MAX_EVENTS_CHARS = 1500
#: All the events of one get_events answer, in characters.
MAX_PAGE_CHARS = 60_000
DEFAULT_LIMIT = 100


@dataclass
class NewEvents:
    """What is new since the last answer: ``events`` (oldest first, at most the newest
    :data:`SHOWN`), how many newer than the cursor were not shown (``left_out``, with the
    cursor they follow, ``since``), and notes. ``numbered`` is False for a game whose
    events carry no ``seq``: ``events`` are then its recent ones, new or not."""

    events: list[Any] = field(default_factory=list)
    left_out: int = 0
    since: int | None = None
    numbered: bool = True
    note: str | None = None


def _newest_run(entries: list[Any], cursor: int | None) -> tuple[list[Any], list[int]]:
    """The newest numbered events of the last run whose ``seq`` grows (a seq that falls
    starts a new run), oldest first, with their seqs: read from the newest back only as far
    as an answer needs, to the first event at or before ``cursor`` (kept, so the oldest says
    nothing was skipped), or :data:`SHOWN` of them when there is no cursor or the game's
    newest is behind it. Empty when no event carries a seq. A game keeps hundreds; an
    answer reads the few that are new."""
    run: list[Any] = []
    seqs: list[int] = []
    counting = False
    for entry in reversed(entries):
        seq = seq_of(entry)
        if seq is None:
            continue
        if not seqs:
            counting = cursor is not None and seq >= cursor
        elif seq >= seqs[-1]:
            break  # the run starts after this one
        run.append(entry)
        seqs.append(seq)
        if (counting and cursor is not None and seq <= cursor) or (not counting and len(run) >= SHOWN):
            break
    run.reverse()
    seqs.reverse()
    return run, seqs


class EventsCursor:
    """The ``seq`` of the newest event reported for one port (None: nothing yet), for one
    generation of its game (see :class:`Shown`); ``after_restart`` when it replaces one that
    had reported events before the game restarted (the next answer says so)."""

    def __init__(self, *, after_restart: bool = False) -> None:
        self.seq: int | None = None
        self._after_restart = after_restart
        self._unnumbered_noted = False
        self._lock = threading.Lock()

    def take(self, events: Any, *, advertised: bool = False) -> NewEvents:
        """The events of a ``/state`` snapshot that are new since the last answer; moves
        the cursor past them (they count as reported). ``advertised``: the game advertises
        ``events``, so an empty list means nothing has happened yet (the cursor starts at 0)."""
        entries = [e for e in events if isinstance(e, (dict, str, int, float, Mapping))] if isinstance(events, list) else []
        with self._lock:
            if not entries and advertised and isinstance(events, list):
                if self.seq is None:
                    self.seq = 0
                return NewEvents()
            run, run_seqs = _newest_run(entries, self.seq)
            if not run:
                note = None
                if entries and not self._unnumbered_noted:
                    self._unnumbered_noted = True
                    note = ("This game's events carry no seq, so these are its recent events; the bridge "
                            "cannot tell which are new.")
                return NewEvents(entries[-SHOWN:], numbered=False, note=note)
            newest, oldest = run_seqs[-1], run_seqs[0]
            cursor, note = self.seq, None
            if cursor is None:
                if self._after_restart:
                    note = "The game restarted: its events are counted again from its first."
                    self._after_restart = False
                self.seq = newest
                return NewEvents(run[-SHOWN:], note=note)
            if newest < cursor:
                self.seq = newest
                return NewEvents(run[-SHOWN:], note=(
                    f"Event seq went back from {cursor} to {newest}: the game restarted or reset its events; "
                    "the bridge counts them again from there."))
            new = [e for e, seq in zip(run, run_seqs) if seq > cursor]
            total = len(new) if oldest <= cursor + 1 else newest - cursor  # seq grows by one
            shown = new[-SHOWN:]
            self.seq = newest
            left_out = max(0, total - len(shown))
            return NewEvents(shown, left_out=left_out, since=cursor if left_out else None)

    def advance(self, seq: int) -> None:
        """Count every event up to ``seq`` as reported (``get_events`` returned them)."""
        with self._lock:
            if self.seq is None or seq > self.seq:
                self.seq = seq

    def rewind(self, seq: int) -> None:
        """The game's newest event is ``seq``, behind the cursor: it restarted."""
        with self._lock:
            self.seq = seq


class Shown:
    """What the agent has been shown of one instance: the events cursor of its game's current
    generation (the GameClient's, which moves on when the game restarts). The Bridge keeps
    one per instance; every answer's events go through it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._cursor = EventsCursor()

    def events(self, generation: int) -> EventsCursor:
        """The cursor for the client's generation ``generation``. A new generation starts a
        new cursor, whose next answer says the game restarted when the one it replaces had
        reported events (after two restarts with no answer between, the cursor the first
        one started had reported none)."""
        with self._lock:
            if generation != self._generation:
                reported = generation == self._generation + 1 and self._cursor.seq is not None
                self._cursor = EventsCursor(after_restart=reported)
                self._generation = generation
            return self._cursor

    def new_session(self) -> None:
        """Answer as a bridge that never answered about this instance would: forget which
        events were reported (what a replay does when a trace moves on to another
        recording session). The game's generation stays."""
        with self._lock:
            self._cursor = EventsCursor()


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def answer_fields(new: NewEvents) -> dict[str, Any]:
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


def answer_events(shown: Shown, client: GameClient, state: Mapping[str, Any]) -> dict[str, Any]:
    """The events of ``state`` that are new since the bridge's last answer for this port
    (the cursor moves past them), as answer fields."""
    cursor = shown.events(client.generation)
    return answer_fields(cursor.take(state.get("events"), advertised=client.has_feature(EVENTS_FEATURE)))


def answer_digest(shown: Shown, client: GameClient, state: Mapping[str, Any]) -> dict[str, Any]:
    """The whole digest of ``state`` for an answer about ``client``'s port: :func:`summarise`
    with the events no answer has shown yet (the cursor moves past them: call it once
    per answer)."""
    digest = summarise(state, events=False)  # its recent events are not the new ones
    digest["events"] = []  # none new is said too: the field is always there
    digest.update(answer_events(shown, client, state))
    return digest


def get_events(shown: Shown, client: GameClient, state: Callable[[], Mapping[str, Any]], *,
               since: int | None, limit: int | None) -> dict[str, Any]:
    """``get_events {since?, limit?}``: ``{events, next, dropped}`` after ``since`` (default:
    the bridge's cursor, so only what no answer has shown yet). From ``GET /events`` when
    the game advertises ``events``; otherwise from ``/state``'s recent events, saying so.
    Moves the cursor past what it returns."""
    cursor = shown.events(client.generation).seq
    start = since if since is not None else (cursor or 0)
    count = DEFAULT_LIMIT if limit is None else limit
    notes: list[str] = []
    if EVENTS_FEATURE in client.learn_features():
        page = client.events_page(start, count)
        events: list[Any] = list(page.events)
        nxt, dropped = page.next, page.dropped
    else:
        recent = state().get("events")
        entries = [e for e in recent if isinstance(e, (dict, Mapping))] if isinstance(recent, list) else []
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
                shown.events(client.generation).rewind(newest)
    if out_events or nxt > (cursor or 0):
        shown.events(client.generation).advance(nxt)
    result: dict[str, Any] = {"events": out_events, "next": nxt, "dropped": dropped}
    if notes:
        result["note"] = " ".join(notes)
    return result


def _newest(state: Mapping[str, Any]) -> int | None:
    events = state.get("events")
    seqs = [s for s in (seq_of(e) for e in events) if s is not None] if isinstance(events, list) else []
    return max(seqs) if seqs else (0 if isinstance(events, list) else None)


__all__ = ["DEFAULT_LIMIT", "EventsCursor", "MAX_EVENTS_CHARS", "MAX_EVENT_CHARS", "MAX_PAGE_CHARS", "NewEvents", "SHOWN",
           "Shown", "answer_digest", "answer_events", "answer_fields", "get_events"]
