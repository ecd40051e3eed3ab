"""The pieces every tool's ``outputSchema`` is made of: the bridge's own fields typed, the
game's values described (:func:`from_game`), and the digest every answer about a state carries.
"""

from __future__ import annotations

from typing import Any

INT: dict[str, Any] = {"type": "integer"}
STR: dict[str, Any] = {"type": "string"}
BOOL: dict[str, Any] = {"type": "boolean"}
LIST: dict[str, Any] = {"type": "array"}
INT_OR_NULL: dict[str, Any] = {"type": ["integer", "null"]}
STR_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}


def from_game(what: str) -> dict[str, Any]:
    """A value the game gave, passed on as it is: described, any type."""
    return {"description": f"{what} (as the game gave it)"}


def answer(title: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An answer's shape: an open object with these properties, these required."""
    schema: dict[str, Any] = {"type": "object", "title": title, "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


#: The digest every answer about a game's state carries (get_state {summary: true}'s fields).
DIGEST: dict[str, Any] = {
    "frame": from_game("The game's frame counter"),
    "simFrame": from_game("Simulation frames run (games with a clock)"),
    "completedCommandId": from_game("The last command the game completed"),
    "paused": from_game("Whether the game's clock is stopped"),
    "screen": from_game("The current screen"),
    "elements": from_game("Labels of the visible elements"),
    "text": from_game("ui.text: the game's text picture of its screen"),
    "game": from_game("The game's scalar fields"),
    "events": {"type": "array", "description": "Events no earlier answer for this port showed, each once"},
    "eventsLeftOut": INT,
    "note": STR,
}

#: The digest's fields, once: a shape that carries them refers to them (``#/$defs/digest``),
#: and every schema that holds such a shape carries the definition at its root.
DIGEST_REF: dict[str, Any] = {"$ref": "#/$defs/digest"}
DEFS: dict[str, Any] = {"digest": {"type": "object", "properties": DIGEST}}


def with_digest(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the digest's fields beside its own."""
    return {**schema, "allOf": [DIGEST_REF]}


def rooted(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as a whole outputSchema: with the definitions its shapes refer to."""
    return {**schema, "$defs": DEFS}


#: What every tool answers on an error (``isError: true``): the error's name, its message (the
#: text block says the same) and its fields.
ERROR_ANSWER: dict[str, Any] = answer(
    "an error (isError: true): its name, its message (as the text block says it) and its fields",
    {"error": {"type": "string", "description": "The error's name, e.g. GameOffline"}, "message": STR},
    ("error",))


def admitting_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """A whole outputSchema that also admits :data:`ERROR_ANSWER`: an official client (the
    TypeScript SDK) checks an error's structuredContent against the outputSchema too, and
    throws away the bridge's own words when it does not match."""
    body = {key: value for key, value in schema.items() if key != "$defs"}
    branches = body.get("anyOf")
    if isinstance(branches, list) and set(body) <= {"type", "title", "anyOf"}:  # a union: one more branch
        out: dict[str, Any] = {**body, "anyOf": [*branches, ERROR_ANSWER]}
    else:
        out = {"type": "object", "title": body.get("title", "the answer"), "anyOf": [body, ERROR_ANSWER]}
    if "$defs" in schema:
        out["$defs"] = schema["$defs"]
    return out
