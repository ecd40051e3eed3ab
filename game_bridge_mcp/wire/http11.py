"""HTTP/1.1 on one connected socket: :class:`Exchange` sends one GET (or a POST with a
body) and reads its answer (``http.client``'s limits, every read bounded by one deadline, at most ``max_bytes`` of
body), and says whether the connection may carry another request."""

from __future__ import annotations

import math
import re
import select
import socket
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple


class HttpResponse(NamedTuple):
    """What an opener returns: the status, the body and the headers that matter. (A named
    tuple: one is made for every request, and a frozen dataclass costs several times more
    to make.)"""

    status: int
    body: bytes
    headers: Mapping[str, str] = MappingProxyType({})


class TransportError(Exception):
    """A request that did not produce a usable HTTP answer.

    ``kind`` is one of ``refused`` (nothing listening), ``timeout`` (the deadline
    passed), ``reset`` (the peer went away mid-request), ``too-large`` (the body passed
    the cap) and ``malformed`` (not HTTP, broken headers, a body shorter than promised).
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)
_READABLE = select.POLLIN | select.POLLERR | select.POLLHUP
#: Longest status or header line, and most headers, accepted (http.client's limits).
MAX_LINE = 65536
MAX_HEADERS = 100
#: What one read asks for: a bytes object of this size is allocated (and shrunk) per
#: read, so above the allocator's mmap threshold (128 KiB) every read would map, fault in
#: and unmap fresh pages (about 0.1 ms a request). A large body is read straight into one
#: buffer instead (``exactly``).
_RECV_SIZE = 64 * 1024


class _Malformed(Exception):
    """Not HTTP: becomes ``TransportError("malformed", "not a valid HTTP answer (...)")``."""


class _NoAnswer(Exception):
    """The peer closed the connection before a byte of answer: a ``reset``."""


class _AnswerReader:
    """Reads one HTTP answer from a socket, every recv given only the time left until the
    deadline. Its own buffer says exactly what arrived beyond the answer.

    Why not ``http.client``: its header parsing runs the ``email`` package's parser on
    every answer, a large share of the bridge's CPU per confirmed call once many
    instances are driven at once. The answers that matter here are small and simple,
    and this reader keeps http.client's limits (64 KiB lines, 100 headers)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._poller: select.poll | None = None
        self.buffer = bytearray()
        self.received = 0

    def _wait(self, events: int = _READABLE) -> None:
        """Until the socket is ready (readable, or with ``events``), or the deadline passes.
        The socket itself never blocks (``Exchange`` makes it non-blocking once), so a read
        is one ``poll`` and one ``recv``, with no timeout set on the socket per read."""
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed")
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            poller.register(self._sock, events)
        elif events != _READABLE:
            poller.modify(self._sock, events)
        if not poller.poll(math.ceil(remaining * 1000)):
            raise socket.timeout("deadline passed")
        if events != _READABLE:
            poller.modify(self._sock, _READABLE)

    def send(self, data: bytes) -> None:
        """All of ``data`` before the deadline (a request fits the empty send buffer of an
        idle connection: one ``send``). Nothing is sent once the deadline has passed: a
        command sent then would be applied by the game and reported as timed out."""
        if self._deadline <= time.monotonic():
            raise socket.timeout("deadline passed")
        view = memoryview(data)
        while view:
            try:
                view = view[self._sock.send(view):]
            except BlockingIOError:
                self._wait(select.POLLOUT)

    def _quick_ack(self) -> None:
        """An answer that comes in pieces: ACK what came at once. (A game that writes its
        head and body in two sends, with Nagle on, holds the body until the head is ACKed,
        and Linux delays the ACK on a kept-alive connection by up to 40 ms.)"""
        if _QUICKACK is not None:
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass

    def _recv(self, size: int) -> bytes:
        if self.received:
            self._quick_ack()
        while True:
            self._wait()
            try:
                return self._sock.recv(size)
            except BlockingIOError:  # woken without data after all
                continue

    def _fill(self) -> bool:
        """Read what has arrived into the buffer; False at EOF."""
        chunk = self._recv(_RECV_SIZE)
        if not chunk:
            return False
        self.received += len(chunk)
        self.buffer += chunk
        return True

    def head_block(self) -> bytes:
        """The status line and headers, up to and including the blank line that ends them
        (lines end with CRLF or a bare LF), read in as few ``recv`` calls as the answer
        came in; what arrived so far if the peer closes first (b"" when nothing did)."""
        scanned = 0
        buffer = self.buffer
        if not buffer and not self._fill():  # nothing read yet: nothing to look through
            return b""
        while True:
            start = scanned - 2 if scanned > 2 else 0
            crlf = buffer.find(b"\n\r\n", start)
            bare = buffer.find(b"\n\n", start, crlf + 2 if crlf >= 0 else len(buffer))
            if bare >= 0 or crlf >= 0:
                cut = bare + 2 if bare >= 0 else crlf + 3  # a bare LF's end can only come first
                block = bytes(buffer[:cut])
                del buffer[:cut]
                return block
            if len(buffer) - (buffer.rfind(b"\n") + 1) > MAX_LINE:
                raise _Malformed(f"a line of over {MAX_LINE} bytes")
            if buffer.count(b"\n") > MAX_HEADERS + 1:
                raise _Malformed(f"got more than {MAX_HEADERS} headers")
            scanned = len(buffer)
            if not self._fill():
                block = bytes(buffer)
                buffer.clear()
                return block

    def line(self) -> bytes:
        """One line with its ending (a chunked body's size lines); b"" at EOF (a partial
        last line is returned as is)."""
        scanned = 0
        while True:
            newline = self.buffer.find(b"\n", scanned)
            if newline >= 0:
                if newline > MAX_LINE:
                    raise _Malformed(f"a line of over {MAX_LINE} bytes")
                line = bytes(self.buffer[:newline + 1])
                del self.buffer[:newline + 1]
                return line
            if len(self.buffer) > MAX_LINE:
                raise _Malformed(f"a line of over {MAX_LINE} bytes")
            scanned = len(self.buffer)
            if not self._fill():
                line = bytes(self.buffer)
                self.buffer.clear()
                return line

    def exactly(self, size: int) -> bytes:
        """``size`` bytes, straight into one buffer; malformed if the peer closes first."""
        buffer = self.buffer
        if len(buffer) >= size:  # the usual small answer: it came with its head
            body = bytes(buffer[:size])
            del buffer[:size]
            return body
        out = bytearray(size)
        view = memoryview(out)
        have = min(size, len(self.buffer))
        view[:have] = self.buffer[:have]
        del self.buffer[:have]
        while have < size:
            self._quick_ack()
            count = self._recv_into(view[have:])
            if not count:
                raise TransportError("malformed", f"the body was shorter than promised ({have} of {size} "
                                     "bytes before the peer closed)")
            self.received += count
            have += count
        return bytes(out)

    def _recv_into(self, view: memoryview) -> int:
        while True:
            self._wait()
            try:
                return self._sock.recv_into(view)
            except BlockingIOError:
                continue

    def until_close(self, max_bytes: int) -> bytes:
        while len(self.buffer) <= max_bytes:
            if not self._fill():
                body = bytes(self.buffer)
                self.buffer.clear()
                return body
        raise TransportError("too-large", f"the body passed the {max_bytes}-byte cap")

    def chunked(self, max_bytes: int) -> bytes:
        body = bytearray()
        while True:
            size_line = self.line()
            if not size_line:
                raise TransportError("malformed", f"the body was shorter than promised ({len(body)} bytes read)")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Malformed(f"a chunk size of {size_line[:40]!r}") from None
            if size < 0:
                raise _Malformed(f"a chunk size of {size_line[:40]!r}")
            if size == 0:
                break
            if len(body) + size > max_bytes:
                raise TransportError("too-large", f"the body passed the {max_bytes}-byte cap")
            body += self.exactly(size)
            if self.line() not in (b"\r\n", b"\n"):
                raise _Malformed("a chunk that does not end where its size says")
        while self.line() not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return bytes(body)


