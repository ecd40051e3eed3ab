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
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

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
    """A socket reader that gives each recv only the time left until the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed")
        self._sock.settimeout(remaining)
        return self._sock.recv_into(buffer)


class _SocketShim:
    """What ``http.client.HTTPResponse`` needs of a socket: ``makefile``."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._reader = io.BufferedReader(_DeadlineReader(sock, deadline), 65536)

    def makefile(self, *_args: Any, **_kwargs: Any) -> io.BufferedReader:
        return self._reader


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


def loopback_opener(url: str, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> HttpResponse:
    """GET ``url`` with one deadline for the whole request and a cap on the body."""
    host, port, path = _split_url(url)
    deadline = time.monotonic() + timeout
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
        host_header = f"[{host}]" if ":" in host else host
        request = (f"GET {path} HTTP/1.1\r\nHost: {host_header}:{port}\r\n"
                   "Accept: application/json\r\nConnection: close\r\n"
                   "User-Agent: game-bridge-mcp\r\n\r\n").encode("latin-1")
        sock.sendall(request)
        response = http.client.HTTPResponse(_SocketShim(sock, deadline), method="GET")  # type: ignore[arg-type]
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
        return HttpResponse(response.status, body, headers)
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
    finally:
        sock.close()


def decode_json(body: bytes) -> Any:
    """Parse a JSON answer. ``NaN``/``Infinity`` become ``None``; raise ValueError with a
    short reason for invalid or absurdly nested documents."""
    try:
        return json.loads(body, parse_constant=lambda _name: None)
    except RecursionError:
        raise ValueError("is nested too deeply to parse") from None
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


OpenerFactory = Callable[[], Opener]
