"""Reading a game's ``/state``: the compact digest (what an agent needs after every command,
without the nested lists where megabytes live), dotted paths and recent events. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..contract import DIGEST_KEEPS, UI_TEXT_CHARS
from ..manifest.sanitise import sanitise_text

MAX_EVENTS = 10
MAX_STRING = 300
MAX_FIELDS = 64
MAX_LABELS = 50
#: ``ui.text``, the text picture of the screen.
MAX_UI_TEXT = UI_TEXT_CHARS
#: A value the game supplies for the agent to read (a command's ``result``, an event's
#: fields): containers are cut at this depth and this many entries, then the whole at
#: the caller's budget of characters.
MAX_VALUE_DEPTH = 8
MAX_VALUE_ITEMS = 50
_SCALARS = (str, int, float, bool, type(None))
_MISSING = object()


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[: MAX_STRING - 1] + "…"
    return value


def _short_text(text: str) -> str:
    short: str = _short(text)
    return short


def event_text(event: Any) -> str | None:
    """``{"m": "merge:cherry"}`` or ``"merge:cherry"`` -> ``"merge:cherry"``."""
    if isinstance(event, str):
        return _short_text(event)
    if isinstance(event, (dict, Mapping)):
        m = event.get("m")
        if isinstance(m, _SCALARS) and m is not None:
            return _short_text(str(m))
        try:
            return _short_text(json.dumps(event, separators=(",", ":"), default=str))
        except (TypeError, ValueError, RecursionError):
            return None
    if isinstance(event, (int, float)) and not isinstance(event, bool):
        return str(event)
    return None


def all_events(state: Mapping[str, Any]) -> list[str]:
    events = state.get("events")
    if not isinstance(events, list):
        return []
    return [text for text in (event_text(e) for e in events) if text is not None]


def recent_events(state: Mapping[str, Any], limit: int = MAX_EVENTS) -> list[str]:
    """The texts of the newest ``limit`` events, oldest first: read from the newest back,
    so a game's whole buffer (hundreds of events) is not rendered for every answer."""
    events = state.get("events")
    if not isinstance(events, list) or limit <= 0:
        return [] if limit > 0 else all_events(state)
    texts: list[str] = []
    for event in reversed(events):
        text = event_text(event)
        if text is not None:
            texts.append(text)
            if len(texts) >= limit:
                break
    texts.reverse()
    return texts


def summarise(state: Any, *, events: bool = True) -> dict[str, Any]:
    """The compact digest of a ``/state`` snapshot: scalars only, bounded in size.
    ``events=False`` leaves out its recent events (an answer says the new ones instead)."""
    if not isinstance(state, (dict, Mapping)):
        return {}
    out: dict[str, Any] = {}
    for key in ("frame", "simFrame", "completedCommandId", "paused"):
        value = state.get(key, _MISSING)
        if value is not _MISSING and isinstance(value, _SCALARS):
            out[key] = _short(value)
    ui = state.get("ui")
    if isinstance(ui, (dict, Mapping)):
        screen = ui.get("screen")
        if isinstance(screen, _SCALARS) and screen is not None:
            out["screen"] = _short(str(screen))
        elements = ui.get("elements")
        if isinstance(elements, list):
            labels = []
            for element in elements:
                if isinstance(element, (dict, Mapping)) and element.get("visible", True) is not False:
                    label = element.get("label")
                    if isinstance(label, (str, int, float)) and not isinstance(label, bool):
                        labels.append(_short(str(label)))
                if len(labels) >= MAX_LABELS:
                    break
            out["elements"] = labels
    text = screen_text(state)
    if text is not None:
        out["text"] = text  # ui.text: a text picture of the screen, the cheapest way to see
    game = state.get("game")
    if isinstance(game, (dict, Mapping)):
        scalars = {}
        for key, value in game.items():
            if isinstance(value, _SCALARS):
                scalars[_short(str(key))] = _short(value)
                if len(scalars) >= MAX_FIELDS:
                    break
        out["game"] = scalars
    if events:
        out["events"] = recent_events(state)
    return out


