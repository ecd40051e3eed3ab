"""Each event once: the bridge's events cursor for one port (:class:`EventsCursor`, by ``seq``,
noticing one that goes backwards), and :func:`read_page`, the one reader of ``/events``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from ..jsonio import as_int

#: At most this many new events are shown in one answer (the newest of them).
SHOWN = 10


def seq_of(event: Any) -> int | None:
    return as_int(event.get("seq")) if isinstance(event, Mapping) else None


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


@dataclass(frozen=True)
class Page:
    """A ``GET /events`` answer: ``{events, next, dropped}``."""

    events: list[dict[str, Any]]
    next: int
    dropped: bool


def read_page(doc: Any, since: int) -> Page:
    """A ``/events`` answer checked against docs/contract.md; ValueError saying what is wrong."""
    if not isinstance(doc, Mapping):
        raise ValueError("is not a JSON object")
    events = doc.get("events")
    if not isinstance(events, list):
        raise ValueError("has no 'events' list")
    kept = [e for e in events if isinstance(e, Mapping) and seq_of(e) is not None]
    if len(kept) != len(events):
        raise ValueError("has events without a whole-number 'seq'")
    nxt = as_int(doc.get("next"))
    if nxt is None:
        raise ValueError("has no whole-number 'next'")
    dropped = doc.get("dropped", False)
    if not isinstance(dropped, bool):
        raise ValueError("has a 'dropped' that is not true or false")
    return Page([dict(e) for e in kept], nxt, dropped)


def _last_run(numbered: list[Any]) -> list[Any]:
    """The events after the last place their ``seq`` stops growing (all of them, normally)."""
    start = 0
    for index in range(1, len(numbered)):
        if (seq_of(numbered[index]) or 0) <= (seq_of(numbered[index - 1]) or 0):
            start = index
    return numbered[start:]


class EventsCursor:
    """The ``seq`` of the newest event reported for one port (None: nothing yet). Made by
    the GameClient for each generation; ``after_restart`` when it replaces one that had
    reported events before the game restarted (the next answer says so)."""

    def __init__(self, *, after_restart: bool = False) -> None:
        self.seq: int | None = None
        self._after_restart = after_restart
        self._unnumbered_noted = False
        self._lock = threading.Lock()

    def take(self, events: Any, *, advertised: bool = False) -> NewEvents:
        """The events of a ``/state`` snapshot that are new since the last answer; moves
        the cursor past them (they count as reported). ``advertised``: the game advertises
        ``events``, so an empty list means nothing has happened yet (the cursor starts at 0)."""
        entries = [e for e in events if isinstance(e, (Mapping, str, int, float))] if isinstance(events, list) else []
        numbered = [e for e in entries if seq_of(e) is not None]
        with self._lock:
            if not entries and advertised and isinstance(events, list):
                if self.seq is None:
                    self.seq = 0
                return NewEvents()
            if not numbered:
                note = None
                if entries and not self._unnumbered_noted:
                    self._unnumbered_noted = True
                    note = ("This game's events carry no seq, so these are its recent events; the bridge "
                            "cannot tell which are new.")
                return NewEvents(entries[-SHOWN:], numbered=False, note=note)
            run = _last_run(numbered)  # a seq that fell inside the list starts a new run
            newest, oldest = seq_of(run[-1]) or 0, seq_of(run[0]) or 0
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
            new = [e for e in run if (seq_of(e) or 0) > cursor]
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


__all__ = ["SHOWN", "EventsCursor", "NewEvents", "Page", "read_page", "seq_of"]
