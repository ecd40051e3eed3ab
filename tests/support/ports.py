"""Ports for tests: every one the OS gives, none written down.

Two runs of the suite on one machine (two checkouts, CI beside a developer, ``pytest -n 2``)
must never reach for the same port, and a fixed one (the demo declaration's 7820-7839, the
bridge's default 7777) is exactly where they would meet, and where a developer's own game
may be running. So a test that needs a port asks the OS for one (bind to port 0), and a test
that needs a declared ``portRange`` gets one that starts at such a port.

What is left is the moment between asking and the game binding the port; the OS hands out
a port it has not handed out lately, so another run asking at the same moment gets another.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the OS just gave (bind to port 0 on 127.0.0.1), free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_range(count: int) -> tuple[int, int]:
    """``count`` consecutive free ports for a declared ``portRange``: the first one given by
    the OS, the others bound while the range is put together (so nothing in this process
    takes them meanwhile), all released before returning."""
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    for _attempt in range(200):
        held: list[socket.socket] = []
        try:
            first = socket.socket()
            held.append(first)
            first.bind(("127.0.0.1", 0))
            low = int(first.getsockname()[1])
            if low + count - 1 > 65535:
                continue
            for port in range(low + 1, low + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return low, low + count - 1
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError(f"the OS gave no port followed by {count - 1} free ones in 200 tries")


__all__ = ["free_port", "free_range"]
