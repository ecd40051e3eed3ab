"""Hostile HTTP peers for tests: a raw-socket server on port 0 that answers every
connection with one chosen misbehaviour.

``http.server`` cannot misbehave on purpose (it always writes well-formed answers), and
the bridge must survive peers that trickle, never stop, lie about lengths, reset the
connection or are not HTTP at all (see docs/reliability.md). Each behaviour is a
plain function ``behaviour(conn, peer)`` run on its own thread per connection; the
builders at the bottom (``answer``, ``trickle_headers``, ...) return one.

Every behaviour stops promptly when the client goes away or the server is closed, and
``HostilePeer.close()`` joins every thread it started, so a test leaves nothing behind.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from typing import Any, Callable


Behaviour = Callable[[socket.socket, "HostilePeer"], None]


class HostilePeer:
    """A listener on ``127.0.0.1:<port 0>`` that runs ``behaviour`` for each connection.

    ``accepted`` counts connections (a redirect target or a proxy asserts it stays 0),
    ``requests`` holds the raw request heads that were read."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.accepted = 0
        self.requests: list[bytes] = []
        self.stopping = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True,
                                          name=f"hostile-{self.port}-accept")

    def __enter__(self) -> "HostilePeer":
        self._acceptor.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop accepting, end every behaviour, close every socket, join every thread."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._acceptor.is_alive():
            self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in threads:
            thread.join(timeout=5)
        for conn in conns:
            conn.close()
        self._wake_r.close()
        self._wake_w.close()
        leftover = [t.name for t in threads if t.is_alive()]
        if leftover:
            raise AssertionError(f"hostile peer threads did not stop: {leftover}")

    # ------------------------------------------------------------------ serving
    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            readable, _, _ = select.select([self._listener, self._wake_r], [], [])
            if self._wake_r in readable:
                return
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                self._conns.append(conn)
                thread = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                          name=f"hostile-{self.port}-conn{self.accepted}")
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.behaviour(conn, self)
        except OSError:
            pass  # the client went away: that is how most behaviours end
        finally:
            try:
                conn.close()
            except OSError:
                pass

    # ------------------------------------------------------------------ helpers for behaviours
    def read_request(self, conn: socket.socket, limit: float = 2.0) -> bytes:
        """Read the request head (up to the blank line); give up after ``limit`` seconds."""
        data = b""
        deadline = time.monotonic() + limit
        while b"\r\n\r\n" not in data and not self.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            conn.settimeout(min(remaining, 0.1))
            try:
                chunk = conn.recv(4096)
            except socket.timeout:
                continue
            if not chunk:
                break
            data += chunk
        conn.settimeout(None)
        with self._lock:
            self.requests.append(data)
        return data

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the peer is closing (the behaviour should end)."""
        return not self.stopping.wait(seconds)

    def wait_for_client_close(self, conn: socket.socket) -> None:
        """Hold the connection open, answering nothing, until the client or the peer ends it."""
        conn.settimeout(0.05)
        while not self.stopping.is_set():
            try:
                if not conn.recv(4096):
                    return
            except socket.timeout:
                continue


def reset(conn: socket.socket) -> None:
    """Close with SO_LINGER 0: the kernel sends RST instead of FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def head(status: int = 200, headers: tuple[tuple[str, str], ...] = (), *,
         length: int | None = None, reason: str = "X", content_type: str = "application/json") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# ---------------------------------------------------------------------- behaviours
def answer(status: int = 200, body: bytes = b'{"ok": true, "frame": 1}', *,
           headers: tuple[tuple[str, str], ...] = (), length: int | None = -1) -> Behaviour:
    """A complete answer in one send. ``length=-1`` means the true Content-Length,
    ``None`` means no Content-Length (the body ends at close)."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        conn.sendall(head(status, headers, length=len(body) if length == -1 else length) + body)
    return behaviour


def silent() -> Behaviour:
    """Accept the connection, read the request, never answer."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        peer.wait_for_client_close(conn)
    return behaviour


def trickle_headers(interval: float = 0.2) -> Behaviour:
    """A status line and headers one byte every ``interval`` seconds."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        data = head(200, (("X-Padding", "p" * 400),), length=2) + b"{}"
        for i in range(len(data)):
            conn.sendall(data[i:i + 1])
            if not peer.pause(interval):
                return
    return behaviour


def trickle_body(interval: float = 0.2) -> Behaviour:
    """Headers at once (a 400-byte Content-Length), then the body one byte per interval."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        body = b'{"ok": true, "pad": "' + b"p" * 376 + b'"}'
        conn.sendall(head(200, length=len(body)))
        for i in range(len(body)):
            conn.sendall(body[i:i + 1])
            if not peer.pause(interval):
                return
    return behaviour


def endless_body(*, chunked: bool = False) -> Behaviour:
    """Headers without a length (or chunked), then body bytes until the client leaves."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        conn.sendall(head(200, (("Transfer-Encoding", "chunked"),) if chunked else ()))
        block = b"[" + b"0," * 32767
        piece = (f"{len(block):x}\r\n".encode() + block + b"\r\n") if chunked else block
        while not peer.stopping.is_set():
            conn.sendall(piece)
    return behaviour


def reset_before_headers() -> Behaviour:
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        reset(conn)
    return behaviour


def reset_after_headers() -> Behaviour:
    """Headers promising 1000 bytes, ten of them, then RST."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        conn.sendall(head(200, length=1000) + b'{"ok": tru')
        reset(conn)
    return behaviour


def close_without_answer() -> Behaviour:
    """Read the request and close normally (FIN) without a byte of answer."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
    return behaviour


def short_body(body: bytes = b'{"ok": true, "frame": 1}', promised: int = 200) -> Behaviour:
    """A Content-Length larger than the body, then a normal close."""
    return answer(200, body, length=promised)


def redirect(location: str, status: int = 302) -> Behaviour:
    return answer(status, b"", headers=(("Location", location),))


def many_headers(count: int = 150) -> Behaviour:
    return answer(200, headers=tuple((f"X-H{i}", "v") for i in range(count)))


def long_header_line(size: int = 64 * 1024) -> Behaviour:
    return answer(200, headers=(("X-Long", "a" * size),))


def garbage(data: bytes = b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff\xfe not http at all\r\n\r\n") -> Behaviour:
    """Something that is not HTTP: write ``data`` and close."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        peer.read_request(conn)
        conn.sendall(data)
    return behaviour


def deep_nesting(depth: int = 100_000) -> Behaviour:
    return answer(200, b"[" * depth)


Route = Callable[[str], "tuple[int, bytes] | tuple[int, bytes, str]"]


def routed(routes: dict[str, Route | bytes]) -> Behaviour:
    """A game written by hand that answers each path from ``routes`` (looked up on every
    request, so a test can change its answers meanwhile): raw bytes (HTTP 200), or a
    function of the request target returning ``(status, body)``. Raw bytes say what no
    encoder would: ``1e400``, a number of 5000 digits, control characters. A function may
    also return ``(status, body, content_type)`` (an image). Unknown paths get 404."""
    def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
        request = peer.read_request(conn)
        target = request.split(b" ", 2)[1].decode("latin-1") if request.count(b" ") >= 2 else "/"
        route = routes.get(target.split("?", 1)[0])
        content_type = "application/json"
        if route is None:
            status, body = 404, b'{"error": "not found"}'
        elif isinstance(route, bytes):
            status, body = 200, route
        else:
            status, body, *rest = route(target)
            content_type = rest[0] if rest else content_type
        conn.sendall(head(status, length=len(body), content_type=content_type) + body)
    return behaviour