class _Head:
    """A status line and headers (names lower-cased; a repeated name keeps its last value)."""

    def __init__(self, version: str, status: int, headers: dict[str, str]) -> None:
        self.version = version
        self.status = status
        self.headers = headers


def _read_head(reader: _AnswerReader) -> _Head:
    """The final answer's status and headers (interim 1xx answers are skipped)."""
    while True:
        block = reader.head_block()
        if not block:
            if reader.received == 0:
                raise _NoAnswer()
            raise _Malformed("it ended before a status line")
        text = block.decode("latin-1")
        if not (text.endswith("\n\n") or text.endswith("\n\r\n")):  # the peer closed inside it
            raise _Malformed("it ended inside the headers" if "\n" in text else "it ended before a status line")
        first = text.find("\n")
        status_line = text[:first].rstrip("\r")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not (len(parts[1]) == 3 and parts[1].isdigit()):
            raise _Malformed(f"status line {status_line[:60].encode('latin-1')!r}")
        if text.count("\n") - 2 > MAX_HEADERS:  # the status line's newline and the blank line's are not headers
            raise _Malformed(f"got more than {MAX_HEADERS} headers")
        if len(text) > MAX_LINE and max(map(len, text.split("\n"))) > MAX_LINE:
            raise _Malformed(f"a line of over {MAX_LINE} bytes")
        version, status = parts[0], int(parts[1])
        if "\n " in text or "\n\t" in text:
            headers = _folded_headers(text.split("\n")[1:-2])
        elif text.count("\n") == text.count("\r\n"):  # the usual head: CRLF throughout
            headers = {}
            for line in text[first + 1:-4].split("\r\n"):
                name, colon, value = line.partition(":")
                key = name.strip().lower()
                if colon and key:
                    headers[key] = value.strip(" \t")
        else:  # bare LFs: every header in one pass of one expression
            headers = {key: value for name, value in _HEADER.findall(text, first)
                       if (key := name.strip().lower())}
        if not 100 <= status < 200:
            return _Head(version, status, headers)


