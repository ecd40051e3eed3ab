"""The ``/state`` document: strict JSON encoding, the whole view and the digest
(``view=digest``, cut before encoding). Pure; called with the kit's lock held."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import uuid
from pathlib import PurePath
from collections.abc import Mapping
from typing import Any

from ...contract import UI_TEXT_CHARS

#: ``ui.text`` is cut to this many characters (docs/contract.md says "about" this many).
UI_TEXT_LIMIT = UI_TEXT_CHARS
_CUT_MARK = f"\n[... cut at {UI_TEXT_CHARS} characters]"
#: Top-level keys of the digest, in the order they are written.
DIGEST_KEYS = ("frame", "simFrame", "completedCommandId", "paused", "ui", "game", "events",
               "commandResults")
_SCALARS = (str, int, float, bool, type(None))


#: What a RawJson part's placeholder is made of: random, once a process (a fresh uuid4 per
#: /state cost a getrandom system call each time, on every answer of every game).
_MARKER = uuid.uuid4().hex


class RawJson:
    """Already-encoded JSON to embed in ``/state`` as is (a large part that rarely
    changes, encoded once rather than on every request). The game vouches that
    ``text`` is one valid JSON value."""

    __slots__ = ("text",)

    def __init__(self, text: str | bytes) -> None:
        self.text = text.decode("utf-8") if isinstance(text, bytes) else str(text)


def _finite(value: Any) -> Any:
    """A copy of ``value`` with NaN and infinities replaced by None (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


#: Plain JSON's encoder, made once (``json.dumps`` with options makes one a call).
_PLAIN = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def encode_plain(doc: Any) -> bytes:
    """:func:`encode_state` of a document that is most likely plain JSON (a command's
    result): encoded by the one plain encoder, else as :func:`encode_state` does."""
    try:
        return _PLAIN.encode(doc).encode("utf-8")
    except (TypeError, ValueError):  # a RawJson, a dataclass, NaN...: the whole way (or its error)
        return encode_state(doc)


def encode_state(doc: Any) -> bytes:
    """Strict JSON for ``/state``: NaN/Infinity become null, dataclasses, enums, sets and
    paths are converted, :class:`RawJson` is spliced in verbatim. Raises TypeError or
    ValueError (with the offending type) for anything else."""
    raw: dict[str, str] = {}
    marker = _MARKER

    def default(obj: Any) -> Any:
        if isinstance(obj, RawJson):
            token = f"@@raw-{marker}-{len(raw)}@@"
            raw[token] = obj.text
            return token
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return _finite(dataclasses.asdict(obj))
        if isinstance(obj, enum.Enum):
            return obj.value
        if isinstance(obj, (set, frozenset)):
            return sorted(obj, key=repr)
        if isinstance(obj, PurePath):
            return str(obj)
        raise TypeError(f"the state contains a {type(obj).__name__}, which is not JSON "
                        "(return dicts, lists, strings, numbers, booleans and None)")

    try:
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False, default=default)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
        raw.clear()
        text = json.dumps(_finite(doc), separators=(",", ":"), allow_nan=False, default=default)
    for token, fragment in raw.items():
        text = text.replace(f'"{token}"', fragment, 1)
    return text.encode("utf-8")


def capped_ui(ui: Any) -> Any:
    """``ui`` with a ``text`` over :data:`UI_TEXT_LIMIT` characters cut (a shallow copy;
    the game's own mapping is never changed)."""
    if isinstance(ui, Mapping):
        text = ui.get("text")
        if isinstance(text, str) and len(text) > UI_TEXT_LIMIT:
            copy = dict(ui)
            copy["text"] = text[:UI_TEXT_LIMIT - len(_CUT_MARK)] + _CUT_MARK
            return copy
    return ui


def full_view(base: Mapping[str, Any], kit: Mapping[str, Any], tail: Mapping[str, Any],
              kit_keys: frozenset[str]) -> dict[str, Any]:
    """The whole ``/state``: the kit's leading fields (``kit``), the game's own keys
    (minus those the kit owns), then the kit's trailing fields (``tail``: events and
    results)."""
    doc: dict[str, Any] = dict(kit)
    for key, value in base.items():
        if key not in kit_keys:
            doc[key] = capped_ui(value) if key == "ui" else value
    doc.update(tail)
    return doc


def digest_view(base: Mapping[str, Any], kit: Mapping[str, Any], tail: Mapping[str, Any]) -> dict[str, Any]:
    """The ``view=digest`` document: ``frame``, ``simFrame``, ``completedCommandId``, ``paused``,
    ``ui``, ``events``, ``commandResults``, and only the scalar values inside ``game``."""
    merged: dict[str, Any] = {}
    for key in ("paused", "ui", "game"):
        if key in base and key not in kit:
            merged[key] = base[key]
    merged.update(kit)
    merged.update(tail)
    doc: dict[str, Any] = {}
    for key in DIGEST_KEYS:
        if key not in merged:
            continue
        value = merged[key]
        if key == "game" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if isinstance(v, _SCALARS)}
        elif key == "ui":
            value = capped_ui(value)
        doc[key] = value
    return doc


def misplaced_screen(base: Any) -> bool:
    """Whether a game's state names its screen at the top level (``{"screen": ...}``), where
    the bridge does not look, rather than as ``ui.screen``."""
    if not isinstance(base, Mapping) or "screen" not in base:
        return False
    ui = base.get("ui")
    return not (isinstance(ui, Mapping) and "screen" in ui)


def state_document(base: Any, *, digest: bool, frame: int, sim_frame: int | None, completed: int,
                   paused: bool | None, events: list[Any], results: list[Any] | RawJson,
                   kit_keys: frozenset[str]) -> dict[str, Any]:
    """The ``/state`` document (the digest view when ``digest``): the game's ``base``
    with the kit's fields; ``sim_frame`` None falls back to the game's own ``simFrame``,
    ``paused`` None (no kit clock) leaves ``paused`` to the game."""
    if not isinstance(base, Mapping):
        raise TypeError(f"the state function returned a {type(base).__name__}, not a dict")
    kit: dict[str, Any] = {"frame": frame}
    sim = sim_frame if sim_frame is not None else base.get("simFrame")
    if sim is not None:
        kit["simFrame"] = sim
    kit["completedCommandId"] = completed
    if paused is not None:
        kit["paused"] = paused
    tail = {"events": events, "commandResults": results}
    if digest:
        return digest_view(base, kit, tail)
    return full_view(base, kit, tail, kit_keys)
