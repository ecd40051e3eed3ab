"""The HTTP transport to a game: one GET on loopback under one deadline, and JSON decoding.

Why not ``urllib.request.urlopen``: its timeout applies to each socket operation, so a
peer that trickles a byte every half second keeps a request alive for ever; it follows
redirects and honours ``http_proxy`` by default. This module uses the standard
library's own HTTP parser (``http.client``) over a socket whose every read is given the
time left until one absolute deadline, so the whole request (connect, headers, body)
ends by that deadline. It never follows redirects, never consults proxy settings, and
reads at most ``max_bytes`` of body.

The opener is a plain callable, injectable everywhere (``GameClient(opener=...)``,
``Bridge(opener=...)``), so tests and users can drive the bridge without a socket.

:func:`loopback_opener` opens a connection per request. :class:`KeepAliveSession` is an
opener for a burst of requests (a command and the polls that confirm it) that reuses
one connection when the game allows it, with the same deadline, cap and errors.
:func:`decode_json` pauses the cyclic garbage collector while it builds a large document.
"""

from __future__ import annotations

import contextlib
import gc
import http.client
import io
import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol

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


class _DeadlineReader(io.RawIOBase):
    """A socket reader that gives each recv only the time left until the deadline.

    ``received`` counts the bytes read (a reused connection that fails before the first
    byte of its answer may be retried). ``exhausted`` makes further reads return EOF,
    so what is left in a buffer can be looked at without waiting for the socket."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self.received = 0
        self.exhausted = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.exhausted:
            return 0
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
        count = self._sock.recv_into(buffer)
        self.received += count
        return count


_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class _AnswerReader(io.BufferedReader):
    """Notes, when http.client closes it after a complete answer, whether bytes beyond the
    answer had already arrived (a connection with stray bytes is never reused)."""

    leftover = True

    def close(self) -> None:
        if not self.closed:
            raw = self.raw
            if isinstance(raw, _DeadlineReader):
                raw.exhausted = True
            try:
                self.leftover = bool(self.peek(1))
            except (OSError, ValueError):
                self.leftover = True
        super().close()


class _SocketShim:
    """What ``http.client.HTTPResponse`` needs of a socket: ``makefile``."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.raw = _DeadlineReader(sock, deadline)
        self.reader = _AnswerReader(self.raw, 65536)

    def makefile(self, *_args: Any, **_kwargs: Any) -> io.BufferedReader:
        return self.reader


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
        self.shim: _SocketShim | None = None
        self.reusable = False

    def run(self, sock: socket.socket, host: str, port: int, path: str, deadline: float,
            timeout: float, max_bytes: int, *, keep_alive: bool) -> HttpResponse:
        try:
            return self._run(sock, host, port, path, deadline, max_bytes, keep_alive)
        except TransportError:
            raise
        except (socket.timeout, TimeoutError):
            raise TransportError("timeout", f"the answer was not complete within {timeout * 1000:.0f}ms") from None
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
            raise TransportError("reset", f"the connection was reset ({type(exc).__name__})") from None
        except http.client.IncompleteRead as exc:
            raise TransportError("malformed", f"the body was shorter than promised ({len(exc.partial)} bytes read)") from None
        except http.client.RemoteDisconnected:
            raise TransportError("reset", "the peer closed the connection without answering") from None
        except (http.client.HTTPException, ValueError) as exc:
            raise TransportError("malformed", f"not a valid HTTP answer ({type(exc).__name__}: {exc})"[:300]) from None
        except OSError as exc:
            raise TransportError("reset", f"socket error: {exc}") from None

    @property
    def answered(self) -> bool:
        """Whether any byte of an answer arrived."""
        return self.shim is not None and self.shim.raw.received > 0

    def _run(self, sock: socket.socket, host: str, port: int, path: str, deadline: float,
             max_bytes: int, keep_alive: bool) -> HttpResponse:
        host_header = f"[{host}]" if ":" in host else host
        request = (f"GET {path} HTTP/1.1\r\nHost: {host_header}:{port}\r\n"
                   "Accept: application/json\r\n" + ("" if keep_alive else "Connection: close\r\n")
                   + "User-Agent: game-bridge-mcp\r\n\r\n").encode("latin-1")
        self.shim = _SocketShim(sock, deadline)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed")
        sock.settimeout(remaining)
        sock.sendall(request)
        response = http.client.HTTPResponse(self.shim, method="GET")  # type: ignore[arg-type]
        response.begin()
        length = response.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > max_bytes:
            raise TransportError("too-large", f"Content-Length {int(length)} is over the {max_bytes}-byte cap")
        body = response.read(max_bytes + 1)
        if len(body) > max_bytes:
            raise TransportError("too-large", f"the body passed the {max_bytes}-byte cap")
        if not response.chunked and response.length:
            # http.client's read(amt) returns a short body at EOF without complaint; the
            # bytes still owed under Content-Length are in ``length``.
            raise TransportError("malformed", f"the body was shorter than promised ({len(body)} of "
                                 f"{len(body) + response.length} bytes before the peer closed)")
        headers = {k.lower(): v for k, v in response.getheaders()}
        # Reused only after a complete answer that said the connection stays open, with
        # nothing after it (http.client closed its reader once the body was read).
        self.reusable = (keep_alive and not response.will_close and self.shim.reader.closed
                         and not self.shim.reader.leftover)
        return HttpResponse(response.status, body, headers)


