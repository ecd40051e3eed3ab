"""The door of the HTTP server: Host, Origin, the bearer token, the path, a place for the request
(the app's rule, places.py), and a POST body's size and deadline (docs/http.md, "Who may call").
Plain ASGI."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import anyio

from .places import MAX_REQUESTS_IN_FLIGHT
from .token import FailedAttempts

log = logging.getLogger("game_bridge_mcp")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MCP_PATH = "/mcp"
#: Largest request body (a JSON-RPC message; tool arguments are small).
MAX_BODY_BYTES = 4 * 1024 * 1024
#: How long a client may take to send a request body.
BODY_DEADLINE_S = 10.0
#: Scope key under which the buffered body travels to the session layer.
BODY_KEY = "game_bridge.body"


# ---------------------------------------------------------------------------- addresses
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")


def _host_port(name: str, port: int) -> str:
    return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"


def allowed_hosts(host: str, port: int) -> set[str]:
    """The ``Host`` values (lower case, with the port) this server answers: the bound
    address; for loopback every loopback name; for a wildcard bind the machine's own
    names and addresses."""
    names = {host.lower()}
    if is_loopback(host):
        names |= set(LOOPBACK_NAMES)
    if _wildcard(host):
        names |= set(LOOPBACK_NAMES) | _own_addresses()
    return {_host_port(n, port) for n in names if n}


def _name_of(host_port: str) -> str:
    """``name`` of ``name:port``, ``[v6]:port``, ``name`` or ``[v6]``."""
    if host_port.startswith("["):
        return host_port[1:].split("]", 1)[0]
    return host_port.rsplit(":", 1)[0] if host_port.count(":") == 1 else host_port


def _own_addresses() -> set[str]:
    found: set[str] = set()
    try:
        hostname = socket.gethostname()
        found |= {hostname.lower(), socket.getfqdn().lower()}
        for info in socket.getaddrinfo(hostname, None):
            found.add(str(info[4][0]).split("%")[0])
    except OSError:
        pass
    try:
        import psutil

        for addresses in psutil.net_if_addrs().values():
            for address in addresses:
                if address.family in (socket.AF_INET, socket.AF_INET6):
                    found.add(str(address.address).split("%")[0].lower())
    except Exception:  # noqa: BLE001 - psutil missing or refused: the names above remain
        pass
    return found


# ---------------------------------------------------------------------------- answers
async def respond(send: Send, status: int, body: bytes = b"", headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    head = [(b"content-length", str(len(body)).encode())]
    if body:
        head.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": head + list(headers)})
    await send({"type": "http.response.body", "body": body})


def rpc_error(message: str, code: int = -32600) -> bytes:
    """A JSON-RPC error without a request id (the transport's own form for HTTP-level refusals)."""
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()


async def busy(send: Send, message: str, retry_after_s: int) -> None:
    await respond(send, 503, rpc_error(message, -32603), [(b"retry-after", str(retry_after_s).encode())])


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


# ---------------------------------------------------------------------------- the gate
class Gate:
    """ASGI middleware in front of the MCP transport (see the module docstring)."""

    def __init__(self, app: App, *, token: str, hosts: set[str], names: Iterable[str] = (),
                 max_body: int = MAX_BODY_BYTES, body_deadline_s: float = BODY_DEADLINE_S,
                 max_in_flight: int = MAX_REQUESTS_IN_FLIGHT) -> None:
        self.app = app
        self._token = token.encode("utf-8")
        #: ``host:port`` values of the bound address; ``names`` (``--allow-host``) match with
        #: any port or none (a TLS proxy in front passes on the name clients used).
        self.hosts = hosts
        self.names = {n.strip().lower() for n in names if n.strip()}
        self.max_body = max_body
        self.body_deadline_s = body_deadline_s
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        #: Requests refused for their token, logged at most every 10 s.
        self.failed = FailedAttempts()
        #: Told of every request that passed the door (the connection guard: it carries a token).
        self.on_authorised: Callable[[Scope], None] | None = None

    def known_host(self, host: str) -> bool:
        return host in self.hosts or (bool(host) and _name_of(host) in self.names)

    def known_origin(self, origin: str) -> bool:
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme in ("http", "https") and "/" not in rest.rstrip("/") \
            and self.known_host(rest.rstrip("/"))

    def authorised(self, scope: Scope) -> bool:
        given = header(scope, b"authorization") or ""
        scheme, _, credential = given.partition(" ")
        if scheme.lower() != "bearer":
            credential = ""
        return hmac.compare_digest(credential.strip().encode("utf-8", "replace"), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            return  # no websockets; lifespan is not used
        if not self.known_host((header(scope, b"host") or "").strip().lower()):
            await respond(send, 421, rpc_error("Invalid Host header"))
            return
        origin = header(scope, b"origin")
        if origin is not None and not self.known_origin(origin.strip().lower()):
            await respond(send, 403, rpc_error("Invalid Origin header"))
            return
        if not self.authorised(scope):
            client = scope.get("client")
            self.failed.record(str(client[0]) if client else "?")
            await respond(send, 401, headers=[(b"www-authenticate", b"Bearer")])
            return
        if scope.get("path", "").rstrip("/") != MCP_PATH:
            await respond(send, 404, rpc_error(f"Not found: the MCP endpoint is {MCP_PATH}"))
            return
        if self.on_authorised is not None:
            self.on_authorised(scope)
        refusal, release = self._admit(scope)
        if refusal is not None:
            await busy(send, refusal, 1)
            return
        try:  # the place is held while the body arrives: a slow one costs its own holder's place
            if scope.get("method") == "POST":
                body = await self._read_body(scope, receive, send)
                if body is None:
                    return
                scope = dict(scope)
                scope[BODY_KEY] = body
                receive = _replay(body, receive)
            await self.app(scope, receive, send)
        finally:
            release()

    def _admit(self, scope: Scope) -> tuple[str | None, Callable[[], None]]:
        """A place for the request: the app's own rule (``app.admit``, per holder: the
        session layer's), else one global cap; (why not, or None) and how to give it back."""
        admit = getattr(self.app, "admit", None)
        if admit is not None:
            decided: tuple[str | None, Callable[[], None]] = admit(scope)
            return decided
        if scope.get("method") == "GET":  # the notification stream stays open: not counted
            return None, _nothing
        if self.in_flight >= self.max_in_flight:
            return "The bridge is overloaded: too many requests in flight. Retry shortly.", _nothing
        self.in_flight += 1

        def release() -> None:
            self.in_flight -= 1
        return None, release

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once the client was answered (too large: 413; too slow: 408)."""
        length = header(scope, b"content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > self.max_body):
            await respond(send, 413 if length.strip().isdigit() else 400,
                          rpc_error(f"Request body too large (the limit is {self.max_body} bytes)"
                                    if length.strip().isdigit() else "Bad Content-Length header"))
            return None
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.body_deadline_s) as deadline:
            while True:
                message = await receive()
                if message.get("type") == "http.disconnect":
                    return None
                chunk = message.get("body", b"") or b""
                size += len(chunk)
                if size > self.max_body:
                    await respond(send, 413, rpc_error(f"Request body too large (the limit is {self.max_body} bytes)"))
                    return None
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            await respond(send, 408, rpc_error(f"The request body did not arrive within {self.body_deadline_s:g} s"))
            return None
        return b"".join(chunks)


def _nothing() -> None:
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the buffered body once, then whatever the client does next
    (its disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
