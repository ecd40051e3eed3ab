"""The one JSON decoder for what games and files send, bounded in bytes and in decoded values
(docs/design.md, "JSON from outside"), and the one capped file reader. Standard library only."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import re
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, ContextManager, Iterator

#: Bodies at least this large are decoded with the cyclic garbage collector paused.
PAUSE_GC_BYTES = 256 * 1024
#: The most values one document may hold, counted as its objects, arrays and commas (its
#: ``{``, ``[`` and ``,`` outside strings). A 10 MB ``/state`` of typical entity records
#: has about 1.1 million; the costliest shape takes about 100 bytes of memory for each.
MAX_VALUES = 3_000_000
#: What the limit means in memory, for messages and docs/reliability.md.
DECODED_BOUND_TEXT = "about 300 MB"
_NOT_STRUCTURAL = bytes(c for c in range(256) if c not in b"{[,")
# A JSON string, unrolled (a long one is skipped in one step: each character can be read one
# way only, so a failed match gives back in linear time); possessive where the engine has it
# (3.11+), which also spares it the backtracking bookkeeping.
_JSON_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"' if sys.version_info >= (3, 11)
                          else rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_gc_pause_lock = threading.Lock()
_gc_pauses = 0
_gc_paused_by_us = False


def _pause_gc() -> None:
    global _gc_pauses, _gc_paused_by_us
    with _gc_pause_lock:
        if _gc_pauses == 0:
            _gc_paused_by_us = gc.isenabled()
            if _gc_paused_by_us:
                gc.disable()
        _gc_pauses += 1


def _resume_gc() -> None:
    global _gc_pauses, _gc_paused_by_us
    with _gc_pause_lock:
        _gc_pauses -= 1
        if _gc_pauses == 0 and _gc_paused_by_us:
            _gc_paused_by_us = False
            gc.enable()


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while a large JSON document is built.

    Parsing allocates hundreds of thousands of containers; each few hundred trigger a
    collection, and the older generations are rescanned as they grow. JSON builds no
    reference cycles, so nothing is lost. Reference-counted across threads; a collector
    that was already disabled (by the host) is left alone."""
    _pause_gc()
    try:
        yield
    finally:
        _resume_gc()


_scope = threading.local()
#: How long one call keeps the collector paused after its first large document: a
#: longer call (a wait that parses many states) goes back to pausing for each parse.
HOLD_PAUSE_S = 1.0


class _LargeDocuments:
    """One call's scope: the thread's ``_scope.current`` while it runs (the outermost one
    only); ``since`` is when it paused the collector (None: not yet; "expired")."""

    __slots__ = ("since", "_outer")

    def __enter__(self) -> None:
        self.since: float | str | None = None
        self._outer = getattr(_scope, "current", None) is None
        if self._outer:
            _scope.current = self

    def __exit__(self, *_exc: object) -> None:
        if self._outer:
            _scope.current = None
            if isinstance(self.since, float):
                _resume_gc()


def large_documents_scope() -> ContextManager[None]:
    """One call's worth of large documents (the Bridge runs each tool call in one): the
    collector, paused to parse the first large document, stays paused until the call
    ends (for at most :data:`HOLD_PAUSE_S`), so the document is freed by its reference
    counts before the collector runs again. Resumed right after the parse, the collector
    would scan the whole new document once, its objects counted as young (about a fifth
    of a 10 MB ``/state``'s parse), only for them to be freed moments later. Nested
    scopes are the outer one's. (A class, not a generator: every call enters one.)"""
    return _LargeDocuments()


def _parse_large(text: str, decoder: json.JSONDecoder) -> Any:
    """``json.loads`` of a large text with the collector paused: for the rest of the call
    in a :func:`large_documents_scope`, else for the parse."""
    scope = getattr(_scope, "current", None)
    if scope is not None:
        since = scope.since
        if since is None:
            _pause_gc()
            scope.since = time.monotonic()
            return decoder.decode(text)
        if isinstance(since, float) and time.monotonic() - since < HOLD_PAUSE_S:
            return decoder.decode(text)
        if isinstance(since, float):
            _resume_gc()
            scope.since = "expired"  # the rest of this call pauses for each parse
    with _gc_paused():
        return decoder.decode(text)


