"""A command's answer: what the game says it did (:func:`command_outcome`, the one reader of
``commandResults``, never raising on what a game sends), and the shape every command answer
is built in (:func:`command_answer`)."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from ..contract import RESULT_CHARS
from ..jsonio import as_int
from ..manifest.sanitise import kind_of, sanitise_text
from .digest import bounded

#: The game's reason for a refusal, in characters.
MAX_REASON = 500
#: A command's ``result`` in the answer, in characters of JSON.
MAX_RESULT = RESULT_CHARS
#: Entries looked at, newest first (a game may keep many; the bridge wants one).
MAX_ENTRIES = 1000

_UNSET: Any = object()


@dataclass(frozen=True)
class Outcome:
    """``ok`` is None when there is no usable entry (the command counts as applied, as for
    a game without the feature). ``result`` is present only when ``has_result``."""

    ok: bool | None = None
    reason: str | None = None
    result: Any = None
    has_result: bool = False
    #: Something the agent should know about the list or the result (malformed, cut).
    note: str | None = None


def command_outcome(state: Mapping[str, Any], command_id: int | None, *, result: bool = True) -> Outcome:
    """The outcome of command ``command_id`` in a ``/state`` snapshot taken after it ran;
    ``result=False``: whether it succeeded and why not, its result left unread (a caller
    that never shows it need not bound it, on every step of an ``advance``)."""
    if command_id is None or "commandResults" not in state:
        return Outcome()
    entries = state.get("commandResults")
    if not isinstance(entries, list):
        return Outcome(note=f"The game's commandResults is {kind_of(entries)}, not a list; ignored.")
    wrong = 0
    for entry in reversed(entries[-MAX_ENTRIES:]):
        if not isinstance(entry, (dict, Mapping)):
            wrong += 1
            continue
        raw_id = entry.get("id")
        if as_int(raw_id) != command_id:
            if as_int(raw_id) is None:
                wrong += 1
            continue
        ok = entry.get("ok")
        if not isinstance(ok, bool):
            return Outcome(note=f"The game's commandResults entry for command {command_id} has 'ok' "
                                f"{kind_of(ok)}, not true or false; ignored.")
        if not ok:
            error = entry.get("error")
            if isinstance(error, str) and error.strip():
                return Outcome(ok=False, reason=sanitise_text(error, MAX_REASON))
            return Outcome(ok=False, reason="the game gave no reason",
                           note=None if error is None else f"Its 'error' was {kind_of(error)}, not text.")
        value = entry.get("result", _UNSET)
        if value is _UNSET or not result:
            return Outcome(ok=True)
        value, cut = bounded(value, MAX_RESULT)
        return Outcome(ok=True, result=value, has_result=True,
                       note=f"The result was cut to fit {MAX_RESULT} characters." if cut else None)
    if wrong:
        return Outcome(note=f"{wrong} of the game's commandResults entries are not "
                            "{id: number, ok: true/false} objects; ignored.")
    return Outcome()


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
    answer = {name: merged.pop(name) for name in ORDER if name in merged}
    notes = {name: merged.pop(name) for name in NOTES if name in merged}
    answer.update(merged)  # fields ORDER does not name, as they came, before the notes
    answer.update(notes)
    return answer


__all__ = ["CONTRACT_FIELDS", "DIGEST_EXTRAS", "MAX_REASON", "MAX_RESULT", "ORDER", "Outcome", "command_answer",
           "command_outcome"]
