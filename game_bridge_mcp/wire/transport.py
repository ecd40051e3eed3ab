"""The HTTP transport to a game: one GET on loopback under one deadline.

Why not ``urllib.request.urlopen``: its timeout applies to each socket operation, so a
peer that trickles a byte every half second keeps a request alive for ever; it follows
redirects and honours ``http_proxy`` by default. This module reads the answer itself
(status line, headers, a Content-Length, chunked or read-to-close body, with
``http.client``'s limits of 64 KiB a line and 100 headers) from a socket whose every
read is given the time left until one absolute deadline, so the whole request (connect,
headers, body) ends by that deadline. It never follows redirects, never consults proxy
settings, and reads at most ``max_bytes`` of body. (``http.client`` itself parses
headers with the ``email`` package: a third of the bridge's CPU per call.)

The opener is a plain callable, injectable everywhere (``GameClient(opener=...)``,
``Bridge(opener=...)``), so tests and users can drive the bridge without a socket.

:func:`loopback_opener` opens a connection per request. :class:`KeepAliveSession` is an
opener for a burst of requests (a command and the polls that confirm it) that reuses
one connection when the game allows it, with the same deadline, cap and errors.
"""

from __future__ import annotations

import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Protocol

from .. import polling

#: Default cap on a response body. A 10 MB /state must pass; an endless body must not.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Cap on a /health answer, which is meant to be tiny.
HEALTH_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class HttpResponse:
    """What an opener returns: the status, the body and the headers that matter."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


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


class Opener(Protocol):
    """``opener(url, timeout=seconds, max_bytes=n) -> HttpResponse``; raises TransportError."""

    def __call__(self, url: str, *, timeout: float, max_bytes: int) -> HttpResponse: ...


_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)
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
    every answer (about 17 us, a third of the bridge's CPU per confirmed call once many
    instances are driven at once). The answers that matter here are small and simple,
    and this reader keeps http.client's limits (64 KiB lines, 100 headers)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self.buffer = bytearray()
        self.received = 0

    def _time_left(self) -> float:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed")
        self._sock.settimeout(remaining)
        if _QUICKACK is not None:
            # On a kept-alive connection Linux delays ACKs (up to 40 ms); a game that writes
            # its headers and body in two sends would wait for that ACK (Nagle) each time.
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass
        return remaining

    def _fill(self) -> bool:
        """Read what has arrived into the buffer; False at EOF."""
        self._time_left()
        chunk = self._sock.recv(_RECV_SIZE)
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
        while True:
            start = max(0, scanned - 2)
            crlf = buffer.find(b"\n\r\n", start)
            bare = buffer.find(b"\n\n", start)
            if crlf >= 0 or bare >= 0:
                cut = min(i for i in (crlf + 3 if crlf >= 0 else -1, bare + 2 if bare >= 0 else -1) if i >= 0)
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
        out = bytearray(size)
        view = memoryview(out)
        have = min(size, len(self.buffer))
        view[:have] = self.buffer[:have]
        del self.buffer[:have]
        while have < size:
            self._time_left()
            count = self._sock.recv_into(view[have:])
            if not count:
                raise TransportError("malformed", f"the body was shorter than promised ({have} of {size} "
                                     "bytes before the peer closed)")
            self.received += count
            have += count
        return bytes(out)

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
        lines = text.split("\n")[:-2]  # the blank line and what follows its newline
        status_line = lines[0].rstrip("\r")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not (len(parts[1]) == 3 and parts[1].isdigit()):
            raise _Malformed(f"status line {status_line[:60].encode('latin-1')!r}")
        if len(lines) - 1 > MAX_HEADERS:
            raise _Malformed(f"got more than {MAX_HEADERS} headers")
        if max(map(len, lines)) > MAX_LINE:
            raise _Malformed(f"a line of over {MAX_LINE} bytes")
        version, status = parts[0], int(parts[1])
        if "\n " in text or "\n\t" in text:
            headers = _folded_headers(lines[1:])
        else:  # the usual head: every header in one pass of one expression
            headers = {name.strip().lower(): value for name, value in _HEADER.findall(text, len(lines[0]))
                       if name.strip()}
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


def _split_url(url: str) -> tuple[str, int, str]:
    if not url.startswith("http://"):
        raise TransportError("malformed", f"only http:// URLs are supported, not {url!r}")
    rest = url[len("http://"):]
    hostport, _, path = rest.partition("/")
    host, _, port_text = hostport.rpartition(":")
    if not host or not port_text.isdigit():
        raise TransportError("malformed", f"URL {url!r} has no host:port")
    if not 1 <= int(port_text) <= 65535:
        # getaddrinfo would silently wrap 70000 to 4464: refuse instead of asking the wrong port.
        raise TransportError("malformed", f"URL {url!r} has a port outside 1-65535")
    return host.strip("[]"), int(port_text), "/" + path


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    try:
        sock = socket.create_connection((host, port), timeout=max(timeout, 0.001))
    except ConnectionRefusedError as exc:
        raise TransportError("refused", f"connection refused ({exc.strerror or exc})") from None
    except (socket.timeout, TimeoutError):
        raise TransportError("timeout", f"no connection within {timeout * 1000:.0f}ms") from None
    except OSError as exc:
        raise TransportError("refused", f"cannot connect: {exc}") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass
    return sock


class _Exchange:
    """One request and its answer on a connected socket; ``reusable`` says whether the
    connection may carry another request afterwards."""

    def __init__(self) -> None:
        self.reader: _AnswerReader | None = None
        self.reusable = False

    def run(self, sock: socket.socket, host: str, port: int, path: str, deadline: float,
            timeout: float, max_bytes: int, *, keep_alive: bool) -> HttpResponse:
        try:
            return self._run(sock, host, port, path, deadline, max_bytes, keep_alive)
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
             max_bytes: int, keep_alive: bool) -> HttpResponse:
        host_header = f"[{host}]" if ":" in host else host
        request = (f"GET {path} HTTP/1.1\r\nHost: {host_header}:{port}\r\n"
                   "Accept: application/json\r\n" + ("" if keep_alive else "Connection: close\r\n")
                   + "User-Agent: game-bridge-mcp\r\n\r\n").encode("latin-1")
        reader = self.reader = _AnswerReader(sock, deadline)
        reader._time_left()
        sock.sendall(request)
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
        tokens = {t.strip() for t in headers.get("connection", "").lower().split(",")}
        if head.version == "HTTP/1.0":
            will_close = "keep-alive" not in tokens
        else:
            will_close = "close" in tokens
        # Reused only after a complete answer that said the connection stays open, with a
        # known end and nothing after it.
        self.reusable = (keep_alive and not will_close and (chunked or length is not None)
                         and not reader.buffer)
        return HttpResponse(head.status, body, headers)


def _abort(sock: socket.socket) -> None:
    """End a request in flight from another thread (its call was cancelled): the
    blocked read returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _exchange(exchange: "_Exchange", sock: socket.socket, host: str, port: int, path: str, deadline: float,
              timeout: float, max_bytes: int, *, keep_alive: bool) -> HttpResponse:
    """One exchange that a cancellation of its call ends at once (see ``polling.py``):
    the socket is shut down and the request raises ``Cancelled``, not a transport error
    that would read as the game's fault."""
    with polling.on_cancel(lambda: _abort(sock)):
        try:
            return exchange.run(sock, host, port, path, deadline, timeout, max_bytes, keep_alive=keep_alive)
        except TransportError:
            polling.check_cancelled()
            raise


