"""The query parameters of ``/state``, ``/health`` and ``/events``: a repeated or non-numeric
value is a 400 naming the parameter, ``waitMs`` is clamped to docs/contract.md's bound,
unknown parameters are ignored. Pure."""

from __future__ import annotations

import urllib.parse

from ...contract import AFTER, MAX_HOLD_MS, VIEW, VIEW_DIGEST, WAIT_MS

#: The longest a request is held for ``after`` (ms).
MAX_WAIT_MS = MAX_HOLD_MS


class QueryError(ValueError):
    """A query parameter the kit cannot use (the message names it)."""


def parse(query: str) -> dict[str, str]:
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, max_num_fields=50)
    except ValueError as exc:
        raise QueryError(f"the query string cannot be read: {exc}") from None
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise QueryError(f"{key} was given more than once; give it once")
        params[key] = value
    return params


def whole_number(params: dict[str, str], name: str, default: int | None, *,
                 minimum: int, maximum: int | None = None, clamp: bool = False) -> int | None:
    """``params[name]`` as an int within ``minimum``..``maximum`` (above the maximum:
    clamped when ``clamp``, else refused)."""
    text = params.get(name)
    if text is None:
        return default
    value = text.strip()
    digits = value[1:] if value[:1] in "+-" else value
    if not digits.isdigit() or len(digits) > 18:
        raise QueryError(f"{name} must be a whole number, got {text[:40]!r}")
    number = int(value)
    if number < minimum:
        bound = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
        raise QueryError(f"{name} must be {bound}, got {number}")
    if maximum is not None and number > maximum:
        if clamp:
            return maximum
        raise QueryError(f"{name} must be from {minimum} to {maximum}, got {number}")
    return number


def after_wait(params: dict[str, str]) -> tuple[int | None, float]:
    """``(after, wait_seconds)`` for ``/state`` and ``/health``: ``after`` absent means
    no wait; ``waitMs`` defaults to the maximum when ``after`` is given alone."""
    after = whole_number(params, AFTER, None, minimum=0)
    wait_ms = whole_number(params, WAIT_MS, MAX_WAIT_MS, minimum=0, maximum=MAX_WAIT_MS, clamp=True)
    return after, (wait_ms or 0) / 1000.0


def view(params: dict[str, str]) -> str:
    value = params.get(VIEW, "full").strip().lower() or "full"
    if value not in ("full", VIEW_DIGEST):
        raise QueryError(f"view must be digest (or full), got {params['view'][:40]!r}")
    return value
