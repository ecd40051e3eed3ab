"""The one sanitiser of game text: hidden characters removed and lengths capped, for the
manifest, the Bridge's answers (``core/boundary.py``) and every stream a command line writes
(``terminal/text.py``)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from ..contract import DESCRIPTION_CHARS

#: Caps on manifest text, in characters.
DESCRIPTION_LIMIT = 1000
GAME_DESCRIPTION_LIMIT = DESCRIPTION_CHARS  # /tools game.description: the rules
ARG_DESCRIPTION_LIMIT = 500
IDENTITY_LIMIT = 200  # game.name, game.version
EXAMPLE_LIMIT = 200
NAME_LIMIT = 64
FOLDED_DEFAULT_LIMIT = 120

_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_NEWLINE_RUN = re.compile(r"\n{3,}")
_SPACE_RUN = re.compile(r"[ \t\n]+")
# Invisible characters outside the Cf category: combining grapheme joiner, Hangul
# fillers, Khmer inherent vowels, Mongolian free variation selectors.
_INVISIBLE = frozenset(chr(c) for c in (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B,
                                        0x180C, 0x180D, 0x180E, 0x180F, 0x3164, 0xFFA0))


def _is_hidden(ch: str) -> bool:
    cp = ord(ch)
    return 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or ch in _INVISIBLE


def _strip_hidden(text: str) -> str:
    if text.isascii():
        return _ASCII_CONTROL.sub("", text)
    out: list[str] = []
    for ch in text:
        if ch.isprintable():
            if not _is_hidden(ch):
                out.append(ch)
        elif ch == "\n" or ch == "\t":
            out.append(ch)
        else:
            category = unicodedata.category(ch)
            if category == "Zs":
                out.append(" ")
            elif category in ("Zl", "Zp"):
                out.append("\n")
            # Cc, Cf, Cs, Co, Cn: control, format/invisible, surrogate, private, unassigned
    return "".join(out)


_PRINTABLE_HIDDEN = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0"
                               "\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def is_clean(text: str) -> bool:
    """True when :func:`strip_hidden` would leave ``text`` as it is (fast: C-level checks
    for the common cases, the full rule only for text that fails them)."""
    if text.isprintable():
        return text.isascii() or _PRINTABLE_HIDDEN.search(text) is None
    if "\n" in text or "\t" in text:
        rest = text.replace("\n", "").replace("\t", "")
        if rest.isprintable():
            return rest.isascii() or _PRINTABLE_HIDDEN.search(rest) is None
    return False


def strip_hidden(text: str) -> str:
    """``text`` without what must never reach the agent, and otherwise as it was (no
    cap, no trimming): control characters but newline and tab (a carriage return
    becomes a newline), bidirectional overrides and isolates, zero-width and other
    format characters, invisible fillers and variation selectors, surrogates,
    private-use and unassigned code points; odd spaces become spaces."""
    if is_clean(text):
        return text
    return _strip_hidden(text.replace("\r\n", "\n").replace("\r", "\n"))


def clean_text(value: Any, budget: int) -> str:
    """The text of ``value`` with hidden characters removed, before capping."""
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        text = repr(value)
    elif isinstance(value, int):
        try:
            text = str(value)
        except ValueError:  # beyond the int -> str digit limit
            return ""
    elif isinstance(value, str):
        text = value
    else:
        return ""
    # Only a prefix can survive the cap; bound the work on a hostile 10 MB string.
    text = text[: budget * 4 + 256]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _strip_hidden(text)
    text = _TRAILING_SPACE.sub("\n", text)
    text = _NEWLINE_RUN.sub("\n\n", text)
    return text.strip()


def cap_text(text: str, limit: int) -> str:
    limit = max(1, int(limit))
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


def sanitise_text(value: Any, limit: int) -> str:
    """Manifest text made safe to show a model: data, not instructions.

    Removes C0/C1 control characters (keeping newline and tab), format and invisible
    characters (zero-width spaces and joiners, bidi overrides and isolates, BOM, tag
    characters, variation selectors), surrogates, private-use and unassigned code
    points; turns odd spaces into spaces and line separators into newlines; collapses
    runs of blank lines; strips the ends; caps at ``limit`` characters ending in "…".
    Numbers become their decimal text; every other non-string becomes ``""``.
    """
    return cap_text(clean_text(value, max(1, int(limit))), limit)


def one_line(value: Any, limit: int) -> str:
    return cap_text(_SPACE_RUN.sub(" ", clean_text(value, limit)), limit)


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def quote_name(value: Any) -> str:
    """A name quoted for a message, safe whatever it contains."""
    return "'" + one_line(value, NAME_LIMIT) + "'"


__all__ = ["ARG_DESCRIPTION_LIMIT", "DESCRIPTION_LIMIT", "EXAMPLE_LIMIT", "FOLDED_DEFAULT_LIMIT", "GAME_DESCRIPTION_LIMIT",
           "IDENTITY_LIMIT", "NAME_LIMIT", "cap_text", "clean_text", "is_clean", "kind_of", "one_line",
           "quote_name", "sanitise_text", "strip_hidden"]
