"""What every tool answers, as JSON Schema: the ``outputSchema`` each tool advertises.

A field the bridge makes (``port``, ``applied``, ``settled``, counts and flags) is typed; a
value that comes from the game as it sent it (its name, ``game``, ``result``, ``frame``,
``screen``, a whole ``/state``) is described, not typed, because a game may send anything
there and an answer must never fail its own schema. Objects stay open: the extensions and
later versions add fields beside the documented ones. ``call_tool`` answers with whatever
the tool it ran answers, so its schema is the union of those shapes (the last of which, a
game's own ``/state``, is any object). Pure data; tests validate real answers against it.
"""

from __future__ import annotations

from typing import Any

INT: dict[str, Any] = {"type": "integer"}
STR: dict[str, Any] = {"type": "string"}
BOOL: dict[str, Any] = {"type": "boolean"}
LIST: dict[str, Any] = {"type": "array"}
INT_OR_NULL: dict[str, Any] = {"type": ["integer", "null"]}
STR_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}


def _game(what: str) -> dict[str, Any]:
    """A value the game gave, passed on as it is: described, any type."""
    return {"description": f"{what} (as the game gave it)"}


def _object(title: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "title": title, "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


#: The digest every answer about a game's state carries (get_state {summary: true}'s fields).
DIGEST: dict[str, Any] = {
    "frame": _game("The game's frame counter"),
    "simFrame": _game("Simulation frames run (games with a clock)"),
    "completedCommandId": _game("The last command the game completed"),
    "paused": _game("Whether the game's clock is stopped"),
    "screen": _game("The current screen"),
    "elements": _game("Labels of the visible elements"),
    "text": _game("ui.text: the game's text picture of its screen"),
    "game": _game("The game's scalar fields"),
    "events": {"type": "array", "description": "Events no earlier answer for this port showed, each once"},
    "eventsLeftOut": INT,
    "note": STR,
}

#: The digest's fields, once: a shape that carries them refers to them (``#/$defs/digest``),
#: and every schema that holds such a shape carries the definition at its root.
DIGEST_REF: dict[str, Any] = {"$ref": "#/$defs/digest"}
DEFS: dict[str, Any] = {"digest": {"type": "object", "properties": DIGEST}}


def _with_digest(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "allOf": [DIGEST_REF]}


def _rooted(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as a whole outputSchema: with the definitions its shapes refer to."""
    return {**schema, "$defs": DEFS}


#: A command's answer: the contract's fields in its order, then what the extensions add.
COMMAND_ANSWER = _with_digest(_object("a command's answer", {
    "port": INT, "tool": STR, "via": STR, "command": STR,
    "applied": {"type": ["boolean", "null"], "description": "Whether the command was applied (null: not known)"},
    "commandId": _game("The id the game gave the command"),
    "confirmation": STR_OR_NULL,
    "result": _game("What the command returned (commandResults)"),
    "settled": {"type": "boolean", "description": "With until: whether the condition held in time"},
    "pending": {"type": "boolean", "description": "The command waits for the clock: advance delivers it"},
    "lastValue": _game("With until not met: the value at the deadline"),
}, ("port", "tool", "via", "command", "applied", "commandId", "confirmation", "frame", "screen", "game", "events")))

WAIT_ANSWER = _with_digest(_object("wait_for's answer", {
    "port": INT, "tool": {"const": "wait_for"}, "matched": BOOL, "path": STR, "event": STR,
    "value": _game("The value the condition held with"), "lastValue": _game("The value at the deadline"),
    "initialValue": _game("With changes: the value it changed from"), "pathFound": BOOL,
    "elapsedMs": INT, "polls": INT,
}, ("port", "tool", "matched", "elapsedMs", "polls")))

ADVANCE_ANSWER = _with_digest(_object("advance's answer", {
    "port": INT, "tool": {"const": "advance"}, "matched": BOOL, "framesAdvanced": INT,
    "path": STR, "event": STR, "value": _game("The value the condition held with"),
    "lastValue": _game("The value after the last frame"),
    "inputs": {"type": "array", "description": "With inputs: each one's at, tool, commandId and outcome "
               "(ok with result or error; done: false while still in progress)",
               "items": {"type": "object", "properties": {"at": INT, "tool": STR, "commandId": INT_OR_NULL,
                                                          "ok": BOOL, "done": BOOL, "error": STR,
                                                          "result": _game("What the input command returned")}}},
    "screenshot": {"type": "object", "description": "With screenshot: get_screenshot's fields for the picture after"},
}, ("port", "tool", "matched", "framesAdvanced")))

STATE_DIGEST = _with_digest(_object("get_state {summary: true}'s answer", {"port": INT}, ("port",)))
HEALTH_ANSWER = _object("get_health's answer: GET /health", {
    "port": INT, "ok": _game("Whether the game says it is fine"), "frame": _game("The frame counter"),
    "features": _game("The extensions the game serves"),
}, ("port",))
EVENTS_ANSWER = _object("get_events' answer", {
    "port": INT, "events": LIST, "next": INT_OR_NULL, "dropped": BOOL,
}, ("port", "events"))
SCREENSHOT_ANSWER = _object("get_screenshot's answer (the picture follows as an image block)", {
    "port": INT, "frame": _game("The frame the picture shows"), "width": INT, "height": INT, "format": STR,
    "bytes": INT, "changed": BOOL, "file": STR, "window": _game("The game's window"),
}, ("port", "format"))
CLOSE_ANSWER = _object("close's answer", {
    "port": INT, "tool": {"const": "close"}, "closed": BOOL, "confirmation": STR, "note": STR,
}, ("port", "tool", "closed", "confirmation"))
COMPOSITE_ANSWER = _object("a composite's answer", {"port": INT, "tool": STR, "via": {"const": "composite"}},
                           ("port", "tool", "via"))
WHOLE_STATE = {"type": "object", "title": "get_state's answer: the game's own /state, as it sent it"}

#: The bridge toolset's answers (their outputSchema when --eager advertises them).
BRIDGE_OUTPUTS: dict[str, dict[str, Any]] = {
    "get_state": _rooted({"anyOf": [STATE_DIGEST, WHOLE_STATE], "type": "object"}),
    "get_health": HEALTH_ANSWER,
    "raw_command": _rooted(COMMAND_ANSWER),
    "wait_for": _rooted(WAIT_ANSWER),
    "get_screenshot": SCREENSHOT_ANSWER,
    "advance": _rooted(ADVANCE_ANSWER),
    "get_events": EVENTS_ANSWER,
    "close": CLOSE_ANSWER,
}

_LIVE = _object("a live instance", {
    "port": INT, "discovery": {"enum": ["registry", "scan", "both"]}, "status": STR,
    "launchedByThisBridge": BOOL, "game": _game("Its name"), "version": _game("Its version"),
    "pid": INT_OR_NULL, "cwd": STR_OR_NULL, "screen": _game("Its screen"), "toolsets": LIST,
}, ("port", "status"))

#: The seven tools' answers.
OUTPUTS: dict[str, dict[str, Any]] = {
    "launch_instance": _object("launch_instance's answer", {
        "port": INT, "pid": INT_OR_NULL, "name": _game("The game's name, from /tools"),
        "version": _game("The game's version, from /tools"), "cwd": STR, "readyInMs": INT, "logFile": STR,
        "notes": LIST, "note": STR, "paused": _game("With paused: whether it started paused"),
        "simFrame": _game("With paused: its simulation frame"),
    }, ("port", "pid", "name", "version", "cwd", "readyInMs", "logFile")),
    "list_instances": _object("list_instances' answer", {
        "registryDir": STR_OR_NULL, "live": {"type": "array", "items": _LIVE},
        "stale": {"type": "array", "items": {"type": "object"}},
        "notAGame": {"type": "array", "items": {"type": "object"}},
        "free": {"type": "array", "items": INT},
    }, ("registryDir", "live", "stale", "notAGame", "free")),
    "stop_instance": _object("stop_instance's answer", {
        "port": INT, "stopped": BOOL,
        "how": {"type": "string", "description": "closed cleanly, terminated, killed, already exited or not signalled"},
        "pid": INT_OR_NULL, "exitCode": INT_OR_NULL, "signal": STR, "stoppedInMs": INT, "logFile": STR_OR_NULL,
        "note": STR, "message": STR,
    }, ("port", "stopped", "how", "pid", "exitCode", "stoppedInMs", "logFile")),
    "instance_log": _object("instance_log's answer", {
        "port": INT, "lines": {"type": "array", "items": STR}, "next": INT, "dropped": BOOL, "more": BOOL,
        "logFile": STR, "running": BOOL, "exitCode": INT_OR_NULL, "signal": STR,
    }, ("port", "lines", "next", "dropped", "more", "logFile", "running", "exitCode")),
    "list_toolsets": _object("list_toolsets' answer", {
        "port": INT, "game": _game("Its name"), "version": _game("Its version"), "protocol": _game("Its protocol"),
        "manifest": STR_OR_NULL, "description": _game("Its rules, in its own words"),
        "toolsets": {"type": "array", "items": _object("a toolset (passthrough lists examples, not tools)", {
            "name": STR, "description": STR_OR_NULL, "tools": {"type": "array", "items": STR},
            "examples": {"type": "array", "items": STR}}, ("name",))},
        "next": STR,
    }, ("port", "toolsets")),
    "describe_toolset": _object("describe_toolset's answer", {
        "port": INT, "name": STR, "description": STR_OR_NULL,
        "tools": {"type": "array", "items": _object("a tool", {"name": STR, "description": STR_OR_NULL,
                                                               "inputSchema": {"type": "object"}}, ("name",))},
    }, ("port", "name")),
    "call_tool": _rooted({"type": "object", "title": "call_tool's answer: the answer of the tool it ran",
                          "anyOf": [COMMAND_ANSWER, WAIT_ANSWER, ADVANCE_ANSWER, STATE_DIGEST, HEALTH_ANSWER,
                                    EVENTS_ANSWER, SCREENSHOT_ANSWER, CLOSE_ANSWER, COMPOSITE_ANSWER, WHOLE_STATE]}),
}


#: A flat --eager game tool's answer: a command's.
FLAT_TOOL_OUTPUT = _rooted(COMMAND_ANSWER)


def output_schema(tool: str) -> dict[str, Any] | None:
    """The outputSchema of one of the seven tools or of a bridge tool, or None."""
    return OUTPUTS.get(tool) or BRIDGE_OUTPUTS.get(tool)


__all__ = ["BRIDGE_OUTPUTS", "COMMAND_ANSWER", "DEFS", "FLAT_TOOL_OUTPUT", "OUTPUTS", "output_schema"]
