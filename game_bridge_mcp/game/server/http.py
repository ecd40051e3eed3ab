"""The kit's HTTP server: loopback only, browsers refused, strict framing, bounded, one send
per answer (docs/design.md, "The kit's HTTP server").

It knows only "a GET for a path and a query answers a status and a body": JSON bytes as a
``(status, body)`` pair, or an :class:`Answer` for another content type or extra headers;
and, where a :class:`PostRoute` takes one, a POST with a body of a bounded length.
"""

from __future__ import annotations

import functools
import io
import ipaddress
import json
import logging
import socket
import socketserver
import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Union, cast

from .connections import Connection, ConnectionTable

log = logging.getLogger(__name__)

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Answer:
    """A route's answer when it is not plain JSON: its own content type and headers."""

    status: int
    body: bytes
    content_type: str = JSON_TYPE
    headers: tuple[tuple[str, str], ...] = ()


#: What a route answers: ``(status, json_bytes)`` or an :class:`Answer`.
RouteAnswer = Union["tuple[int, bytes]", Answer]
#: ``route(path, query) -> RouteAnswer``.
Route = Callable[[str, str], RouteAnswer]


class PostRoute(Protocol):
    """The paths a POST is taken at (``snapshot``'s bytes): ``limit(path)`` the largest body
    taken there (None: no POST there), ``post(path, query, body)`` the answer."""

    def limit(self, path: str) -> int | None: ...

    def post(self, path: str, query: str, body: bytes) -> RouteAnswer: ...


#: A POST's body arrives within this, plus a second per 64 MiB.
BODY_TIMEOUT_S = 10.0
#: How long an idle keep-alive connection is kept open.
IDLE_TIMEOUT_S = 60.0
#: Open connections (each a thread) at most; see :mod:`.connections` for who gives way.
MAX_CONNECTIONS = 64
#: A request's line and headers arrive within this (from the accept, or the first byte
#: of a kept-alive connection's next request).
HEAD_TIMEOUT_S = 10.0
#: An answer is taken by the peer within this.
WRITE_TIMEOUT_S = 10.0


#: One encoder for every answer (``json.dumps`` with options makes a new one each call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def json_bytes(doc: Any) -> bytes:
    """Small strict JSON answers (the kit's own documents)."""
    return _ENCODER.encode(doc).encode("utf-8")


@functools.lru_cache(maxsize=64)  # a connection sends the same Host with every request
def is_loopback_host_header(value: str, port: int) -> bool:
    """``Host`` names a loopback address or ``localhost``, with ``port`` (80 when absent).

    Accepts ``localhost``, ``127.x.y.z`` written as a dotted quad, and ``[::1]``.
    Refuses every other name, and numeric forms such as ``2130706433`` or ``0x7f.1``.
    """
    text = value.strip().lower()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return False
        port_text = rest[1:] if rest else ""
    else:
        host, _, port_text = text.partition(":")
    if port_text:
        if not port_text.isdigit() or int(port_text) != port:
            return False
    elif port != 80:
        return False
    if host == "localhost":
        return True
    bracketed = text.startswith("[")
    if not bracketed and host.count(".") != 3:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback and (address.version == 6) == bracketed


def refusal_reason(headers: Any, port: int) -> str | None:
    """Why a request must be refused before it is routed, or None."""
    if headers.get("Origin") is not None:
        return ("requests that carry an Origin header are refused: this is a debug surface "
                "for local tools, not for web pages")
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site.strip().lower() not in ("none", "same-origin"):
        return f"a request a browser made for another site (Sec-Fetch-Site: {site[:40]}) is refused"
    hosts = headers.get_all("Host") or []
    if len(hosts) > 1:
        return "a request with more than one Host header is refused"
    if hosts and not is_loopback_host_header(hosts[0], port):
        return (f"Host {hosts[0][:80]!r} is not a loopback name or address with port {port} "
                "(use 127.0.0.1, localhost or [::1])")
    return None


#: Longest request or header line, and most headers, accepted (the stdlib's limits), and
#: the most bytes of request line and headers together, per request.
MAX_LINE = 65536
MAX_HEADERS = 100
MAX_HEAD = 65536
#: The versions served, and the characters of a header name (RFC 9110's token).
VERSIONS = ("HTTP/1.1", "HTTP/1.0")
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@functools.lru_cache(maxsize=256)  # clients send the same few names with every request
def _is_token(name: str) -> bool:
    return bool(name) and _TOKEN.issuperset(name.encode("latin-1"))
REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 411: "Length Required", 413: "Content Too Large", 414: "URI Too Long", 431: "Request Header Fields Too Large",
           500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}


class _Headers:
    """A request's headers: case-insensitive ``get`` and ``get_all``."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[str, list[str]] = {}

    def add(self, name: str, value: str) -> None:
        self._values.setdefault(name.lower(), []).append(value)

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._values.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> list[str]:
        return list(self._values.get(name.lower(), ()))

    def values(self, name: str) -> "list[str] | tuple[()]":
        """``name``'s values without a copy (not to be changed)."""
        return self._values.get(name.lower(), ())

    def continue_last(self, name: str, text: str) -> None:
        """Append an obsolete folded continuation line to ``name``'s last value."""
        values = self._values[name]
        values[-1] = values[-1] + " " + text


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(socketserver.StreamRequestHandler):
    """One connection: its requests, one after another, until it closes or idles out."""

    timeout = IDLE_TIMEOUT_S  # each socket operation's; the table's deadlines are shorter
    disable_nagle_algorithm = True
    server: "KitHttpServer"  # pyright: ignore[reportIncompatibleVariableOverride]  # the server it is made for
    conn: Connection | None = None

    def handle(self) -> None:
        self.conn = self.server.connections.get(self.request)
        if self.conn is None:  # given way to a newer one before its thread started
            return
        self._peek = cast(io.BufferedReader, self.rfile).peek  # makefile('rb') is buffered
        try:
            while self._one_request():
                pass
        except (OSError, ValueError):  # reset, timed out, shut down by a deadline or the stop
            pass

    def _one_request(self) -> bool:
        """Read, route and answer one request; False when the connection is done."""
        conn = self.conn
        assert conn is not None
        table = self.server.connections
        table.waiting(conn)
        if not self._peek(1):
            return False
        table.reading(conn)
        try:
            budget = MAX_HEAD
            line = self.rfile.readline(MAX_LINE + 1)
            if line in (b"\r\n", b"\n"):  # a stray blank line between requests (RFC 9112 allows it)
                line = self.rfile.readline(MAX_LINE + 1)
            if not line:
                return False
            if len(line) > MAX_LINE:
                raise _BadRequest(414, "the request line is too long")
            method, target, version = self._request_line(line)
            headers = self._headers(budget - len(line))
            close = self._framing(version, headers)
        except _BadRequest as exc:
            if table.routing(conn):
                self.respond(exc.status, json_bytes({"ok": False, "error": str(exc)}), close=True)
            return False
        if not table.routing(conn):
            return False
        if method == "POST":
            return self._post(target, headers)
        if method != "GET":
            self.respond(405, json_bytes({"ok": False, "error": f"method {method[:20]} is not supported; "
                                                               "every endpoint is a GET (and POST /snapshot)"}),
                         close=True)
            return False
        return self._get(target, headers, close)

    def _post(self, target: str, headers: _Headers) -> bool:
        """A POST (``snapshot``'s bytes): refused like a GET from a browser, 405 where no POST
        is taken, 411 without a length, 413 over the limit before a byte of the body is read;
        then the body, under its own deadline. The connection closes after the answer."""
        refusal = refusal_reason(headers, self.server.server_address[1])
        if refusal is not None:
            self.respond(403, json_bytes({"ok": False, "accepted": False, "error": refusal}), close=True)
            return False
        path, _, query = target.partition("?")
        posts = self.server.posts
        limit = posts.limit(path) if posts is not None else None
        if limit is None:
            self.respond(405, json_bytes({"ok": False, "error": f"POST is not taken at {path[:100]}: every endpoint "
                                                               "is a GET (a POST only takes snapshot bytes)"}),
                         close=True)
            return False
        lengths = headers.values("Content-Length")
        if not lengths:
            self.respond(411, b"a POST needs a Content-Length", close=True, content_type=TEXT_TYPE)
            return False
        length = int(lengths[0])
        if length > limit:
            self.respond(413, f"{length} bytes is over the {limit} this game takes (snapshotMaxBytes)".encode(),
                         close=True, content_type=TEXT_TYPE)
            return False
        assert self.conn is not None
        self.server.connections.reading_body(self.conn, BODY_TIMEOUT_S + length / (64 << 20))
        body = self.rfile.read(length)
        if len(body) < length or not self.server.connections.routing(self.conn):
            return False
        with self.server.answering():
            try:
                answer = posts.post(path, query, body)  # type: ignore[union-attr]
            except Exception as exc:  # a bug in a route must not kill the connection silently
                log.exception("game-bridge kit: error answering POST %s", path)
                answer = 500, json_bytes({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
            if isinstance(answer, Answer):
                self.respond(answer.status, answer.body, close=True, content_type=answer.content_type,
                             headers=answer.headers)
            else:
                self.respond(answer[0], answer[1], close=True)
        return False

    def _request_line(self, line: bytes) -> tuple[str, str, str]:
        text = line.decode("latin-1")
        text = text[:-2] if text.endswith("\r\n") else text.rstrip("\n")
        parts = text.split(" ")
        if len(parts) != 3 or not all(parts) or "\t" in text or "\r" in text or "\x00" in text:
            raise _BadRequest(400, f"bad request line {line[:80]!r}")
        if parts[2] not in VERSIONS:
            if parts[2].startswith("HTTP/"):
                raise _BadRequest(505, f"HTTP version {parts[2][:20]!r} is not supported (HTTP/1.1 or 1.0)")
            raise _BadRequest(400, f"bad request line {line[:80]!r}")
        return parts[0], parts[1], parts[2]

    def _headers(self, budget: int) -> _Headers:
        """The header block, within ``budget`` bytes and :data:`MAX_HEADERS` lines."""
        headers = _Headers()
        count = 0
        last: str | None = None
        while True:
            line = self.rfile.readline(min(MAX_LINE, budget) + 1)
            budget -= len(line)
            if budget < 0:
                raise _BadRequest(431, f"a header line is too long, or the headers pass {MAX_HEAD} bytes")
            if line in (b"\r\n", b"\n"):
                return headers
            if not line.endswith(b"\n"):  # the peer closed mid-header
                raise _BadRequest(400, "the request ended inside its headers")
            count += 1
            if count > MAX_HEADERS:
                raise _BadRequest(431, f"more than {MAX_HEADERS} headers")
            text = line.decode("latin-1").rstrip("\r\n")
            if "\r" in text or "\x00" in text:
                raise _BadRequest(400, f"a header line holds a CR or NUL: {text[:80]!r}")
            if text[:1] in (" ", "\t"):
                if last is None:
                    raise _BadRequest(400, "a header continuation line without a header")
                headers.continue_last(last, text.strip())
                continue
            name, colon, value = text.partition(":")
            if not colon or not _is_token(name):
                raise _BadRequest(400, f"bad header line {text[:80]!r}")
            headers.add(name, value.strip(" \t"))
            last = name.lower()

    @staticmethod
    def _framing(version: str, headers: _Headers) -> bool:
        """Where the request ends is beyond doubt (else :class:`_BadRequest`); whether the
        connection closes after the answer."""
        if headers.values("Transfer-Encoding"):
            raise _BadRequest(400, "a request with Transfer-Encoding is refused: every endpoint is a GET "
                                   "without a body")
        lengths = headers.values("Content-Length")
        if len(lengths) > 1:
            raise _BadRequest(400, "a request with more than one Content-Length is refused")
        if lengths and (not lengths[0].isdigit() or not lengths[0].isascii()):
            raise _BadRequest(400, f"Content-Length {lengths[0][:20]!r} is not a number")
        if version == "HTTP/1.0":
            close = (headers.get("Connection") or "").strip().lower() != "keep-alive"
        else:
            close = "close" in (headers.get("Connection") or "").lower()
        if lengths and int(lengths[0]) != 0:
            close = True  # a body nobody reads: never mistake it for the next request
        return close

    def _get(self, target: str, headers: _Headers, close: bool) -> bool:
        refusal = refusal_reason(headers, self.server.server_address[1])
        if refusal is not None:
            log.debug("refused %s: %s", target[:200], refusal)
            self.respond(403, json_bytes({"ok": False, "accepted": False, "error": refusal}), close=True)
            return False
        path, _, query = target.partition("?")
        with self.server.answering():
            try:
                answer = self.server.route(path, query)
            except Exception as exc:  # a bug in a route must not kill the connection silently
                log.exception("game-bridge kit: error answering %s", path)
                answer = 500, json_bytes({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
            if isinstance(answer, Answer):
                self.respond(answer.status, answer.body, close=close, content_type=answer.content_type,
                             headers=answer.headers)
            else:
                self.respond(answer[0], answer[1], close=close)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("GET %s: %s", target[:200], answer.status if isinstance(answer, Answer) else answer[0])
        return not close

    def respond(self, status: int, body: bytes, *, close: bool = False,
                content_type: str = JSON_TYPE, headers: tuple[tuple[str, str], ...] = ()) -> None:
        """Status line, headers and body in ONE write (see the module docstring)."""
        if self.conn is not None:
            self.server.connections.writing(self.conn)
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
        head = (f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                + extra +
                "Cache-Control: no-store\r\n"
                "X-Content-Type-Options: nosniff\r\n"
                + ("Connection: close\r\n" if close else "")
                + "\r\n").encode("latin-1")
        self.wfile.write(head + body)


class _Answering:
    """:meth:`KitHttpServer.answering`'s count of the requests being answered (a class: it is
    entered on every request, where a generator's context manager costs several times more);
    the last one out wakes :meth:`KitHttpServer.close_connections`."""

    __slots__ = ("server",)

    def __init__(self, server: "KitHttpServer") -> None:
        self.server = server

    def __enter__(self) -> None:
        server = self.server
        with server._answered:
            server._answering += 1

    def __exit__(self, *_exc: object) -> None:
        server = self.server
        with server._answered:
            server._answering -= 1
            if server._answering == 0:
                server._answered.notify_all()


class KitHttpServer(socketserver.ThreadingTCPServer):
    """A loopback-only threaded HTTP server answering through one ``route`` callable."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog: a burst of connects waits to be admitted

    def __init__(self, host: str, port: int, route: Route, *, max_connections: int = MAX_CONNECTIONS) -> None:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"the kit binds a loopback IP address only, not {host!r}") from None
        if not address.is_loopback:
            raise ValueError(f"the kit binds a loopback address only (127.0.0.1 or ::1), not {host!r}")
        self.address_family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        self.route = route
        #: Where a POST is taken (None: nowhere; every endpoint is a GET).
        self.posts: PostRoute | None = None
        self.connections = ConnectionTable(cap=max_connections, head_timeout_s=HEAD_TIMEOUT_S,
                                           idle_timeout_s=IDLE_TIMEOUT_S, write_timeout_s=WRITE_TIMEOUT_S)
        self._answering = 0  # requests between routing and their answer's last byte
        self._answered = threading.Condition()
        super().__init__((host, port), _Handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Admit a new connection to the table (making room), or refuse it with a 503
        when every open one is busy answering."""
        if self.connections.admit(request) is not None:
            return True
        body = json_bytes({"ok": False, "error": f"the game has {self.connections.cap} connections open, "
                                                 "all of them answering; try again shortly"})
        try:
            request.setblocking(False)
            request.send(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + JSON_TYPE.encode()
                         + b"\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" % len(body)
                         + body)
        except OSError:
            pass
        return False

    def service_actions(self) -> None:
        """Between accepts (every poll interval): end connections past their deadline."""
        self.connections.expire()

    def shutdown_request(self, request: Any) -> None:
        self.connections.drop(request)
        super().shutdown_request(request)

    def answering(self) -> "_Answering":
        """Around one request's routing and answer (see :meth:`close_connections`)."""
        return _Answering(self)

    def close_connections(self, grace_s: float = 1.0) -> None:
        """Shut down every open keep-alive connection (so the port goes quiet), after
        up to ``grace_s`` for the answers being written (a held request the stop has just
        released gets its answer rather than a reset)."""
        with self._answered:
            self._answered.wait_for(lambda: self._answering == 0, grace_s)
        self.connections.close_all()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("game-bridge kit: connection error from %s", client_address, exc_info=True)
