"""The ``/events`` page format (docs/contract.md, ``events``): :func:`read_page`, its one
reader, and :func:`seq_of`, an event's number."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from ..jsonio import as_int


def seq_of(event: Any) -> int | None:
    return as_int(event.get("seq")) if isinstance(event, (dict, Mapping)) else None


@dataclass(frozen=True)
class Page:
    """A ``GET /events`` answer: ``{events, next, dropped}``."""

    events: list[dict[str, Any]]
    next: int
    dropped: bool


def read_page(doc: Any, since: int) -> Page:
    """A ``/events`` answer checked against docs/contract.md; ValueError saying what is wrong."""
    if not isinstance(doc, (dict, Mapping)):
        raise ValueError("is not a JSON object")
    events = doc.get("events")
    if not isinstance(events, list):
        raise ValueError("has no 'events' list")
    kept = [e for e in events if isinstance(e, (dict, Mapping)) and seq_of(e) is not None]
    if len(kept) != len(events):
        raise ValueError("has events without a whole-number 'seq'")
    nxt = as_int(doc.get("next"))
    if nxt is None:
        raise ValueError("has no whole-number 'next'")
    dropped = doc.get("dropped", False)
    if not isinstance(dropped, bool):
        raise ValueError("has a 'dropped' that is not true or false")
    return Page([dict(e) for e in kept], nxt, dropped)


__all__ = ["Page", "read_page", "seq_of"]