def loopback_opener(url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> HttpResponse:
    """GET ``url`` with one deadline for the whole request and a cap on the body."""
    host, port, path = _split_url(url)
    deadline = time.monotonic() + timeout
    sock = _connect(host, port, timeout)
    try:
        return _Exchange().run(sock, host, port, path, deadline, timeout, max_bytes, keep_alive=False)
    finally:
        sock.close()


class KeepAliveSession:
    """An opener that carries a burst of requests (one command and the polls that confirm
    it) over one kept-alive connection per address, with the same deadline, cap and
    errors as :func:`loopback_opener`.

    Why: a fresh loopback connection costs about twice the request itself (connect,
    accept, a server thread per connection, close), and confirming a command is a burst
    of tiny requests. The connection is kept only after a complete answer that allows it
    (HTTP/1.1 without ``Connection: close``, nothing after the body), never across a
    pause longer than ``max_idle_s``, and never after the peer closed or sent stray bytes;
    a game that closes after each answer simply gets a fresh connection each time.

    A reused connection that fails before any byte of its answer is retried once on a
    fresh one (a server may close an idle connection at any moment), except for
    ``/command``, which is never sent twice: a failed command surfaces as the error it is.
    One session per thread; :meth:`close` (or ``with``) closes what it holds.
    """

    def __init__(self, *, max_idle_s: float = 1.0) -> None:
        self.max_idle_s = max_idle_s
        self._idle: dict[tuple[str, int], tuple[socket.socket, float]] = {}
        #: Requests that went over a connection already used (for tests and benchmarks).
        self.reused = 0

    def __call__(self, url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> HttpResponse:
        host, port, path = _split_url(url)
        deadline = time.monotonic() + timeout
        sock = self._take(host, port)
        if sock is not None:
            exchange = _Exchange()
            try:
                response = exchange.run(sock, host, port, path, deadline, timeout, max_bytes, keep_alive=True)
            except TransportError as exc:
                sock.close()
                retry = (exc.kind in ("reset", "malformed") and not exchange.answered
                         and not path.startswith("/command"))
                if not retry:
                    raise
            else:
                self.reused += 1
                self._keep(host, port, sock, exchange)
                return response
        sock = _connect(host, port, max(deadline - time.monotonic(), 0.001))
        exchange = _Exchange()
        try:
            response = exchange.run(sock, host, port, path, deadline, timeout, max_bytes, keep_alive=True)
        except BaseException:
            sock.close()
            raise
        self._keep(host, port, sock, exchange)
        return response

    def _take(self, host: str, port: int) -> socket.socket | None:
        held = self._idle.pop((host, port), None)
        if held is None:
            return None
        sock, since = held
        if time.monotonic() - since > self.max_idle_s or _readable(sock):
            sock.close()  # too old to trust, or the peer closed it / sent stray bytes
            return None
        return sock

    def _keep(self, host: str, port: int, sock: socket.socket, exchange: _Exchange) -> None:
        if not exchange.reusable:
            sock.close()
            return
        previous = self._idle.pop((host, port), None)
        if previous is not None:
            previous[0].close()
        self._idle[(host, port)] = (sock, time.monotonic())

    def close(self) -> None:
        held, self._idle = self._idle, {}
        for sock, _since in held.values():
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


#: Bodies at least this large are decoded with the cyclic garbage collector paused.
PAUSE_GC_BYTES = 256 * 1024
_gc_pause_lock = threading.Lock()
_gc_pauses = 0
_gc_paused_by_us = False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while a large JSON document is built.

    Parsing allocates hundreds of thousands of containers; each few hundred trigger a
    collection, and the older generations are rescanned as they grow (a 10 MB /state
    took about 360 ms with the MCP SDK's heap loaded, 150 ms with the collector paused).
    JSON builds no reference cycles, so nothing is lost. Reference-counted across
    threads; a collector that was already disabled (by the host) is left alone."""
    global _gc_pauses, _gc_paused_by_us
    with _gc_pause_lock:
        if _gc_pauses == 0:
            _gc_paused_by_us = gc.isenabled()
            if _gc_paused_by_us:
                gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_pause_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_paused_by_us:
                _gc_paused_by_us = False
                gc.enable()


def decode_json(body: bytes) -> Any:
    """Parse a JSON answer. ``NaN``/``Infinity`` become ``None``; raise ValueError with a
    short reason for invalid or absurdly nested documents."""
    try:
        if len(body) >= PAUSE_GC_BYTES:
            with _gc_paused():
                return json.loads(body, parse_constant=_no_constant)
        return json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("is nested too deeply to parse") from None
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def _no_constant(_name: str) -> None:
    return None


OpenerFactory = Callable[[], Opener]
