"""The tool calls both fast paths (stdio's and HTTP's) are compared with the SDK's path on,
and the comparison's view of an answer without what differs from one run to the next."""

from __future__ import annotations

import json
from typing import Any

CALLS: list[dict[str, Any]] = [
    {"name": "list_toolsets", "arguments": {}},
    {"name": "describe_toolset", "arguments": {"name": "play"}},
    {"name": "describe_toolset", "arguments": {"name": "nope"}},
    {"name": "call_tool", "arguments": {"name": "get_health", "port": 1}},
    {"name": "call_tool", "arguments": {"name": "wait_for", "arguments": {"path": "game.never", "equals": 1,
                                                                             "timeoutMs": 1}}},
    {"name": "call_tool", "arguments": {"name": 7}},
    {"name": "list_toolsets", "arguments": {"port": 99999}},
    {"name": "no_such_tool", "arguments": {}},
    {"name": "call_tool"},
    {"name": "call_tool", "arguments": {"name": "raw_command", "arguments": {"command": "drop", "args": {"x": 1}}},
     "_meta": {"progressToken": "p1"}},
]
#: Fields that differ from one run to the next (times, frames, ids).
VOLATILE = {"frame", "elapsedMs", "polls", "commandId", "lastValue", "score", "events", "port", "simFrame",
            "completedCommandId", "moving", "eventsNote", "eventsLeftOut"}


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        try:
            return stable(json.loads(value))
        except ValueError:
            return value
    return value
