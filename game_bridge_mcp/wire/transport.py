"""The HTTP transport to a game: one GET on loopback under one absolute deadline, no redirects,
no proxies, a capped body (docs/reliability.md, "The HTTP client"); connecting, the
kept-alive pool and cancellation, with the exchange itself in :mod:`.http11`.

The opener is a plain callable, injectable everywhere (``GameClient(opener=...)``,
``Bridge(opener=...)``): :func:`loopback_opener` opens a connection per request, and
:class:`KeepAliveSession` reuses one for a burst of requests when the game allows it.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from typing import Protocol

from .. import polling
from .http11 import Exchange, HttpResponse, TransportError

#: Default cap on a response body. A 10 MB /state must pass; an endless body must not.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Cap on a /health answer, which is meant to be tiny.
HEALTH_MAX_BYTES = 64 * 1024


class Opener(Protocol):
    """``opener(url, timeout=seconds, max_bytes=n) -> HttpResponse``; raises TransportError."""

    def __call__(self, url: str, *, timeout: float, max_bytes: int) -> HttpResponse: ...


class PostOpener(Protocol):
    """An opener that can also POST a body (``body=None``: a GET), as both of this module's do."""

    def __call__(self, url: str, *, timeout: float, max_bytes: int, body: bytes | None = None) -> HttpResponse: ...


#: Addresses already parsed from URLs (``host:port`` text to host and port), so a burst of
#: requests to one game parses its address once.
_ADDRESSES: dict[str, tuple[str, int]] = {}


def _split_url(url: str) -> tuple[str, int, str]:
    if not url.startswith("http://"):
        raise TransportError("malformed", f"only http:// URLs are supported, not {url!r}")
    slash = url.find("/", 7)
    hostport, path = (url[7:slash], url[slash:]) if slash >= 0 else (url[7:], "/")
    address = _ADDRESSES.get(hostport)
    if address is None:
        host, _, port_text = hostport.rpartition(":")
        if not host or not port_text.isdigit():
            raise TransportError("malformed", f"URL {url!r} has no host:port")
        if not 1 <= int(port_text) <= 65535:
            # getaddrinfo would silently wrap 70000 to 4464: refuse instead of asking the wrong port.
            raise TransportError("malformed", f"URL {url!r} has a port outside 1-65535")
        address = (host.strip("[]"), int(port_text))
        if len(_ADDRESSES) < 1024:
            _ADDRESSES[hostport] = address
    return address[0], address[1], path


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


def _abort(sock: socket.socket) -> None:
    """End a request in flight from another thread (its call was cancelled): the
    blocked read returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _exchange(exchange: Exchange, sock: socket.socket, host: str, port: int, path: str, deadline: float,
              timeout: float, max_bytes: int, *, keep_alive: bool, body: bytes | None = None) -> HttpResponse:
    """One exchange that a cancellation of its call ends at once (see ``polling.py``):
    the socket is shut down and the request raises ``Cancelled``, not a transport error
    that would read as the game's fault."""
    with polling.on_cancel(lambda: _abort(sock)):
        try:
            return exchange.run(sock, host, port, path, deadline, timeout, max_bytes, keep_alive=keep_alive, body=body)
        except TransportError:
            polling.check_cancelled()
            raise


def loopback_opener(url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES,
                    body: bytes | None = None) -> HttpResponse:
    """GET ``url`` (POST ``body`` to it) with one deadline for the whole request and a cap on the answer."""
    host, port, path = _split_url(url)
    deadline = time.monotonic() + timeout
    polling.check_cancelled()
    sock = _connect(host, port, timeout)
    try:
        return _exchange(Exchange(), sock, host, port, path, deadline, timeout, max_bytes, keep_alive=False, body=body)
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
    ``/command`` and a POST, never sent twice: a failed command surfaces as the error it is.
    :meth:`close` (or ``with``) closes the idle connections.
    """

    def __init__(self, *, max_idle_s: float = 1.0, max_idle: int = 4) -> None:
        self.max_idle_s = max_idle_s
        self.max_idle = max(1, int(max_idle))
        self._idle: dict[tuple[str, int], list[tuple[socket.socket, float]]] = {}
        self._lock = threading.Lock()
        #: Requests that went over a connection already used (for tests and benchmarks).
        self.reused = 0

    def __call__(self, url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES,
                 body: bytes | None = None) -> HttpResponse:
        host, port, path = _split_url(url)
        deadline = time.monotonic() + timeout
        polling.check_cancelled()
        sock = self._take(host, port)
        if sock is not None:
            exchange = Exchange()
            try:
                response = _exchange(exchange, sock, host, port, path, deadline, timeout, max_bytes, keep_alive=True,
                                     body=body)
            except BaseException as exc:
                sock.close()
                if not isinstance(exc, TransportError):
                    raise
                retry = (exc.kind in ("reset", "malformed") and not exchange.answered
                         and not path.startswith("/command") and body is None)
                if not retry:
                    raise
            else:
                self._keep(host, port, sock, exchange, reused=True)
                return response
        sock = _connect(host, port, max(deadline - time.monotonic(), 0.001))
        exchange = Exchange()
        try:
            response = _exchange(exchange, sock, host, port, path, deadline, timeout, max_bytes, keep_alive=True,
                                 body=body)
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

    def holds(self, host: str, port: int) -> bool:
        """Whether an idle connection to ``host:port`` is kept that the next request would
        reuse: young enough, and not closed by the peer. A kept connection is proof that the
        process that answered on it is still the one listening (a process that ended closed
        its connections; a new one on the port has none of this session's)."""
        now = time.monotonic()
        with self._lock:  # (a poll of each, no wait: _take cannot close one meanwhile)
            return any(now - since <= self.max_idle_s and not _readable(sock)
                       for sock, since in self._idle.get((host, port), ()))

    def _keep(self, host: str, port: int, sock: socket.socket, exchange: Exchange, *, reused: bool = False) -> None:
        if not exchange.reusable:
            sock.close()
            if reused:
                with self._lock:
                    self.reused += 1
            return
        with self._lock:
            self.reused += reused
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


__all__ = ["DEFAULT_MAX_BYTES", "HEALTH_MAX_BYTES", "HttpResponse", "KeepAliveSession", "Opener",
           "TransportError", "loopback_opener"]
