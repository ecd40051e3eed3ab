"""The suite's shared fixtures: any test, in any folder, asks for them by name.

Test files sit in folders that mirror the package (``core/``, ``wire/``, ``game/``, ...),
end-to-end suites in ``integration/``. Helpers they import live in ``support/`` and the
games they talk to in ``peers/``; pyproject's ``pythonpath`` makes both importable as
top-level modules (``from mcp_harness import connect``, ``from peers.handmade import
HandmadeGame``) from every folder.

Ports: every test's come from the OS (``support/ports.py``), so two runs of the suite on
one machine never meet. The quick subset: ``pytest -m "not slow"`` (README, "Test") leaves
out the tests marked ``@pytest.mark.slow``, those that take most of a second or more; at the
end of a run, a test that took longer than ``SLOW_HINT_S`` unmarked is named, so it can be
marked.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from launch_helpers import LauncherFactory, ProcessGuard
from peers.hostile import Behaviour, HostilePeer

#: A test that takes longer than this (setup, call and teardown) without the ``slow`` marker
#: is named at the end of the run: mark it, so ``-m "not slow"`` stays quick.
SLOW_HINT_S = 2.0
_unmarked_slow: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "slow" not in report.keywords:
        _unmarked_slow[report.nodeid] = _unmarked_slow.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    named = sorted(((took, nodeid) for nodeid, took in _unmarked_slow.items() if took > SLOW_HINT_S), reverse=True)
    if named:
        terminalreporter.section("tests to mark slow")
        terminalreporter.write_line(f"These took over {SLOW_HINT_S:g} s without @pytest.mark.slow, so the quick "
                                    "subset (-m 'not slow') runs them; mark them if they always do:")
        for took, nodeid in named:
            terminalreporter.write_line(f"  {took:6.2f} s  {nodeid}")


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A fresh directory with a short path, removed after the test: for what puts a Unix
    socket in it (Chromium's SingletonSocket under $TMPDIR), whose path may hold 107 bytes;
    ``tmp_path`` is deeper, the more so under pytest-xdist (``.../popen-gw0/...``)."""
    path = Path(tempfile.mkdtemp(prefix="gbt-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


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
