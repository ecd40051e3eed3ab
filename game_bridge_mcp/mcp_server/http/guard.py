"""Connections before their first authenticated request (docs/http.md, "Limits of a shared
server"): each has FIRST_REQUEST_S to send one (a silent or slowloris connection is closed),
and at most UNAUTHENTICATED_CAP wait at once (one more closes the oldest), so connections
without the token never cost an agent that has it a place. Told by the gate of each request
that carries the token; hooked into uvicorn's protocol by :func:`guarded`."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from .gate import Scope
from .token import FailedAttempts

log = logging.getLogger("game_bridge_mcp")

#: Seconds a new connection has to send a whole request that carries the token.
FIRST_REQUEST_S = 5.0
#: Connections that have not yet sent one, at once; one more closes the oldest.
UNAUTHENTICATED_CAP = 64


class ConnectionGuard:
    """The connections that have not yet sent an authenticated request (see the module
    docstring). Runs on the event loop's thread only."""

    def __init__(self, *, deadline_s: float = FIRST_REQUEST_S, cap: int = UNAUTHENTICATED_CAP) -> None:
        self.deadline_s = deadline_s
        self.cap = cap
        self._waiting: OrderedDict[Any, tuple[asyncio.BaseTransport, asyncio.TimerHandle]] = OrderedDict()
        self.closed = FailedAttempts(what=f"connection(s) that sent no request with the token within "
                                          f"{deadline_s:g} s, or past {cap} such connections at once")

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def opened(self, key: Any, transport: asyncio.BaseTransport) -> None:
        while len(self._waiting) >= self.cap:
            oldest, (stale, timer) = self._waiting.popitem(last=False)
            timer.cancel()
            self._close(oldest, stale)
        timer = asyncio.get_running_loop().call_later(self.deadline_s, self._expire, key)
        self._waiting[key] = (transport, timer)

    def authorised(self, scope: Scope) -> None:
        """A request with the token arrived: its connection is an agent's from now on."""
        client = scope.get("client")
        entry = self._waiting.pop(tuple(client) if client else None, None)
        if entry is not None:
            entry[1].cancel()

    def gone(self, key: Any) -> None:
        entry = self._waiting.pop(key, None)
        if entry is not None:
            entry[1].cancel()

    def _expire(self, key: Any) -> None:
        entry = self._waiting.pop(key, None)
        if entry is not None:
            self._close(key, entry[0])

    def _close(self, key: Any, transport: asyncio.BaseTransport) -> None:
        self.closed.record(str(key[0]) if isinstance(key, tuple) and key else "?")
        abort = getattr(transport, "abort", None)
        (abort or transport.close)()


def guarded(base: type, guard: ConnectionGuard) -> type:
    """uvicorn's HTTP protocol class ``base``, its connections reported to ``guard``."""

    class Guarded(base):  # type: ignore[valid-type, misc, unused-ignore]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._guard_key = tuple(self.client) if getattr(self, "client", None) else None
            guard.opened(self._guard_key, transport)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.gone(getattr(self, "_guard_key", None))
            super().connection_lost(exc)

    Guarded.__name__ = f"Guarded{base.__name__}"
    return Guarded


__all__ = ["ConnectionGuard", "FIRST_REQUEST_S", "UNAUTHENTICATED_CAP", "guarded"]
