"""The events tool: ``get_events``, the game's events after a cursor."""

from __future__ import annotations

from typing import Any

from .. import events
from ..host import Host
from .shapes import BOOL, INT, INT_OR_NULL, LIST, answer
from .unit import PORT, ToolDef, schema

EVENTS_ANSWER = answer("get_events' answer", {
    "port": INT, "events": LIST, "next": INT_OR_NULL, "dropped": BOOL,
}, ("port", "events"))


def get_events(bridge: Host, *, since: int | None = None, limit: int | None = None, port: Any = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    inst = bridge.instance(target)
    client = inst.client
    result = bridge.guarded(target, lambda: events.get_events(inst.shown, client, client.state, since=since,
                                                              limit=limit))
    return {"port": target, **result}


GET_EVENTS = ToolDef(
    "get_events", "Read the game's events, each once",
    "The game's events after a cursor: {events, next, dropped}. Without since: the ones no answer has "
    "shown yet. Pass next back as since to read on; dropped: true means some had already left the game's "
    "buffer. call_tool answers carry new events already; use this when one says eventsLeftOut, or to page "
    "through history.",
    schema({"port": PORT,
             "since": {"type": "integer", "minimum": 0, "description": "Return events after this seq (default: the last one the bridge showed)."},
             "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many (default 100)."}}),
    get_events, EVENTS_ANSWER, read_only=True)
