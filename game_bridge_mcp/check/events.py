"""``check``: an advertised ``events`` extension: ``seq`` that never skips, repeats or restarts,
and the ``/events`` cursor's ``next`` and ``dropped``, each answer judged against its own
``since``."""

from __future__ import annotations

from typing import Any

from .base import FAIL, PASS, SKIP, CheckSession, is_int, show_value

_LIMIT = 1000


class EventChecks(CheckSession):
    """``/state.events[].seq`` and ``GET /events?since=&limit=``."""

    def _page(self, since: int, limit: int | None = None) -> tuple[dict[str, Any] | None, list[str]]:
        """One ``/events`` answer and the rules it breaks by itself."""
        query = f"/events?since={since}" + (f"&limit={limit}" if limit is not None else "")
        doc, problem = self.read(query)
        if doc is None:
            return None, [problem]
        problems: list[str] = []
        events, nxt, dropped = doc.get("events"), doc.get("next"), doc.get("dropped")
        if not isinstance(events, list) or not is_int(nxt) or not isinstance(dropped, bool):
            return None, [f"GET {query} answered {show_value(doc, 160)}, not {{\"events\": [...], \"next\": N, "
                          "\"dropped\": bool}"]
        if not all(isinstance(e, dict) and is_int(e.get("seq")) for e in events):
            return None, [f"GET {query}: events without an integer seq: {show_value(events[:3], 160)}"]
        seqs: list[int] = [int(e["seq"]) for e in events]
        problems += _sequence_problems(f"GET {query}", seqs)
        if any(s <= since for s in seqs):
            problems.append(f"GET {query} returned events with seq <= {since}: {show_value(seqs[:10])}")
        if limit is not None and len(seqs) > limit:
            problems.append(f"GET {query} returned {len(seqs)} events, more than its limit")
        expected_next = seqs[-1] if seqs else since
        if nxt != expected_next:
            problems.append(f"GET {query} says next {nxt}, but the last seq it returned is "
                            f"{seqs[-1] if seqs else 'none (so next is since)'}")
        if seqs and dropped != (seqs[0] > since + 1):
            problems.append(f"GET {query} starts at seq {seqs[0]} and says dropped {str(dropped).lower()}"
                            + (": events after since had left the buffer, so dropped must be true" if not dropped
                               else ": nothing between since and its first event is missing"))
        return doc, problems

    def check_events(self) -> None:
        state, problem = self.read("/state")
        if state is None:
            self.report(FAIL, f"events: {problem}")
            return
        recent = state.get("events")
        problems: list[str] = []
        if isinstance(recent, list) and recent:
            recent_seqs = [e.get("seq") if isinstance(e, dict) else None for e in recent]
            if not all(is_int(s) for s in recent_seqs):
                problems.append(f"/state.events entries carry no integer seq: {show_value(recent[:3], 160)}")
            else:
                problems += _sequence_problems("/state.events", recent_seqs)
        elif recent is not None and not isinstance(recent, list):
            problems.append(f"/state.events is not a list: {show_value(recent, 80)}")
        first, page_problems = self._page(0, _LIMIT)
        problems += page_problems
        if first is None:
            self._verdict(problems, "")
            return
        seqs = [int(e["seq"]) for e in first["events"]]
        if not seqs:
            if isinstance(recent, list) and recent:
                problems.append("GET /events?since=0 returned nothing, but /state.events has events")
            if problems:
                self._verdict(problems, "")
            else:
                self.report(SKIP, "events: the game has made no events yet: seq and the cursor were checked only "
                                  "for the empty answer", "Play it a little (or run with --command naming a command "
                                  "that makes an event) and check again.")
            return
        low, high = seqs[0], seqs[-1]
        probes: list[tuple[int, int | None]] = [(low - 1, None), (low - 1, 1), (high - 1, None), (high, None),
                                                 (high + 100, 5)]
        for since, limit in probes:
            if since < 0:
                continue
            doc, more = self._page(since, limit)
            problems += more
            if doc is None:
                continue
            got = [int(e["seq"]) for e in doc["events"]]
            if since == high + 100 and got:
                problems.append(f"GET /events?since={since} (beyond the newest, {high}) returned {show_value(got[:5])}")
            if since in (low - 1, high - 1) and (not got or got[0] != since + 1) and not doc["dropped"]:
                problems.append(f"GET /events?since={since} did not start at seq {since + 1} "
                                f"(it returned {show_value(got[:5])})")
        self._verdict(problems, f"events: seq counts up by one ({low}..{high} buffered"
                                f"{', older ones dropped' if low > 1 else ''}); /events honours since, limit, next "
                                "and dropped")

    def _verdict(self, problems: list[str], passed: str) -> None:
        if problems:
            unique = list(dict.fromkeys(problems))
            self.report(FAIL, f"events: {unique[0]}", *unique[1:6],
                        "Every event carries seq, growing by one from 1 over the process's life; "
                        "/events?since=S&limit=L answers {events (seq > S, oldest first, at most L), next (the "
                        "last seq returned, or S), dropped (events after S already gone)}.")
        elif passed:
            self.report(PASS, passed)


def _sequence_problems(where: str, seqs: list[Any]) -> list[str]:
    for before, after in zip(seqs, seqs[1:]):
        if after <= before:
            return [f"{where}: seq goes from {before} to {after} (it must only grow: a restarted or reused counter "
                    "makes the bridge report events twice or never)"]
        if after != before + 1:
            return [f"{where}: seq jumps from {before} to {after} (it grows by exactly one per event)"]
    return []


__all__ = ["EventChecks"]