def screen_text(state: Mapping[str, Any]) -> str | None:
    """``ui.text`` made safe to show and capped (None when the game has none)."""
    ui = state.get("ui")
    raw = ui.get("text") if isinstance(ui, (dict, Mapping)) else None
    if not isinstance(raw, str) or not raw.strip():
        return None
    return sanitise_text(raw, MAX_UI_TEXT) or None


def _bounded_copy(value: Any, depth: int, cut: list[bool]) -> Any:
    if isinstance(value, str):
        short = _short(value)
        if short is not value:
            cut[0] = True
        return short
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if depth >= MAX_VALUE_DEPTH:
        cut[0] = True
        return "…"
    if isinstance(value, (dict, Mapping)):
        out: dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= MAX_VALUE_ITEMS:
                out["…"] = f"{len(value) - MAX_VALUE_ITEMS} more"
                cut[0] = True
                break
            out[_short(str(key))] = _bounded_copy(item, depth + 1, cut)
        return out
    if isinstance(value, (list, tuple)):
        items = [_bounded_copy(item, depth + 1, cut) for item in value[:MAX_VALUE_ITEMS]]
        if len(value) > MAX_VALUE_ITEMS:
            items.append(f"… {len(value) - MAX_VALUE_ITEMS} more")
            cut[0] = True
        return items
    cut[0] = True
    return _short(str(value))


def bounded(value: Any, budget: int) -> tuple[Any, bool]:
    """A value the game supplied, made fit to show the agent: strings shortened, containers
    cut in depth and count, and if its JSON is still over ``budget`` characters, that JSON
    cut to ``budget`` as a string. Returns the value and whether anything was cut."""
    cut = [False]
    copy = _bounded_copy(value, 0, cut)
    text = json.dumps(copy, ensure_ascii=False, separators=(",", ":"))
    if len(text) <= budget:
        return copy, cut[0]
    return text[: max(1, budget - 1)] + "…", True


#: The most characters a value a condition held with (``value``, ``lastValue``,
#: ``initialValue`` of ``wait_for``, ``until``, ``advance``) takes in an answer.
CONDITION_VALUE_CHARS = 2000


def shown_value(value: Any) -> Any:
    """A value a condition looked at, as an answer shows it: :func:`bounded` to
    CONDITION_VALUE_CHARS (a wait on a 5 MB list answers a glimpse of it, never the list)."""
    if isinstance(value, str):  # a text is shown up to the budget, not cut like a field inside a value
        return value if len(value) <= CONDITION_VALUE_CHARS else value[: CONDITION_VALUE_CHARS - 1] + "…"
    return bounded(value, CONDITION_VALUE_CHARS)[0]


#: The top-level keys a game's ``/state?view=digest`` keeps whole; inside ``game`` it keeps
#: only the scalar values.
DIGEST_VIEW_KEYS = frozenset(DIGEST_KEEPS)


def digest_keeps(path: str) -> bool | None:
    """Whether ``/state?view=digest`` keeps what ``path`` names: True (always, when
    ``/state`` has it), None (``game.<key>``: only when its value is a scalar, so a miss
    in the digest proves nothing) or False (it may leave it out)."""
    segments = [s for s in path.replace("[", ".").replace("]", "").split(".") if s != ""]
    if not segments:
        return False
    if segments[0] in DIGEST_VIEW_KEYS:
        return True
    if segments[0] == "game" and len(segments) == 2:
        return None
    return False


def get_path(document: Any, path: str) -> tuple[bool, Any]:
    """``get_path(state, "game.pieces.0.x")`` -> ``(found, value)``.

    Segments are separated by dots; ``a[0]`` is accepted as ``a.0``. A digit segment
    indexes a list (negative indexes count from the end)."""
    text = path.replace("[", ".").replace("]", "")
    current = document
    for segment in (s for s in text.split(".") if s != ""):
        if isinstance(current, (dict, Mapping)):
            if segment not in current:
                return False, None
            current = current[segment]
        elif isinstance(current, list):
            try:
                index = int(segment)
                current = current[index]
            except (ValueError, IndexError):
                return False, None
        else:
            return False, None
    return True, current


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0``, but ``True`` is not ``1`` and ``"1"`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (dict, Mapping)) and isinstance(b, (dict, Mapping)):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