def count_values(body: bytes) -> int:
    """How many objects, arrays and commas ``body`` has (its ``{``, ``[`` and ``,``
    outside strings), or an upper bound of it when that is already within the limit."""
    if len(body) <= MAX_VALUES:
        return len(body)  # no more values than bytes: no need to count
    count = len(body.translate(None, _NOT_STRUCTURAL))
    if count <= MAX_VALUES:
        return count
    return len(_JSON_STRING.sub(b"", body).translate(None, _NOT_STRUCTURAL))


#: A ``\\u`` escape of a UTF-16 surrogate (a pair's half, or one alone).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(doc: Any) -> Any:
    """``doc`` with each surrogate its escapes left alone (``"\\ud800"`` without its pair:
    JSON's grammar allows it, Unicode has no such character and UTF-8 cannot carry it)
    replaced by U+FFFD, in keys and values: every answer and file the bridge writes is
    UTF-8. A pair's halves are already one character here."""
    def clean(text: str) -> str:
        return _LONE_SURROGATE.sub("\ufffd", text)

    if isinstance(doc, str):
        return clean(doc)
    stack = [doc] if isinstance(doc, (dict, list)) else []
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, str):
                    node[index] = clean(value)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        else:
            for key in [k for k in node if _LONE_SURROGATE.search(k)]:
                node[clean(key)] = node.pop(key)
            for key, value in node.items():
                if isinstance(value, str):
                    node[key] = clean(value)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
    return doc


def decode_json(body: bytes, *, strict: bool = False) -> Any:
    """Parse a JSON document; raise ValueError with a short reason (that reads after "the
    body ...") for invalid, non-UTF-8, absurdly nested or absurdly many-valued ones
    (over :data:`MAX_VALUES`). ``NaN``/``Infinity`` become ``None``, or with ``strict``
    (a file or a conformance check) are refused."""
    return decode_json_taking([body], strict=strict)


def decode_json_taking(holder: list[bytes], *, strict: bool = False) -> Any:
    """:func:`decode_json` of the one body in ``holder``, which it empties: when the caller
    keeps no other reference, the bytes are released once they are text, before the
    document is built (a large ``/state``'s size less at the call's peak)."""
    body = holder.pop()
    decoder = _STRICT if strict else _LENIENT
    values = count_values(body)
    if values > MAX_VALUES:
        raise ValueError(f"has {values:,} objects, arrays and commas, more than the {MAX_VALUES:,} the bridge "
                         f"decodes (it bounds a decoded answer to {DECODED_BOUND_TEXT}): send less, or leave "
                         "bulky lists out of this answer")
    large = len(body) >= PAUSE_GC_BYTES
    surrogates = _SURROGATE_ESCAPE.search(body) is not None
    try:
        # JSON on the wire and in files is UTF-8 (RFC 8259): never sniffed as UTF-16/32; a
        # leading byte-order mark is ignored, as the RFC allows (editors write one).
        text = (body[3:] if body[:3] == _BOM else body).decode("utf-8")
        del body
        doc = _parse_large(text, decoder) if large else decoder.decode(text)
        return _without_lone_surrogates(doc) if surrogates else doc
    except RecursionError:
        raise ValueError("is nested too deeply to parse") from None
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except _NotJson as exc:
        raise ValueError(str(exc)) from None
    except ValueError:  # int() refuses a number of over 4300 digits
        raise ValueError("holds a number too long to read (thousands of digits)") from None


def _no_constant(_name: str) -> None:
    return None


class _NotJson(ValueError):
    """What strict decoding refuses inside a valid parse (NaN, Infinity)."""


def _reject_constant(name: str) -> None:
    raise _NotJson(f"contains {name}, which is not JSON (strict parsers reject it)")


