"""The one boundary between game text and the agent: every answer, error and progress line
leaving ``Bridge.run_tool`` is cleaned here of hidden characters and non-JSON numbers,
copied only when something must change (docs/reliability.md, "Game text")."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

from ..manifest.sanitise import is_clean, strip_hidden

Progress = Callable[[float, float | None, str], None]


def _needs_cleaning(value: Any) -> bool:
    """Whether anything in ``value`` (keys included) would change. Iterative, so a deeply
    nested answer cannot exhaust the stack; its strings are gathered and checked at once
    (one C-level pass over their concatenation), and one by one only if that fails."""
    texts: list[Any] = []
    stack = [value]
    pop, extend, gather, gather_all = stack.pop, stack.extend, texts.append, texts.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            gather(item)
        elif kind is dict:
            gather_all(item)
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif kind is float:
            if not math.isfinite(item):
                return True
        elif kind is int or kind is bool or item is None:
            continue
        elif isinstance(item, str):
            gather(str(item))
        elif isinstance(item, Mapping):
            gather_all(item)
            extend(item.values())
    try:
        joined = "".join(texts)
    except TypeError:  # a key that is not text (a number): leave it out
        texts = [text for text in texts if isinstance(text, str)]
        joined = "".join(texts)
    if is_clean(joined):
        return False
    return not all(is_clean(text) for text in texts)  # newlines and tabs are fine inside texts


def _cleaned(value: Any) -> Any:
    """A copy of ``value`` with every string stripped and every non-finite float None
    (iterative; objects of other types are kept as they are)."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, str):
            parent[slot] = strip_hidden(str(item))
        elif isinstance(item, float):
            parent[slot] = item if math.isfinite(item) else None
        elif isinstance(item, Mapping):
            copy: dict[Any, Any] = {}
            parent[slot] = copy
            for key, child in item.items():
                key = strip_hidden(str(key)) if isinstance(key, str) else key
                copy[key] = None
                stack.append((child, copy, key))
        elif isinstance(item, (list, tuple)):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            stack.extend((child, items, index) for index, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


def clean_answer(value: Any) -> Any:
    """``value`` itself when it is clean, else a cleaned copy."""
    return _cleaned(value) if _needs_cleaning(value) else value


def clean_error(exc: BaseException) -> BaseException:
    """Clean, in place, everything an error carries that its rendering can show: for a
    BridgeError its message, fields and every other attribute (``CommandFailed.after``,
    ``reason`` ...); for any other exception its arguments (what ``str()`` shows)."""
    for name, attribute in list(vars(exc).items()):
        if _needs_cleaning(attribute):
            try:
                setattr(exc, name, _cleaned(attribute))
            except (AttributeError, TypeError):
                pass
    if _needs_cleaning(exc.args):
        try:
            exc.args = tuple(_cleaned(list(exc.args)))
        except (AttributeError, TypeError):
            pass
    return exc


def clean_progress(progress: Progress | None) -> Progress | None:
    """A progress callback whose message (a launched game's last output line) is cleaned."""
    if progress is None:
        return None

    def report(done: float, total: float | None, message: str) -> None:
        progress(done, total, strip_hidden(message) if isinstance(message, str) else message)

    return report


__all__ = ["clean_answer", "clean_error", "clean_progress"]
