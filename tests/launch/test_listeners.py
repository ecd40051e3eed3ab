"""listeners: the kernel's answer over netlink sock_diag and the /proc/net tables agree on
who listens on a port (owner uid and socket inode), for IPv4 and IPv6 sockets this test
opens, and a closed one is no longer listed."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from game_bridge_mcp import listeners

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the socket tables are Linux's")


def open_listener(family: int, host: str) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen()
    return sock


def inode_of(sock: socket.socket) -> str:
    return os.readlink(f"/proc/self/fd/{sock.fileno()}")


def test_netlink_and_the_tables_name_the_same_listeners() -> None:
    socks = [open_listener(socket.AF_INET, "127.0.0.1")]
    if socket.has_ipv6:
        try:
            socks.append(open_listener(socket.AF_INET6, "::1"))
        except OSError:
            pass  # no IPv6 loopback here: the IPv4 socket is still compared
    try:
        ports = {s.getsockname()[1]: inode_of(s) for s in socks}
        diag, tables = listeners._diag_rows(), listeners._table_rows()
        assert diag is not None, "netlink sock_diag is refused here"
        assert tables is not None
        for port, inode in ports.items():
            assert (port, os.getuid(), inode) in diag
            assert (port, os.getuid(), inode) in tables
        found = listeners.listeners(ports)
        assert found is not None
        for port, inode in ports.items():
            assert found[port].inodes == frozenset({inode}) and found[port].uids == frozenset({os.getuid()})
        assert listeners.holder(socks[0].getsockname()[1], [os.getpid()]) == os.getpid()
    finally:
        for sock in socks:
            sock.close()
    gone = listeners.listeners(ports)
    assert gone is not None and not set(gone) & set(ports)


def test_without_netlink_the_tables_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listeners, "_diag_rows", lambda: None)
    sock = open_listener(socket.AF_INET, "127.0.0.1")
    try:
        port = sock.getsockname()[1]
        found = listeners.listeners([port])
        assert found is not None and found[port].inodes == frozenset({inode_of(sock)})
        assert listeners.can_tell()
    finally:
        sock.close()