def loopback_opener(url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> HttpResponse:
    """GET ``url`` with one deadline for the whole request and a cap on the body."""
    host, port, path = _split_url(url)
    deadline = time.monotonic() + timeout
    polling.check_cancelled()
    sock = _connect(host, port, timeout)
    try:
        return _exchange(_Exchange(), sock, host, port, path, deadline, timeout, max_bytes, keep_alive=False)
    finally:
        sock.close()


class KeepAliveSession:
    """An opener that reuses kept-alive connections, per address, with the same deadline,
    cap and errors as :func:`loopback_opener`. Thread-safe: each request has a connection
    to itself (an idle one, or a fresh one), returned to the session after its answer.

    Why: a fresh loopback connection costs about as much again as the request itself
    (connect, accept, often a server thread per connection, close), and a confirmed
    command is a burst of tiny requests, one call after another. A connection is kept
    only after a complete answer that allows it (HTTP/1.1 without ``Connection: close``,
    nothing after the body), never across a pause longer than ``max_idle_s``, and never
    after the peer closed or sent stray bytes; a game that closes after each answer simply
    gets a fresh connection each time. At most ``max_idle`` idle connections per address
    are kept (the oldest is closed).

    A reused connection that fails before any byte of its answer is retried once on a
    fresh one (a server may close an idle connection at any moment), except for
    ``/command``, which is never sent twice: a failed command surfaces as the error it is.
    :meth:`close` (or ``with``) closes the idle connections.
    """

    def __init__(self, *, max_idle_s: float = 1.0, max_idle: int = 4) -> None:
        self.max_idle_s = max_idle_s
        self.max_idle = max(1, int(max_idle))
        self._idle: dict[tuple[str, int], list[tuple[socket.socket, float]]] = {}
        self._lock = threading.Lock()
        #: Requests that went over a connection already used (for tests and benchmarks).
        self.reused = 0

    def __call__(self, url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> HttpResponse:
        host, port, path = _split_url(url)
        deadline = time.monotonic() + timeout
        polling.check_cancelled()
        sock = self._take(host, port)
        if sock is not None:
            exchange = _Exchange()
            try:
                response = _exchange(exchange, sock, host, port, path, deadline, timeout, max_bytes, keep_alive=True)
            except BaseException as exc:
                sock.close()
                if not isinstance(exc, TransportError):
                    raise
                retry = (exc.kind in ("reset", "malformed") and not exchange.answered
                         and not path.startswith("/command"))
                if not retry:
                    raise
            else:
                with self._lock:
                    self.reused += 1
                self._keep(host, port, sock, exchange)
                return response
        sock = _connect(host, port, max(deadline - time.monotonic(), 0.001))
        exchange = _Exchange()
        try:
            response = _exchange(exchange, sock, host, port, path, deadline, timeout, max_bytes, keep_alive=True)
        except BaseException:
            sock.close()
            raise
        self._keep(host, port, sock, exchange)
        return response

    def _take(self, host: str, port: int) -> socket.socket | None:
        while True:
            with self._lock:
                held = self._idle.get((host, port))
                if not held:
                    return None
                sock, since = held.pop()  # the most recently used: the least likely to be stale
            if time.monotonic() - since > self.max_idle_s or _readable(sock):
                sock.close()  # too old to trust, or the peer closed it / sent stray bytes
                continue
            return sock

    def _keep(self, host: str, port: int, sock: socket.socket, exchange: _Exchange) -> None:
        if not exchange.reusable:
            sock.close()
            return
        with self._lock:
            held = self._idle.setdefault((host, port), [])
            held.append((sock, time.monotonic()))
            extra = held[:-self.max_idle]
            del held[:-self.max_idle]
        for old, _since in extra:
            old.close()

    def close(self) -> None:
        with self._lock:
            held, self._idle = self._idle, {}
        for entries in held.values():
            for sock, _since in entries:
                try:
                    sock.close()
                except OSError:
                    pass

    def __enter__(self) -> "KeepAliveSession":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _readable(sock: socket.socket) -> bool:
    """An idle connection with something to read has been closed by the peer (EOF) or
    holds bytes nobody asked for: either way it is not reused."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


