"""How a tool's value becomes the text of an answer and its structuredContent: compact JSON,
encoded once, and structuredContent cut where the SDK's serializer would give up. Pure: no
SDK here."""

from __future__ import annotations

import json
from typing import Any, Callable

from ..core.tools.state import ANSWER_LIMIT

#: Results larger than this carry text only (no duplicate structuredContent).
STRUCTURED_LIMIT = 256 * 1024
STRUCTURED_DEPTH = 64
#: What stands in for containers nested deeper than STRUCTURED_DEPTH in structuredContent.
TOO_DEEP = "(nested too deeply for structuredContent; the text block has it whole)"

#: The encoders of results, made once (``json.dumps`` with options makes one per call).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_STRICT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
#: A JSON string of a text, as ``json.dumps(text, ensure_ascii=False)`` writes it.
quoted: Callable[[str], str] = json.encoder.encode_basestring


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


#: The line around an answer's value: the JSON-RPC envelope, the content list, the field names.
LINE_OVERHEAD = 512


def answer_size(text: str, image_bytes: int = 0) -> int:
    """How many bytes the line of an answer whose value's JSON is ``text`` takes: the text
    twice (escaped in the text block, and as the structuredContent), the image's base64 and
    the envelope. Counted for a text that could come near ANSWER_LIMIT (exact for a strict
    text, whose strings hold no raw control characters); a shorter one's is a lower bound
    that is known to fit."""
    image = 4 * ((image_bytes + 2) // 3)
    if 9 * len(text) + image + LINE_OVERHEAD <= ANSWER_LIMIT:  # at most 4 bytes a character, twice, plus escapes
        return 2 * len(text) + image + LINE_OVERHEAD
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    return 2 * size + text.count('"') + text.count("\\") + 2 + image + LINE_OVERHEAD


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


__all__ = ["ANSWER_LIMIT", "STRUCTURED_DEPTH", "answer_size", "STRUCTURED_LIMIT", "TOO_DEEP", "cut_deep", "dumps", "dumps_strict", "json_id",
           "nests_within", "quoted", "structured_content"]
