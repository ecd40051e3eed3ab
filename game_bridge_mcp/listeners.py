"""Who listens on a local TCP port: the socket's owner and the processes holding it.

Why this module exists: a port number proves nothing about who answers on it. A launched
game may have died and a stranger bound its port; a listener may belong to another user
of the machine. The launcher must know before it asks a port's process to ``close``, and
discovery before it calls a listener "launched by this bridge" or one of ours. Both ask
here, and both get the same answer.

On Linux the kernel's socket tables (``/proc/net/tcp`` and ``tcp6``) say which sockets
listen on a port, with their owner's uid and inode; a process holds the socket when one
of its descriptors (``/proc/<pid>/fd/*``) links to ``socket:[inode]``. Elsewhere psutil
is asked, where it can tell. Standard library plus optional psutil; imports nothing else
from the package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency
    psutil = None  # type: ignore[assignment]

_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    """The sockets listening on one port: their owners' uids and inodes (``socket:[n]``)."""

    port: int
    uids: frozenset[int]
    inodes: frozenset[str]


def _read_tables() -> list[list[str]] | None:
    rows: list[list[str]] = []
    seen = False
    for table in _TABLES:
        try:
            with open(table, encoding="ascii", errors="replace") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        seen = True
        rows.extend(line.split() for line in lines)
    return rows if seen else None


def listeners(ports: Iterable[int]) -> dict[int, Listener] | None:
    """The listening sockets on each of ``ports`` that has any (one read of the tables for
    all of them); None where the tables cannot be read (not Linux)."""
    wanted = {int(p) for p in ports}
    rows = _read_tables()
    if rows is None:
        return None
    uids: dict[int, set[int]] = {}
    inodes: dict[int, set[str]] = {}
    for cols in rows:
        # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
        if len(cols) < 10 or cols[3] != _LISTEN:
            continue
        try:
            port = int(cols[1].rsplit(":", 1)[1], 16)
            uid = int(cols[7])
        except (IndexError, ValueError):
            continue
        if port not in wanted:
            continue
        uids.setdefault(port, set()).add(uid)
        inodes.setdefault(port, set()).add(f"socket:[{cols[9]}]")
    return {port: Listener(port, frozenset(uids[port]), frozenset(inodes[port])) for port in uids}


def listener(port: int) -> Listener | None:
    """The sockets listening on ``port``, or None when nothing listens (or, off Linux,
    when the tables cannot be read: see :func:`can_tell`)."""
    found = listeners([port])
    return None if found is None else found.get(port)


def can_tell() -> bool:
    """Whether :func:`listeners` can see this machine's socket tables."""
    return _read_tables() is not None


def holder(port: int, pids: Iterable[int], found: Listener | None = None) -> int | None:
    """Which of ``pids`` holds a socket listening on ``port`` (None: none of them, as far
    as can be told). ``found`` is a :func:`listener` answer read already."""
    pids = list(pids)
    if not pids:
        return None
    sockets = found.inodes if found is not None else None
    if sockets is None and can_tell():
        current = listener(port)
        if current is None:
            return None
        sockets = current.inodes
    if sockets is not None:
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                        return pid
                except OSError:
                    continue
        return None
    if psutil is None:  # pragma: no cover
        return None
    for pid in pids:  # pragma: no cover - other platforms
        try:
            proc = psutil.Process(pid)
            conns = getattr(proc, "net_connections", None) or proc.connections
            for conn in conns(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                    return pid
        except (psutil.Error, OSError):
            continue
    return None


def user_name(uid: int) -> str | None:
    """The login name for ``uid``, if there is one."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return None


__all__ = ["Listener", "can_tell", "holder", "listener", "listeners", "user_name"]
