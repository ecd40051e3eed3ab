"""Ports for tests: none written down.

Two runs of the suite on one machine (two checkouts, CI beside a developer, ``pytest -n 2``)
must never reach for the same port, and a fixed one (the demo declaration's 7820-7839, the
bridge's default 7777) is exactly where they would meet, and where a developer's own game
may be running. So a test that needs a port asks the OS for one (bind to port 0), and a test
that needs a declared ``portRange`` gets one chosen at random below the OS's own range and
checked free.

What is left is the moment between asking and the game binding the port; the OS hands out
a port it has not handed out lately, so another run asking at the same moment gets another,
and a range below the OS's is never given to anyone's outgoing connection meanwhile.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_random = random.SystemRandom()  # apart from any seeding a test does


def free_port() -> int:
    """A port the OS just gave (bind to port 0 on 127.0.0.1), free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral() -> tuple[int, int]:
    """The range the OS picks its own ports from (outgoing connections, port-0 binds)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_range(count: int) -> tuple[int, int]:
    """``count`` consecutive free ports for a declared ``portRange``, below the OS's own
    range, at random: the launcher probes a port free and the game binds it a second or
    two later, and in between any outgoing connection on the machine could be given a port
    of the OS's range (a Pong launch lost 51998 so under ``-n 2``). Each port is bound while
    the range is put together (so nothing in this process takes them meanwhile), all
    released before returning; two runs at once pick apart at random."""
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    floor, ceiling = 20000, min(_ephemeral()[0], 65536)
    if ceiling - floor < 10 * count:
        floor, ceiling = 1024, 65536
    for _attempt in range(200):
        low = _random.randrange(floor, ceiling - count + 1)
        held: list[socket.socket] = []
        try:
            for port in range(low, low + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return low, low + count - 1
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports between {floor} and {ceiling} in 200 tries")


__all__ = ["free_port", "free_range"]
