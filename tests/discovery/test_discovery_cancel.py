"""A cancelled ``list_instances`` ends its probes too: the probe threads run as part of
the call, so games that accept a connection and never answer do not hold the cancelled
call for the whole probe deadline. Real listening sockets that never answer."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Iterator

import pytest

from game_bridge_mcp import polling
from game_bridge_mcp.config import Config
from game_bridge_mcp.discovery.report import discover
from peers.fakegame import wait_until

pytestmark = pytest.mark.timeout(60)

PROBE_TIMEOUT_MS = 20_000


class SilentGame:
    """Accepts connections, reads what is sent, never answers; counts the requests."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.held.append(conn)
            try:
                if conn.recv(4096).startswith(b"GET "):
                    self.requests += 1
            except OSError:
                continue

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not)
        except OSError:
            pass
        self.sock.close()
        for conn in self.held:
            conn.close()
        self.thread.join(5)
        assert not self.thread.is_alive()


@pytest.fixture
def silent_games() -> Iterator[list[SilentGame]]:
    games = [SilentGame(), SilentGame()]
    try:
        yield games
    finally:
        for game in games:
            game.close()


def test_cancelling_the_call_ends_the_probes_of_silent_ports(silent_games: list[SilentGame], tmp_path: Any) -> None:
    config = Config(environ={"GAME_BRIDGE_HOME": str(tmp_path)}, scan=True, registry=False,
                    scan_range=tuple(g.port for g in silent_games))
    token = polling.CancelToken()
    outcome: list[BaseException | dict] = []

    def call() -> None:
        with polling.cancel_scope(token):
            try:
                outcome.append(discover(config, use_registry=False, probe_timeout_ms=PROBE_TIMEOUT_MS))
            except BaseException as exc:  # noqa: BLE001 - the test looks at what ended it
                outcome.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=call)
    thread.start()
    wait_until(lambda: all(g.requests for g in silent_games), timeout=10)  # both probes in flight
    token.cancel()
    thread.join(PROBE_TIMEOUT_MS / 1000 / 2)
    ended_after = time.monotonic() - started
    assert not thread.is_alive(), "the cancelled call still waits on its probes"
    assert ended_after < PROBE_TIMEOUT_MS / 1000 / 2
    assert len(outcome) == 1 and isinstance(outcome[0], polling.Cancelled), outcome
