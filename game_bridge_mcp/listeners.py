"""Who listens on a local TCP port: the socket's owner and the processes holding it, from the
kernel's socket tables on Linux, else psutil where it can tell. Imports nothing else from the
package."""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from typing import Iterable

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency
    psutil = None  # type: ignore[assignment]

_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_LISTEN = "0A"

# netlink sock_diag (linux/sock_diag.h, linux/inet_diag.h): a dump of the TCP sockets in
# the states asked for, each an inet_diag_msg (family, state, the socket id with the
# local port big-endian, then expires, queues, uid, inode).
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
_TCP_LISTEN = 10
_NLMSG_HEADER = struct.Struct("=LHHLL")
#: inet_diag_req_v2: family, protocol, ext, pad, states, and an all-zero socket id (48 bytes).
_DIAG_REQUEST = struct.Struct("=BBBBL48x")
#: inet_diag_msg (72 bytes): family, state, timer, retrans, the socket id (local port
#: big-endian at 4, remote port, addresses, interface, cookie), expires, rqueue, wqueue,
#: then uid at 64 and inode at 68.
_DIAG_MSG_SIZE = 72
_DIAG_PORT = struct.Struct("!H")
_DIAG_OWNER = struct.Struct("=LL")
_DIAG_BUFFER = 65536
_DIAG_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Listener:
    """The sockets listening on one port: their owners' uids and inodes (``socket:[n]``)."""

    port: int
    uids: frozenset[int]
    inodes: frozenset[str]


def _diag_rows() -> list[tuple[int, int, str]] | None:
    """``(port, uid, inode)`` of every listening TCP socket (IPv4 and IPv6), asked of the
    kernel over netlink ``sock_diag`` with the state filtered there: the answer holds the
    listening sockets only, however many connections the machine has. None when netlink
    cannot be used here (not Linux, or refused)."""
    family = getattr(socket, "AF_NETLINK", None)
    if family is None:
        return None
    rows: list[tuple[int, int, str]] = []
    try:
        with socket.socket(family, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as sock:
            sock.settimeout(_DIAG_TIMEOUT_S)
            for seq, inet in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
                request = _DIAG_REQUEST.pack(inet, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
                sock.sendall(_NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY,
                                                _NLM_F_REQUEST | _NLM_F_DUMP, seq, 0) + request)
                if not _read_dump(sock, seq, rows):
                    return None
    except OSError:
        return None
    return rows


def _read_dump(sock: socket.socket, seq: int, rows: list[tuple[int, int, str]]) -> bool:
    """Read one dump's messages into ``rows``; False when the kernel answered an error."""
    while True:
        data = sock.recv(_DIAG_BUFFER)
        if not data:
            return False
        offset = 0
        while offset + _NLMSG_HEADER.size <= len(data):
            length, kind, _flags, got_seq, _pid = _NLMSG_HEADER.unpack_from(data, offset)
            if length < _NLMSG_HEADER.size:
                return False
            body = offset + _NLMSG_HEADER.size
            if got_seq == seq:
                if kind == _NLMSG_DONE:
                    return True
                if kind == _NLMSG_ERROR:
                    return False
                if (kind == _SOCK_DIAG_BY_FAMILY and length - _NLMSG_HEADER.size >= _DIAG_MSG_SIZE
                        and data[body + 1] == _TCP_LISTEN):
                    (port,) = _DIAG_PORT.unpack_from(data, body + 4)
                    uid, inode = _DIAG_OWNER.unpack_from(data, body + 64)
                    rows.append((port, uid, f"socket:[{inode}]"))
            offset += (length + 3) & ~3


def _table_rows() -> list[tuple[int, int, str]] | None:
    """The same from ``/proc/net/tcp`` and ``tcp6``, which list every socket of the
    machine (a slow read where it has thousands of connections); None when unreadable."""
    rows: list[tuple[int, int, str]] = []
    seen = False
    for table in _TABLES:
        try:
            with open(table, encoding="ascii", errors="replace") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        seen = True
        for line in lines:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            cols = line.split()
            if len(cols) < 10 or cols[3] != _LISTEN:
                continue
            try:
                rows.append((int(cols[1].rsplit(":", 1)[1], 16), int(cols[7]), f"socket:[{cols[9]}]"))
            except (IndexError, ValueError):
                continue
    return rows if seen else None


def _listening_rows() -> list[tuple[int, int, str]] | None:
    rows = _diag_rows()
    return rows if rows is not None else _table_rows()


def listeners(ports: Iterable[int]) -> dict[int, Listener] | None:
    """The listening sockets on each of ``ports`` that has any (one question to the kernel
    for all of them); None where the socket tables cannot be read (not Linux)."""
    wanted = {int(p) for p in ports}
    rows = _listening_rows()
    if rows is None:
        return None
    uids: dict[int, set[int]] = {}
    inodes: dict[int, set[str]] = {}
    for port, uid, inode in rows:
        if port not in wanted:
            continue
        uids.setdefault(port, set()).add(uid)
        inodes.setdefault(port, set()).add(inode)
    return {port: Listener(port, frozenset(uids[port]), frozenset(inodes[port])) for port in uids}


def listener(port: int) -> Listener | None:
    """The sockets listening on ``port``, or None when nothing listens (or, off Linux,
    when the tables cannot be read: see :func:`can_tell`)."""
    found = listeners([port])
    return None if found is None else found.get(port)


def can_tell() -> bool:
    """Whether :func:`listeners` can see this machine's socket tables."""
    return _listening_rows() is not None


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
