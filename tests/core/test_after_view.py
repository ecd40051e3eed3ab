"""The bridge's use of ``after`` and ``view`` (docs/contract.md), counted by the game.

Against the hand-made reference game (written from docs/contract.md alone) and the kit: a game
that advertises ``after`` is sent the command and ONE held ``/state?after=<id>``; one that
advertises ``view`` is asked for ``view=digest`` wherever the digest is all that is
needed; a game that advertises neither is never sent either parameter. A game that lies
about ``after`` (answers at once, or holds for all of ``waitMs``) is still confirmed
correctly, within the call's deadline, and is polled from then on.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import CommandTimeout
from game_bridge_mcp.game import GameBridge
from game_bridge_mcp.wire.client import GameClient
from kit_helpers import looping
from loop_helpers import bridge_for
from peers.handmade import HandmadeGame

pytestmark = pytest.mark.timeout(60)
#: A hang guard, not a stopwatch: what the game was asked (its requests) says whether the
#: bridge waited for the whole deadline; this only stops a test that hangs.
BOUND_S = 10.0


def call(bridge: Bridge, name: str, **arguments: Any) -> dict[str, Any]:
    return bridge.run_tool("call_tool", {"name": name, "arguments": arguments})


def paths_since(game: HandmadeGame, mark: int) -> list[str]:
    return list(game.requests[mark:])


def parameters(paths: list[str]) -> set[str]:
    found = set()
    for path in paths:
        _, _, query = path.partition("?")
        found |= {pair.split("=", 1)[0] for pair in query.split("&") if pair}
    return found


# ------------------------------------------------------------------ the hand-made game
def test_with_after_and_view_a_call_is_one_command_and_one_held_digest() -> None:
    with HandmadeGame(hz=100) as game:
        bridge = bridge_for(game.port)
        call(bridge, "noop")  # learns the manifest and the features
        for dx in (1, 2, -1):
            mark = len(game.requests)
            result = call(bridge, "move", dx=dx)
            assert result["confirmation"] == "completedCommandId" and result["applied"] is True
            paths = paths_since(game, mark)
            command_id = result["commandId"]
            assert len(paths) == 2, paths
            assert paths[0].startswith("/command?cmd=move")
            assert paths[1].startswith(f"/state?after={command_id}&waitMs=") and paths[1].endswith("&view=digest")
            wait_ms = int(paths[1].split("waitMs=")[1].split("&")[0])
            assert 0 < wait_ms <= 5000  # what is left of the default 5 s deadline, at most 10000
        assert result["game"]["x"] == 2  # the digest of the state after the command


def test_a_slow_command_is_held_once_not_polled() -> None:
    with HandmadeGame(hz=100) as game:
        bridge = bridge_for(game.port)
        call(bridge, "noop")
        mark = len(game.requests)
        started_sim = game.sim_frame
        result = call(bridge, "step", frames=25)  # completes 25 frames (about 250 ms) later
        paths = paths_since(game, mark)
        assert result["confirmation"] == "completedCommandId"
        assert [p.split("?")[0] for p in paths] == ["/command", "/state"], paths
        assert game.sim_frame >= started_sim + 25 and game.completed >= result["commandId"]


def test_a_game_without_the_features_is_never_sent_their_parameters() -> None:
    with HandmadeGame(hz=100, features=()) as game:
        bridge = bridge_for(game.port)
        for dx in (1, 1, -1):
            assert call(bridge, "move", dx=dx)["confirmation"] == "completedCommandId"
        bridge.run_tool("call_tool", {"name": "get_state", "arguments": {"summary": True}})
        bridge.run_tool("call_tool", {"name": "get_state"})
        bridge.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "game.x", "equals": 1}})
        bridge.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "frame", "changes": True}})
        assert parameters(list(game.requests)) & {"after", "waitMs", "view"} == set()
        assert any(p.startswith("/health") for p in game.requests)  # it was polled instead


@pytest.mark.parametrize("features, expect", [
    ({"after"}, {"after", "waitMs"}),
    ({"view"}, {"view"}),
])
def test_each_feature_is_used_only_when_advertised(features: set[str], expect: set[str]) -> None:
    with HandmadeGame(hz=100, features=features) as game:
        bridge = bridge_for(game.port)
        for _ in range(3):
            assert call(bridge, "noop")["confirmation"] == "completedCommandId"
        sent = parameters(list(game.requests)) - {"cmd"}
        assert sent == expect, game.requests


def test_get_state_summary_and_wait_for_ask_for_the_digest_when_it_is_enough() -> None:
    with HandmadeGame(hz=100) as game:
        bridge = bridge_for(game.port)
        mark = len(game.requests)
        summary = bridge.run_tool("call_tool", {"name": "get_state", "arguments": {"summary": True}})
        assert summary["game"]["x"] == 0 and "extra" not in summary
        full = bridge.run_tool("call_tool", {"name": "get_state"})
        assert full["extra"] == {"note": "only in the full state"}  # the whole state
        assert [p for p in paths_since(game, mark) if p.startswith("/state")] == ["/state?view=digest", "/state"]

        mark = len(game.requests)
        assert bridge.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "game.x", "equals": 0}})["matched"]
        assert bridge.run_tool("call_tool", {"name": "wait_for",
                                             "arguments": {"path": "ui.screen", "equals": "PlayScreen"}})["matched"]
        assert all(p == "/state?view=digest" for p in paths_since(game, mark) if p.startswith("/state"))

        mark = len(game.requests)  # not in the digest: a nested value, and a key outside it
        assert bridge.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "game.meta.seed", "equals": 7}})["matched"]
        assert bridge.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "extra.note",
                                                                               "equals": "only in the full state"}})["matched"]
        assert bridge.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "game.board", "changes": True,
                                                                               "timeoutMs": 50}})["matched"] is False
        states = [p for p in paths_since(game, mark) if p.startswith("/state")]
        # Two whole states; then game.board: a digest first (a game.<key> may be a scalar), which
        # lacks it (a list), so the whole state from then on.
        assert states[:4] == ["/state", "/state", "/state?view=digest", "/state"], states
        assert all(p == "/state" for p in states[3:]), states


def test_until_reads_the_digest_when_it_answers_the_condition() -> None:
    with HandmadeGame(hz=100) as game:
        bridge = bridge_for(game.port)
        call(bridge, "noop")
        mark = len(game.requests)
        result = bridge.run_tool("call_tool", {"name": "move", "arguments": {"dx": 2},
                                               "until": {"path": "game.x", "equals": 2}})
        assert result["settled"] is True and result["game"]["x"] == 2
        states = [p for p in paths_since(game, mark) if p.startswith("/state")]
        assert states and all(p.endswith("view=digest") for p in states), states

        mark = len(game.requests)  # a nested path: the whole state, confirmation included
        result = bridge.run_tool("call_tool", {"name": "move", "arguments": {"dx": 1},
                                               "until": {"path": "game.meta.seed", "equals": 7}})
        assert result["settled"] is True
        states = [p for p in paths_since(game, mark) if p.startswith("/state")]
        assert states and not any("view=" in p for p in states), states


def test_a_game_whose_after_answers_at_once_is_confirmed_then_polled() -> None:
    with HandmadeGame(hz=60, lies={"after-ignored"}) as game:
        bridge = bridge_for(game.port)
        call(bridge, "noop")
        results = [call(bridge, "move", dx=1) for _ in range(3)]
        assert [r["game"]["x"] for r in results] == [1, 2, 3]  # each confirmed after it was applied
        assert all(r["confirmation"] == "completedCommandId" for r in results)
        client = bridge.client(game.port)
        assert "after" in client.known.broken_features and not client.uses("after")
        mark = len(game.requests)
        call(bridge, "move", dx=1)
        assert "after" not in parameters(paths_since(game, mark))  # polled now


@pytest.mark.slow
def test_a_game_whose_after_holds_for_all_of_wait_ms_is_confirmed_within_the_deadline() -> None:
    with HandmadeGame(hz=100, lies={"after-hangs"}) as game:
        bridge = bridge_for(game.port)
        call(bridge, "noop")
        mark = len(game.requests)
        started = time.monotonic()
        result = bridge.run_tool("call_tool", {"name": "raw_command",
                                               "arguments": {"command": "move", "args": {"dx": 2}, "timeoutMs": 1200}})
        elapsed = time.monotonic() - started
        assert result["confirmation"] == "completedCommandId" and result["game"]["x"] == 2
        # Confirmed, so inside its deadline (past it, the call is a CommandTimeout): the first
        # call caught the hold, and this one polled instead of asking for another.
        assert "after" not in parameters(paths_since(game, mark))
        assert elapsed < 1.2 + BOUND_S
        client = bridge.client(game.port)
        assert "after" in client.known.broken_features
        mark = len(game.requests)
        started = time.monotonic()
        assert call(bridge, "move", dx=-1)["game"]["x"] == 1
        assert "after" not in parameters(paths_since(game, mark))  # polled now: no second long hold
        assert time.monotonic() - started < BOUND_S


def test_a_digest_without_completed_command_id_is_not_trusted() -> None:
    with HandmadeGame(hz=100, features={"view", "results"}, lies={"view-drops"}) as game:
        bridge = bridge_for(game.port)
        results = [call(bridge, "move", dx=1) for _ in range(3)]
        assert all(r["confirmation"] == "completedCommandId" for r in results)
        assert results[-1]["game"]["x"] == 3  # from the whole state, not the lying digest
        assert "view" in bridge.client(game.port).known.broken_features


def test_a_restart_forgets_the_features_and_what_was_caught() -> None:
    with HandmadeGame(hz=100, lies={"after-ignored"}) as game:
        client = GameClient(game.port)
        client.command_and_sync("noop")
        assert client.features is not None and "after" in client.features
        assert "after" in client.known.broken_features
        with game.lock:
            game.frame = 0  # a new process, as the bridge sees it
        client.state()
        assert client.features is None and client.known.broken_features == set()


def test_the_deadline_holds_when_the_command_never_completes() -> None:
    with HandmadeGame(hz=100) as game:
        client = GameClient(game.port)
        client.command("step", {"frames": 10000})  # holds every command behind it for 100 s
        started = time.monotonic()
        with pytest.raises(CommandTimeout):
            client.command_and_sync("noop", timeout_ms=400)
        assert time.monotonic() - started < 0.4 + BOUND_S
        assert any(p.startswith("/state?after=") for p in game.requests)


# ------------------------------------------------------------------ the kit
class CountedGame(GameBridge):
    """The kit, recording every path and query it serves."""

    seen: list[str]

    def _route(self, path: str, query: str) -> Any:
        self.seen.append(path + ("?" + query if query else ""))
        return super()._route(path, query)


@pytest.fixture
def kit_game() -> Iterator[tuple[GameBridge, list[str]]]:
    game = CountedGame("Counted", "1", state=lambda: {"game": {"n": 1, "big": list(range(1000))}}, register=False)
    game.seen = []

    @game.command()
    def bump() -> None:
        """Nothing, on the next frame."""

    with looping(game, hz=200):
        yield game, game.seen


def test_the_kit_is_driven_with_after_and_view(kit_game: tuple[GameBridge, list[str]]) -> None:
    game, seen = kit_game
    bridge = bridge_for(int(game.port or 0))
    assert call(bridge, "bump")["game"] == {"n": 1}  # the digest's scalars (the list stays out)
    mark = len(seen)
    result = call(bridge, "bump")
    assert result["confirmation"] == "completedCommandId" and result["game"] == {"n": 1}  # whole, unchanged
    paths = seen[mark:]
    assert len(paths) == 2 and paths[0].startswith("/command?cmd=bump")
    assert paths[1].startswith(f"/state?after={result['commandId']}&waitMs=") and paths[1].endswith("view=digest")
