"""The game's events: numbered once (``seq``), kept in a ring, read by cursor (``/events``).
Thread-safe."""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Mapping
from typing import Any

from ...contract import DEFAULT_EVENTS_LIMIT

#: Events ``/events`` can still return (the ring).
DEFAULT_EVENT_BUFFER = 1024
#: Events shown in ``/state.events`` (the newest).
DEFAULT_STATE_EVENTS = 64
#: ``limit`` of ``/events`` when not given.
DEFAULT_LIMIT = DEFAULT_EVENTS_LIMIT


class EventLog:
    """The ring of recent events. ``add`` numbers an entry; ``tail`` and ``since`` read."""

    def __init__(self, capacity: int = DEFAULT_EVENT_BUFFER, shown: int = DEFAULT_STATE_EVENTS) -> None:
        self.shown = max(1, int(shown))
        self._ring: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=max(self.shown, int(capacity)))
        self._lock = threading.Lock()
        self._last_seq = 0

    def add(self, message: str, frame: int, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Record ``{seq, m, frame, **fields}`` (the kit's three keys win over fields of
        the same name) and return it."""
        with self._lock:
            self._last_seq += 1
            entry: dict[str, Any] = {"seq": self._last_seq, "m": str(message), "frame": frame}
            for key, value in fields.items():
                entry.setdefault(key, value)
            self._ring.append(entry)
            return entry

    def tail(self) -> list[dict[str, Any]]:
        """The newest :attr:`shown` events, oldest first (for ``/state.events``)."""
        with self._lock:
            count = len(self._ring)
            return list(itertools.islice(self._ring, max(0, count - self.shown), count))

    def since(self, since: int, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
        """The ``/events`` answer: ``{events, next, dropped}`` for events with
        ``seq > since``, oldest first, at most ``limit``."""
        with self._lock:
            oldest = self._last_seq - len(self._ring) + 1  # seq of the first entry kept
            start = max(0, since + 1 - oldest)
            events = list(itertools.islice(self._ring, start, start + limit))
            dropped = since + 1 < oldest
        return {"events": events, "next": events[-1]["seq"] if events else since,
                "dropped": dropped}
