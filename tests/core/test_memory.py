"""No copy of a large state outlives its call: after a confirmed command on a game whose
``/state`` is megabytes, after ``get_state`` of all of it and after encoding that answer
for stdio, what the Python heap holds is back where it was (traced allocations, not RSS,
which the allocator decides). Against a kit game with a 2 MB state, with and without
``view``."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any, Iterator

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.game import GameBridge
from game_bridge_mcp.game.demo import padding_json
from game_bridge_mcp.mcp_server.results import call_result_chunks
from kit_helpers import looping

pytestmark = pytest.mark.timeout(120)
STATE_KB = 2048
#: What may stay behind (caches, the frame clock's anchors, the events cursor): far below a copy.
SLACK_BYTES = 256 * 1024


@pytest.fixture(params=[True, False], ids=["view", "no-view"])
def game(request: Any) -> Iterator[int]:
    padding = padding_json(STATE_KB)
    kit = GameBridge("Big", "1", state=lambda: {"game": {"n": 1}, "padding": padding}, register=False)
    if not request.param:
        kit._features = [f for f in kit._features if f not in ("view", "after")]

    @kit.command()
    def bump() -> None:
        """Nothing, on the next frame."""

    with looping(kit, hz=120) as port:
        yield port


def held() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


@pytest.mark.slow
def test_a_large_state_is_let_go_when_its_call_ends(game: int) -> None:
    bridge = Bridge(Config(port=game, environ={}, scan=False, registry=False))
    calls = [("call_tool", {"name": "bump"}), ("call_tool", {"name": "get_state"}),
             ("call_tool", {"name": "get_state", "arguments": {"summary": True}}),
             ("call_tool", {"name": "wait_for", "arguments": {"path": "padding.0.id", "equals": 0}})]
    for name, arguments in calls:  # warm: the manifest, the features, first-call allocations
        call_result_chunks(1, [bridge.run_tool(name, arguments)])
    tracemalloc.start()
    try:
        before = held()
        for name, arguments in calls * 2:
            chunks = call_result_chunks(1, [bridge.run_tool(name, arguments)])
            del chunks
            assert held() - before < SLACK_BYTES, (name, arguments)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        bridge.shutdown()
    assert peak - before > STATE_KB * 1024  # the whole state was read (so the test can fail)
