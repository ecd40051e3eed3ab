"""The suite's shared fixtures: any test, in any folder, asks for them by name.

Test files sit in folders that mirror the package (``core/``, ``wire/``, ``game/``, ...),
end-to-end suites in ``integration/``. Helpers they import live in ``support/`` and the
games they talk to in ``peers/``; pyproject's ``pythonpath`` makes both importable as
top-level modules (``from mcp_harness import connect``, ``from peers.handmade import
HandmadeGame``) from every folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from launch_helpers import LauncherFactory, ProcessGuard
from peers.hostile import Behaviour, HostilePeer


@pytest.fixture
def guard(tmp_path: Path) -> Iterator[ProcessGuard]:
    """Every process the test starts carries the guard's token; any left at the end is
    killed and fails the test."""
    g = ProcessGuard(tmp_path)
    yield g
    g.check()


@pytest.fixture
def launchers(tmp_path: Path, guard: ProcessGuard) -> Iterator[LauncherFactory]:
    """Launchers made for the test (``launchers(declaration)``), each shut down after it."""
    factory = LauncherFactory(tmp_path, guard)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], HostilePeer]]:
    """Start hostile peers for one test; every one is closed (threads joined) after it."""
    peers: list[HostilePeer] = []

    def start(behaviour: Behaviour) -> HostilePeer:
        peer = HostilePeer(behaviour).__enter__()
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        peer.close()
