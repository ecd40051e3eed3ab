"""Who may have how many HTTP requests in flight (docs/http.md, "Limits of a shared server"):
each session, the sessionless requests together and the requests opening sessions are each a
holder with a cap of their own; every holder's first FAIR_SHARE requests are its own while the
server has places at all, and what a holder has beyond them comes from a shared pool, so one
token holder's held calls or slow bodies never cost another agent its place. Pure: no SDK, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

#: HTTP requests in flight at once in all (open notification streams not counted); past it, 503.
MAX_REQUESTS_IN_FLIGHT = 256
#: The requests in flight each holder may always have (while the server has places at all).
FAIR_SHARE = 8


class Holder(Protocol):
    """Something requests are counted against: a session, the sessionless requests, the openings."""

    busy: int


@dataclass
class Openings:
    """The requests that open sessions (``initialize`` without a session yet)."""

    busy: int = 0


@dataclass(frozen=True)
class Place:
    """One admitted request: its holder, and whether it came from the shared pool."""

    holder: Holder
    shared: bool


class Places:
    """The places of requests in flight (see the module docstring)."""

    def __init__(self, *, max_in_flight: int = MAX_REQUESTS_IN_FLIGHT, holders: int = 16,
                 fair_share: int = FAIR_SHARE) -> None:
        self.max_in_flight = max_in_flight
        self.fair_share = fair_share
        #: What requests beyond a fair share may take in all: the rest once every expected
        #: holder (the sessions, the sessionless requests, the openings) has its fair share.
        self.shared_places = max(max_in_flight // 4, max_in_flight - fair_share * (holders + 2))
        self.in_flight = 0
        self.shared_in_use = 0

    def refusal(self, holder: Holder, cap: int, what: str) -> str | None:
        """Why a request of ``holder`` (``what``: "this session", ...) cannot have a place
        now, or None when it can."""
        if holder.busy >= cap:
            return (f"{what.capitalize()} has {holder.busy} requests in flight (the limit is {cap}). Retry when "
                    "some have answered.")
        if self.in_flight >= self.max_in_flight:
            return "The bridge is overloaded: too many requests in flight. Retry shortly."
        if holder.busy >= self.fair_share and self.shared_in_use >= self.shared_places:
            return (f"{what.capitalize()} has {holder.busy} requests in flight while the bridge is busy; each "
                    f"keeps {self.fair_share} places of its own, and the places beyond are all taken. Retry when "
                    "some have answered.")
        return None

    def take(self, holder: Holder) -> Place:
        shared = holder.busy >= self.fair_share
        holder.busy += 1
        self.in_flight += 1
        if shared:
            self.shared_in_use += 1
        return Place(holder, shared)

    def give_back(self, place: Place) -> None:
        place.holder.busy -= 1
        self.in_flight -= 1
        if place.shared:
            self.shared_in_use -= 1


__all__ = ["FAIR_SHARE", "MAX_REQUESTS_IN_FLIGHT", "Openings", "Place", "Places"]
