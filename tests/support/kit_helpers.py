"""Helpers for the kit's tests: a kit game on a real loop thread, and plain GETs.

Every thread started here is stopped by the context manager that started it.
"""

from __future__ import annotations

import http.client
import json
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from game_bridge_mcp.game import GameBridge
from game_bridge_mcp.game.demo.fruit import FruitMerge
from game_bridge_mcp.game.demo import build


@contextmanager
def looping(bridge: GameBridge, update: Callable[[], Any] | None = None, *, hz: float = 500.0,
            render: Callable[[], Any] | None = None) -> Iterator[int]:
    """Start ``bridge`` on port 0 and run its loop on a thread; stop both afterwards."""
    port = bridge.start(0)
    loop = threading.Thread(target=bridge.run, args=(update,), kwargs={"hz": hz, "render": render},
                            name="game-loop", daemon=True)
    loop.start()
    try:
        yield port
    finally:
        bridge.request_stop()
        loop.join(5)
        bridge.stop()
        assert not loop.is_alive()


@contextmanager
def demo(seed: int = 7, *, paused: bool = True) -> Iterator[int]:
    """The demo game on the kit, on a real loop thread, a round started, paused."""
    game = FruitMerge(seed)
    kit = build(game, register=False, environ={"GAME_BRIDGE_START_PAUSED": "1"} if paused else {})
    game.new_round()
    with looping(kit, game.update, hz=200, render=game.frame_tick) as port:
        yield port


def fetch(port: int, path: str, timeout: float = 15.0) -> tuple[int, Any]:
    """``GET path`` on a fresh connection: (status, decoded JSON)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def doc(port: int, path: str) -> Any:
    """``GET path``, which must answer 200: its JSON."""
    status, body = fetch(port, path)
    assert status == 200, (path, status, body)
    return body


def command(port: int, query: str) -> int:
    """Queue ``/command?query`` (it must be accepted): its commandId."""
    answer = doc(port, "/command?" + query)
    assert answer["accepted"] is True, answer
    return int(answer["commandId"])


def settled(port: int, query: str, view: str = "") -> dict[str, Any]:
    """Queue a command and return the ``/state`` in which it has completed (held with
    ``after``, so no polling)."""
    command_id = command(port, query)
    state = doc(port, f"/state?after={command_id}&waitMs=10000" + (f"&view={view}" if view else ""))
    assert state["completedCommandId"] >= command_id, state
    return state


def outcome(state: dict[str, Any], command_id: int) -> dict[str, Any]:
    """The ``commandResults`` entry for ``command_id`` (it must be there)."""
    found = [entry for entry in state["commandResults"] if entry["id"] == command_id]
    assert len(found) == 1, (command_id, state["commandResults"])
    return found[0]


class Held:
    """A GET on its own thread, for requests the game holds (``after``)."""

    def __init__(self, port: int, path: str) -> None:
        self.result: tuple[int, Any] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(port, path), daemon=True)
        self._thread.start()

    def _run(self, port: int, path: str) -> None:
        try:
            self.result = fetch(port, path)
        except BaseException as exc:  # reported by join()
            self.error = exc

    @property
    def answered(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout: float) -> tuple[int, Any]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the held request was not answered in time"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result
