"""How a tool's value becomes the text of an answer and its structuredContent: compact JSON,
encoded once, and structuredContent cut where the SDK's serializer would give up. Pure: no
SDK here."""

from __future__ import annotations

import json
from typing import Any, Callable

#: Results larger than this carry text only (no duplicate structuredContent).
STRUCTURED_LIMIT = 256 * 1024
STRUCTURED_DEPTH = 64
#: What stands in for containers nested deeper than STRUCTURED_DEPTH in structuredContent.
TOO_DEEP = "(nested too deeply for structuredContent; the text block has it whole)"

#: The encoders of results, made once (``json.dumps`` with options makes one per call).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_STRICT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
#: A JSON string of a text, as ``json.dumps(text, ensure_ascii=False)`` writes it.
quoted: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def dumps(value: Any) -> str:
    """A result as the agent reads it: compact JSON (no spaces after separators: an agent
    pays for every character)."""
    return _COMPACT.encode(value)


def dumps_strict(value: Any) -> tuple[str, bool]:
    """The text of a value, and whether it is strict JSON (no NaN or Infinity) so it can
    stand as the structuredContent too."""
    try:
        return _STRICT.encode(value), True
    except ValueError:
        return dumps(value), False


def json_id(ident: Any) -> str:
    """A request id as ``json.dumps`` writes it (an int's digits; a string quoted, ASCII)."""
    return str(ident) if type(ident) is int else json.dumps(ident)


def nests_within(value: Any, limit: int) -> bool:
    """True when ``value`` has no containers nested deeper than ``limit`` (iterative, so a
    hostile document cannot exhaust the stack here either)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return False
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


def structured_content(value: Any, text: str) -> Any:
    """``value`` as its structuredContent, given its ``text``: itself, or with every container
    nested STRUCTURED_DEPTH levels down replaced by TOO_DEEP. A text with no more brackets
    than that cannot nest so deep (the usual answer: no walk)."""
    if text.count("{") + text.count("[") <= STRUCTURED_DEPTH or nests_within(value, STRUCTURED_DEPTH):
        return value
    return cut_deep(value, STRUCTURED_DEPTH)


def cut_deep(value: Any, limit: int) -> Any:
    """``value`` with every container nested ``limit`` levels down replaced by TOO_DEEP
    (recursion bounded by ``limit``, whatever the document's depth)."""
    if isinstance(value, dict):
        return {key: cut_deep(item, limit - 1) for key, item in value.items()} if limit > 0 else TOO_DEEP
    if isinstance(value, list):
        return [cut_deep(item, limit - 1) for item in value] if limit > 0 else TOO_DEEP
    return value


__all__ = ["STRUCTURED_DEPTH", "STRUCTURED_LIMIT", "TOO_DEEP", "cut_deep", "dumps", "dumps_strict", "json_id",
           "nests_within", "quoted", "structured_content"]
