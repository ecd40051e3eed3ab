"""The kit's HTTP server: loopback only, hardened against browsers, one send per answer.

Why this is not a plain ``BaseHTTPRequestHandler``:

* **One send.** The stdlib handler writes the header block and the body in separate
  sends; on a keep-alive connection Nagle's algorithm plus the client's delayed ACK
  stall each such answer about 40 ms. Every answer here is one buffer (status line,
  headers and body) written with one ``sendall``, on a socket with ``TCP_NODELAY``.
* **HTTP/1.1 with Content-Length**, so a client may keep its connection alive.
* **Browsers are refused.** A web page can make the browser send a simple GET to
  ``127.0.0.1:<port>`` (an ``<img>`` tag needs no CORS preflight), and DNS rebinding
  can point a hostile name at it. So a request is refused (HTTP 403, before anything
  else happens) when its ``Host`` is not a loopback name or address with this port,
  when it carries an ``Origin`` header, or when the browser's ``Sec-Fetch-Site`` says
  it came from another site.
* **Quiet.** Request logging goes to ``logging`` at DEBUG, never to stderr.
* **Stoppable.** Open keep-alive connections are tracked and shut down on stop, so the
  port goes quiet at once.

The routes themselves live in :mod:`game_bridge_mcp.game.kit`; this module only knows
"a GET for a path and a query answers a status and a body": JSON bytes as a
``(status, body)`` pair, or an :class:`Answer` for another content type or extra
headers (an image, ``X-Game-Frame``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import socket
import socketserver
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Union

log = logging.getLogger(__name__)

JSON_TYPE = "application/json; charset=utf-8"


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
#: How long an idle keep-alive connection is kept open.
IDLE_TIMEOUT_S = 60.0


def json_bytes(doc: Any) -> bytes:
    """Small strict JSON answers (the kit's own documents)."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("utf-8")


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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "game-bridge-kit"
    timeout = IDLE_TIMEOUT_S
    server: "KitHttpServer"

    def setup(self) -> None:
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # pragma: no cover - not every socket family has it
            pass

    def respond(self, status: int, body: bytes, *, close: bool = False,
                content_type: str = JSON_TYPE, headers: tuple[tuple[str, str], ...] = ()) -> None:
        """Status line, headers and body in ONE write (see the module docstring)."""
        reason = self.responses.get(status, ("",))[0]
        close = close or self.close_connection
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
        head = (f"HTTP/1.1 {status} {reason}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                + extra +
                "Cache-Control: no-store\r\n"
                "X-Content-Type-Options: nosniff\r\n"
                + ("Connection: close\r\n" if close else "")
                + "\r\n").encode("latin-1")
        self.wfile.write(head + body)
        if close:
            self.close_connection = True

    def do_GET(self) -> None:
        refusal = refusal_reason(self.headers, self.server.server_address[1])
        if refusal is not None:
            log.debug("refused %s: %s", self.path[:200], refusal)
            self.respond(403, json_bytes({"ok": False, "accepted": False, "error": refusal}), close=True)
            return
        path, _, query = self.path.partition("?")
        with self.server.answering():
            try:
                answer = self.server.route(path, query)
            except Exception as exc:  # a bug in a route must not kill the connection silently
                log.exception("game-bridge kit: error answering %s", path)
                answer = 500, json_bytes({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
            if isinstance(answer, Answer):
                self.respond(answer.status, answer.body, content_type=answer.content_type,
                             headers=answer.headers)
            else:
                self.respond(answer[0], answer[1])

    def _not_allowed(self) -> None:
        self.respond(405, json_bytes({"ok": False, "error": f"method {self.command} is not supported; "
                                                           "every endpoint is a GET"}), close=True)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _not_allowed

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Malformed requests (and unknown methods) get one-send JSON too."""
        self.close_connection = True
        try:
            self.respond(code, json_bytes({"ok": False, "error": message or self.responses.get(code, ("",))[0]}),
                         close=True)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)


class KitHttpServer(ThreadingHTTPServer):
    """A loopback-only threaded HTTP server answering through one ``route`` callable."""

    daemon_threads = True

    def __init__(self, host: str, port: int, route: Route) -> None:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"the kit binds a loopback IP address only, not {host!r}") from None
        if not address.is_loopback:
            raise ValueError(f"the kit binds a loopback address only (127.0.0.1 or ::1), not {host!r}")
        self.address_family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        self.route = route
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._answering = 0  # requests between routing and their answer's last byte
        self._answered = threading.Condition()
        super().__init__((host, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the FQDN of the address, which can take
        # seconds on a machine with slow DNS; a loopback debug server needs no name.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        with self._connections_lock:
            self._connections.add(sock)
        return sock, address

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Around one request's routing and answer (see :meth:`close_connections`)."""
        with self._answered:
            self._answering += 1
        try:
            yield
        finally:
            with self._answered:
                self._answering -= 1
                self._answered.notify_all()

    def close_connections(self, grace_s: float = 1.0) -> None:
        """Shut down every open keep-alive connection (so the port goes quiet), after
        up to ``grace_s`` for the answers being written (a held request the stop has just
        released gets its answer rather than a reset)."""
        with self._answered:
            self._answered.wait_for(lambda: self._answering == 0, grace_s)
        with self._connections_lock:
            connections = list(self._connections)
            self._connections.clear()
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("game-bridge kit: connection error from %s", client_address, exc_info=True)