#: The decoders, made once (``json.loads`` with any option makes one per call). Stateless
#: between documents, so every thread shares them.
_LENIENT = json.JSONDecoder(parse_constant=_no_constant)
_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
_BOM = b"\xef\xbb\xbf"


#: The largest magnitude :func:`as_int` accepts: JSON's safe integers (2**53), the whole
#: numbers every JSON reader holds exactly. A frame or a command id beyond it is absurd.
MAX_WHOLE = 2 ** 53


def as_int(value: Any, *, floats: bool = True, minimum: int = -MAX_WHOLE, maximum: int = MAX_WHOLE) -> int | None:
    """A number a game or a file supplied, as an int, or None when it is not a whole
    number in ``minimum..maximum`` (by default JSON's safe integers): booleans,
    fractions, NaN, infinities, strings, ``1e300`` and a 400-digit number are not. JSON
    has one number type, so ``12.0`` is 12 unless ``floats`` is False (a file whose
    format says integer). Counters a game reports (frames, command ids) pass
    ``minimum=0``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif floats and isinstance(value, float) and value.is_integer():
        if not -MAX_WHOLE <= value <= MAX_WHOLE:
            return None
        number = int(value)
    else:
        return None
    return number if minimum <= number <= maximum else None


class FileProblem(ValueError):
    """A file that cannot be used; the message reads after its name ("is a directory").

    ``kind`` says which rule it broke: ``missing``, ``symlink``, ``not-regular``,
    ``directory``, ``too-large`` or ``unreadable``."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


def read_capped(path: str | Path, max_bytes: int, *, follow_symlinks: bool = True,
                regular_only: bool = False) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` of them (more is a :class:`FileProblem`).

    ``follow_symlinks=False`` refuses a symbolic link (also one swapped in between the
    check and the open); ``regular_only`` refuses FIFOs, devices and directories, and
    opens without blocking, so a FIFO planted under the name cannot hang the reader."""
    path = Path(path)
    if not follow_symlinks or regular_only:
        try:
            info = os.lstat(path) if not follow_symlinks else os.stat(path)
        except FileNotFoundError:
            raise FileProblem("missing", "does not exist") from None
        except OSError as exc:
            raise FileProblem("unreadable", f"cannot be read ({exc.strerror or exc})") from None
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            raise FileProblem("symlink", f"is a symbolic link (to {target!r})")
        if regular_only and not stat.S_ISREG(info.st_mode):
            raise FileProblem("not-regular", "is not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    if regular_only:
        flags |= getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileProblem("missing", "does not exist") from None
    except IsADirectoryError:
        raise FileProblem("directory", "is a directory, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileProblem("symlink", "is a symbolic link") from None
        raise FileProblem("unreadable", f"cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileProblem("directory", "is a directory, not a file")
        if regular_only and not stat.S_ISREG(info.st_mode):  # swapped between lstat and open
            raise FileProblem("not-regular", "is not a regular file")
        if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
            raise FileProblem("too-large", f"is {info.st_size} bytes, over the {max_bytes}-byte limit")
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise FileProblem("too-large", f"grew past the {max_bytes}-byte limit while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise FileProblem("unreadable", f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def load_json_file(path: str | Path, max_bytes: int, *, strict: bool = True, follow_symlinks: bool = True,
                   regular_only: bool = False) -> Any:
    """:func:`read_capped`, then :func:`decode_json`. Every problem is a
    :class:`FileProblem`; an unparsable document has ``kind`` ``invalid``."""
    body = read_capped(path, max_bytes, follow_symlinks=follow_symlinks, regular_only=regular_only)
    try:
        return decode_json(body, strict=strict)
    except ValueError as exc:
        raise FileProblem("invalid", str(exc)) from None


__all__ = ["DECODED_BOUND_TEXT", "FileProblem", "MAX_VALUES", "MAX_WHOLE", "PAUSE_GC_BYTES", "as_int", "count_values",
           "decode_json", "load_json_file", "read_capped"]