#: One header line: its name and its value without surrounding blanks (``re.M``).
_HEADER = re.compile(r"^([^:\r\n]*):[ \t]*(.*?)[ \t]*\r?$", re.M)


def _folded_headers(lines: list[str]) -> dict[str, str]:
    """Headers when some are folded onto continuation lines (obsolete, but accepted)."""
    headers: dict[str, str] = {}
    last: str | None = None
    for raw in lines:
        line = raw.rstrip("\r")
        if line[:1] in (" ", "\t") and last is not None:
            headers[last] += " " + line.strip()
            continue
        name, colon, value = line.partition(":")
        if colon and name.strip():
            last = name.strip().lower()
            headers[last] = value.strip()
    return headers


class Exchange:
    """One request and its answer on a connected socket; ``reusable`` says whether the
    connection may carry another request afterwards."""

    def __init__(self) -> None:
        self.reader: _AnswerReader | None = None
        self.reusable = False

    def run(self, sock: socket.socket, host: str, port: int, path: str, deadline: float,
            timeout: float, max_bytes: int, *, keep_alive: bool, body: bytes | None = None) -> HttpResponse:
        try:
            return self._run(sock, host, port, path, deadline, max_bytes, keep_alive, body)
        except TransportError:
            raise
        except _Malformed as exc:
            raise TransportError("malformed", f"not a valid HTTP answer ({exc})"[:300]) from None
        except (socket.timeout, TimeoutError):
            raise TransportError("timeout", f"the answer was not complete within {timeout * 1000:.0f}ms") from None
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
            raise TransportError("reset", f"the connection was reset ({type(exc).__name__})") from None
        except _NoAnswer:
            raise TransportError("reset", "the peer closed the connection without answering") from None
        except (UnicodeError, ValueError) as exc:
            raise TransportError("malformed", f"not a valid HTTP answer ({type(exc).__name__}: {exc})"[:300]) from None
        except OSError as exc:
            raise TransportError("reset", f"socket error: {exc}") from None

    @property
    def answered(self) -> bool:
        """Whether any byte of an answer arrived."""
        return self.reader is not None and self.reader.received > 0

    def _run(self, sock: socket.socket, host: str, port: int, path: str, deadline: float,
             max_bytes: int, keep_alive: bool, body: bytes | None = None) -> HttpResponse:
        host_header = f"[{host}]" if ":" in host else host
        if body is None:
            request = (f"GET {path} HTTP/1.1\r\nHost: {host_header}:{port}\r\n"
                       "Accept: application/json\r\n" + ("" if keep_alive else "Connection: close\r\n")
                       + "User-Agent: game-bridge-mcp\r\n\r\n").encode("latin-1")
        else:  # a POST (snapshot bytes): the head and the body in one send
            request = (f"POST {path} HTTP/1.1\r\nHost: {host_header}:{port}\r\n"
                       "Accept: application/json\r\nContent-Type: application/octet-stream\r\n"
                       f"Content-Length: {len(body)}\r\n" + ("" if keep_alive else "Connection: close\r\n")
                       + "User-Agent: game-bridge-mcp\r\n\r\n").encode("latin-1") + body
        if sock.gettimeout() != 0.0:
            sock.settimeout(0.0)  # once a connection: the reader waits with poll, to the deadline
        reader = self.reader = _AnswerReader(sock, deadline)
        reader.send(request)
        head = _read_head(reader)
        headers = head.headers
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length_text = headers.get("content-length", "").strip()
        length = int(length_text) if length_text.isdigit() and not chunked else None
        if head.status in (204, 304):
            length = 0
        if length is not None and length > max_bytes:
            raise TransportError("too-large", f"Content-Length {length} is over the {max_bytes}-byte cap")
        if chunked:
            body = reader.chunked(max_bytes)
        elif length is not None:
            body = reader.exactly(length)
        else:
            body = reader.until_close(max_bytes)
        connection = headers.get("connection")
        tokens = {t.strip() for t in connection.lower().split(",")} if connection else set()
        if head.version == "HTTP/1.0":
            will_close = "keep-alive" not in tokens
        else:
            will_close = "close" in tokens
        # Reused only after a complete answer that said the connection stays open, with a
        # known end and nothing after it.
        self.reusable = (keep_alive and not will_close and (chunked or length is not None)
                         and not reader.buffer)
        return HttpResponse(head.status, body, headers)


__all__ = ["Exchange", "HttpResponse", "MAX_HEADERS", "MAX_LINE", "TransportError"]
