"""The kit server's open connections: how many it keeps, what each may wait for, and which
one gives way when a new one arrives (docs/design.md, "The kit's HTTP server")."""

from __future__ import annotations

import socket
import threading
import time

WAITING, READING, ROUTING, WRITING = "waiting", "reading", "routing", "writing"


class Connection:
    """One open connection's state (its handler thread writes it; the table reads it)."""

    __slots__ = ("sock", "state", "deadline", "since", "served", "closed")

    def __init__(self, sock: socket.socket, now: float, deadline: float) -> None:
        self.sock = sock
        self.state = WAITING
        self.deadline = deadline
        self.since = now
        self.served = 0
        self.closed = False


class ConnectionTable:
    """The server's connections, at most ``cap`` of them, each under its deadline."""

    def __init__(self, *, cap: int, head_timeout_s: float, idle_timeout_s: float,
                 write_timeout_s: float) -> None:
        self.cap = max(1, int(cap))
        self.head_timeout_s = head_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.write_timeout_s = write_timeout_s
        self._open: dict[socket.socket, Connection] = {}
        self._lock = threading.Lock()
        self._next_expiry = 0.0
        #: Connections shut down for a passed deadline, given way to a newer one, or refused.
        self.expired = 0
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, sock: socket.socket) -> Connection | None:
        """Register a new connection, making room if the table is full; None when every
        open connection is routing or writing (the caller refuses the new one)."""
        now = time.monotonic()
        victim: Connection | None = None
        with self._lock:
            if len(self._open) >= self.cap:
                victim = self._victim()
                if victim is None:
                    self.refused += 1
                    return None
                victim.closed = True
                del self._open[victim.sock]
                self.evicted += 1
            conn = Connection(sock, now, now + self.head_timeout_s)
            self._open[sock] = conn
        if victim is not None:
            _shut(victim.sock)
        return conn

    def _victim(self) -> Connection | None:
        """The oldest connection without a whole request yet, else the oldest idle one."""
        fresh: Connection | None = None
        idle: Connection | None = None
        for conn in self._open.values():
            if conn.state == READING or (conn.state == WAITING and conn.served == 0):
                if fresh is None or conn.since < fresh.since:
                    fresh = conn
            elif conn.state == WAITING and (idle is None or conn.since < idle.since):
                idle = conn
        return fresh if fresh is not None else idle

    def get(self, sock: socket.socket) -> Connection | None:
        return self._open.get(sock)

    def waiting(self, conn: Connection) -> None:
        """Before a request's first byte: a fresh connection's head deadline runs from its
        accept; a kept-alive one may idle for ``idle_timeout_s``."""
        if conn.served:
            now = time.monotonic()
            conn.since = now
            conn.deadline = now + self.idle_timeout_s
        conn.state = WAITING

    def reading(self, conn: Connection) -> None:
        """A request's first byte has come: its line and headers are due within the head
        deadline (from the accept for a fresh connection)."""
        if conn.served:
            conn.deadline = time.monotonic() + self.head_timeout_s
        conn.state = READING

    def reading_body(self, conn: Connection, timeout_s: float) -> None:
        """A POST's body is due within ``timeout_s``."""
        conn.deadline = time.monotonic() + timeout_s
        conn.state = READING

    def routing(self, conn: Connection) -> bool:
        """A whole request is in: no deadline while a route holds it. False when the
        connection was already given way to a newer one."""
        with self._lock:
            if conn.closed:
                return False
            conn.state = ROUTING
            return True

    def writing(self, conn: Connection) -> None:
        conn.deadline = time.monotonic() + self.write_timeout_s
        conn.state = WRITING
        conn.served += 1

    def drop(self, sock: socket.socket) -> None:
        with self._lock:
            conn = self._open.pop(sock, None)
            if conn is not None:
                conn.closed = True

    def expire(self) -> None:
        """Shut down every connection past its deadline (at most every 0.1 s)."""
        now = time.monotonic()
        if now < self._next_expiry:
            return
        self._next_expiry = now + 0.1
        with self._lock:
            late = [conn for conn in self._open.values() if conn.state != ROUTING and conn.deadline < now]
            for conn in late:
                conn.closed = True
                del self._open[conn.sock]
            self.expired += len(late)
        for conn in late:
            _shut(conn.sock)

    def close_all(self) -> None:
        with self._lock:
            conns = list(self._open.values())
            self._open.clear()
            for conn in conns:
                conn.closed = True
        for conn in conns:
            _shut(conn.sock)


def _shut(sock: socket.socket) -> None:
    """End a connection under its handler thread (its blocked read or write returns)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
