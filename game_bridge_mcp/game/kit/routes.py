"""The kit's endpoints: what each GET path answers, as docs/contract.md describes it. Every
handler takes the query string and answers ``(status, json_bytes)`` or an
:class:`~..server.http.Answer`."""

from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

from ...contract import (COMMAND, DEFAULT_EVENTS_LIMIT, EVENTS, HEALTH, LIMIT, MAX_EVENTS_LIMIT, SINCE,
                         SNAPSHOT, SNAPSHOT_FEATURE, STATE, TOOLS)
from ..server import query as _query
from ..server.http import Answer, RouteAnswer, json_bytes
from ..snapshot.store import Owner, Snapshots
from .state import encode_state

log = logging.getLogger(__name__)

Handler = Callable[[str], RouteAnswer]


class Served(Protocol):
    """What the endpoints need of the game's bridge."""

    def wait_completed(self, after: int, timeout_s: float) -> bool: ...

    def health(self) -> dict[str, Any]: ...

    def encoded_state(self, view: str = "full") -> bytes: ...

    def events_since(self, since: int, limit: int = 100) -> dict[str, Any]: ...

    def queue_command(self, query: str) -> tuple[int, dict[str, Any]]: ...

    def manifest(self) -> dict[str, Any]: ...


def _refused(exc: Exception) -> RouteAnswer:
    return 400, json_bytes({"ok": False, "error": str(exc)})


def health(bridge: Served, query: str) -> RouteAnswer:
    """``/health[?after=N&waitMs=M]``."""
    try:
        after, wait_s = _query.after_wait(_query.parse(query))
    except _query.QueryError as exc:
        return _refused(exc)
    if after is not None:
        bridge.wait_completed(after, wait_s)
    return 200, json_bytes(bridge.health())


def state(bridge: Served, query: str) -> RouteAnswer:
    """``/state[?view=digest][&after=N&waitMs=M]``."""
    try:
        params = _query.parse(query)
        view = _query.view(params)
        after, wait_s = _query.after_wait(params)
    except _query.QueryError as exc:
        return _refused(exc)
    if after is not None:
        bridge.wait_completed(after, wait_s)
    try:
        return 200, bridge.encoded_state(view)
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"[:500]
        log.warning("game-bridge kit: /state failed: %s", detail)
        return 500, json_bytes({"ok": False, "error": f"the game's state could not be built: {detail}"})


def events(bridge: Served, query: str) -> RouteAnswer:
    """``/events?since=S&limit=L`` -> ``{events, next, dropped}``."""
    try:
        params = _query.parse(query)
        since = _query.whole_number(params, SINCE, 0, minimum=0)
        limit = _query.whole_number(params, LIMIT, DEFAULT_EVENTS_LIMIT, minimum=1, maximum=MAX_EVENTS_LIMIT)
    except _query.QueryError as exc:
        return _refused(exc)
    try:
        return 200, encode_state(bridge.events_since(since or 0, limit or DEFAULT_EVENTS_LIMIT))
    except (TypeError, ValueError) as exc:
        return 500, json_bytes({"ok": False, "error": f"an event could not be encoded: {str(exc)[:300]}"})


def command(bridge: Served, query: str) -> RouteAnswer:
    """``/command?cmd=NAME&arg=value...`` -> ``{accepted, commandId, frame}``."""
    status, doc = bridge.queue_command(query)
    return status, json_bytes(doc)


def tools(bridge: Served, query: str) -> RouteAnswer:
    return 200, json_bytes(bridge.manifest())


def kit_routes(bridge: Served) -> dict[str, Handler]:
    """The contract's endpoints and the kit's extensions, bound to ``bridge``."""
    table: dict[str, Callable[[Served, str], RouteAnswer]] = {
        HEALTH: health, STATE: state, COMMAND: command, TOOLS: tools, EVENTS: events}

    def bound(handler: Callable[[Served, str], RouteAnswer]) -> Handler:
        return lambda query: handler(bridge, query)

    return {path: bound(handler) for path, handler in table.items()}


# ----------------------------------------------------------------------------- snapshot

class Snapshotting(Owner, Protocol):
    """What ``snapshot`` needs of the game's bridge to set itself up."""

    def command(self, func: Callable[..., Any], /, *, toolset: str | None = ..., listed: bool = ...) -> Any: ...

    def add_route(self, path: str, handler: Handler) -> None: ...

    def advertise(self, *features: str) -> None: ...


class SnapshotPosts:
    """``POST /snapshot`` for the kit's HTTP server (its ``PostRoute``)."""

    def __init__(self, service: Snapshots) -> None:
        self.service = service

    def limit(self, path: str) -> int | None:
        return self.service.max_bytes if path == SNAPSHOT else None

    def post(self, path: str, query: str, body: bytes) -> RouteAnswer:
        status, data, content_type = self.service.post(body)
        return Answer(status, data, content_type)


def snapshot_service(bridge: Snapshotting, setting: Any, clock: bool) -> SnapshotPosts | None:
    """``snapshot`` for a game with the clock (docs/game-side.md, "Save states"): its
    commands, ``GET /snapshot`` and advertising it; the POST side for the server. ``setting``
    is GameBridge's ``snapshot``: None (on with the clock), False (off), or ``(save, load)``."""
    if setting is False:
        return None
    if not clock:
        if setting is not None:
            raise ValueError("snapshot needs the clock: GameBridge(clock=True, snapshot=...)")
        return None
    if setting is not None and not (isinstance(setting, tuple) and len(setting) == 2 and all(map(callable, setting))):
        raise ValueError("snapshot is None, False, or (save, load): two callables")
    service = Snapshots(bridge, setting)
    for function in service.commands():
        bridge.command(function, toolset=None, listed=False)

    def answer(query: str) -> RouteAnswer:
        try:
            params = _query.parse(query)
        except _query.QueryError as exc:
            return _refused(exc)
        status, data, content_type = service.get(params)
        return Answer(status, data, content_type)

    bridge.add_route(SNAPSHOT, answer)
    bridge.advertise(SNAPSHOT_FEATURE)
    return SnapshotPosts(service)
