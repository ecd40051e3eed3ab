"""The shape of a command's answer: the contract's fields, in the contract's order, then
what the extensions add.

An agent (and a client written against the documented example)
reads every ``call_tool`` answer for a command the same way, so the field list is
written down once, here, and every answer is built through :func:`command_answer`. Each
answer stands alone: the digest in it is the whole digest of the state it reports
(``get_state {summary: true}``'s fields, with the values at that moment); only its
events depend on what earlier answers showed (each event once, see core/events.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The fields of the contract's ``call_tool`` example, in its order: present in every
#: answer for a command (``frame`` and ``screen`` null, ``game`` empty when the game has none).
CONTRACT_FIELDS = ("port", "tool", "via", "command", "applied", "commandId", "confirmation",
                   "frame", "screen", "game", "events")
#: The digest's fields, after the contract's: the element labels, then what the
#: extensions add (``ui.text``, the clock, the events cursor's notes).
DIGEST_EXTRAS = ("elements", "eventsLeftOut", "eventsNote", "text", "paused", "simFrame", "completedCommandId")
#: Where each field of a command's answer goes: the contract's, then what the command
#: and ``until`` add, then the digest's extras, then notes. Fields not named here (a
#: future extension's) come after these, before the notes.
ORDER = (CONTRACT_FIELDS[:7] + ("confirmationNote", "pending") + CONTRACT_FIELDS[7:9] + ("elements",)
         + CONTRACT_FIELDS[9:] + ("eventsLeftOut", "eventsNote", "result", "resultNote", "settled", "path",
                                  "event", "value", "lastValue", "pathFound", "initialValue")
         + DIGEST_EXTRAS[3:])
NOTES = ("delivered", "stillPending", "pendingNote", "note", "state")
_RANK = {name: index for index, name in enumerate(ORDER)}


def command_answer(fields: Mapping[str, Any], digest: Mapping[str, Any] | None) -> dict[str, Any]:
    """A command's answer: ``fields`` (what the bridge says of the command: port, tool,
    via, command, applied, commandId, confirmation, result, settled ...) and ``digest``
    (the whole digest of the state after it), in :data:`ORDER`. A contract field the
    game does not supply is there as null (``game``: empty, ``events``: none), so the
    shape is the documented one whatever the game serves."""
    merged: dict[str, Any] = dict(digest or {})
    merged.update(fields)
    merged.setdefault("frame", None)
    merged.setdefault("screen", None)
    merged.setdefault("game", {})
    merged.setdefault("events", [])
    last = len(ORDER)
    return dict(sorted(merged.items(),
                       key=lambda kv: _RANK.get(kv[0], last + (NOTES.index(kv[0]) + 1 if kv[0] in NOTES else 0))))


__all__ = ["CONTRACT_FIELDS", "DIGEST_EXTRAS", "ORDER", "command_answer"]
