"""One owner for what is known about each port: the GameClient sees every answer, notices a
restart itself, forgets what it learned and starts a new generation, which the Bridge's
manifest cache keys on. And errors carry their causes as fields, not as message text."""

from __future__ import annotations

import copy

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import CommandRejected, GameOffline
from game_bridge_mcp.wire.client import GameClient
from peers import hostile
from peers.fakegame import DEFAULT_MANIFEST, FakeGame


@pytest.fixture
def game() -> FakeGame:
    with FakeGame(hz=500, start_frame=100, health_completed_id=True) as g:
        yield g


def test_a_restart_seen_in_any_answer_starts_a_new_generation(game: FakeGame) -> None:
    client = GameClient(game.port)
    client.health()
    assert client.known.health_has_completed_id is True and client.generation == 0
    assert client.last_frame is not None and client.last_frame >= 100
    client.command_and_sync("noop")
    client.known.health_has_completed_id = True  # learned; a restart must forget it
    game.restart_frames(0)
    client.state()  # the frame went back: a new process
    assert client.generation == 1
    assert client.last_frame is not None and client.last_frame < 100
    assert client.known.health_has_completed_id is None and client.known.applies_between_frames is False
    assert client.frames.period_s is None


def test_forget_starts_a_new_generation_and_clears_the_frame_clock(game: FakeGame) -> None:
    client = GameClient(game.port)
    client.health()
    client.forget()
    assert client.generation == 1 and client.last_frame is None and client.known.health_has_completed_id is None


def test_the_manifest_cache_follows_the_client_generation_through_list_instances(game: FakeGame) -> None:
    bridge = Bridge(Config(port=game.port, scan_range=(game.port,), registry=False, environ={}))
    assert bridge.run_tool("list_toolsets", {})["game"] == DEFAULT_MANIFEST["game"]["name"]
    bridge.run_tool("call_tool", {"name": "get_health"})  # the port's client has seen a frame
    rebuilt = copy.deepcopy(DEFAULT_MANIFEST)
    rebuilt["game"]["name"] = "Rebuilt"
    game.manifest = rebuilt
    game.restart_frames(0)  # a new build on the same port
    # Only discovery talks to the game: its probe goes through the port's own client,
    # which notices the restart, so the cached manifest is not used again.
    (live,) = bridge.run_tool("list_instances", {})["live"]
    assert live["game"] == "Rebuilt"
    assert bridge.run_tool("list_toolsets", {})["game"] == "Rebuilt"


def test_a_manifest_that_changes_is_counted(game: FakeGame) -> None:
    bridge = Bridge(Config(port=game.port, environ={}))
    bridge.manifest(game.port)
    assert bridge.manifest_changes == 0
    bridge.manifest(game.port, refresh=True)
    assert bridge.manifest_changes == 0  # the same document
    changed = copy.deepcopy(DEFAULT_MANIFEST)
    changed["toolsets"][0]["tools"].append({"name": "warp"})
    game.manifest = changed
    bridge.manifest(game.port, refresh=True)
    assert bridge.manifest_changes == 1


@pytest.mark.parametrize("behaviour, cause", [
    (hostile.silent, "timeout"),
    (hostile.reset_before_headers, "reset"),
    (hostile.close_without_answer, "reset"),
], ids=["silent", "rst", "fin"])
def test_game_offline_carries_its_cause(serve: object, behaviour: object, cause: str) -> None:
    peer = serve(behaviour())  # type: ignore[operator]
    with pytest.raises(GameOffline) as info:
        GameClient(peer.port).health(timeout_ms=300)
    assert info.value.cause == cause and info.value.endpoint == "/health"
    assert info.value.to_dict()["cause"] == cause


def test_game_offline_refused_and_an_unknown_cause_is_a_bug() -> None:
    with pytest.raises(GameOffline) as info:
        GameClient(1).health(timeout_ms=300)
    assert info.value.cause == "refused"
    with pytest.raises(ValueError):
        GameOffline(1, cause="sleepy")


def test_a_rejected_command_is_its_own_type_and_reads_as_before(game: FakeGame) -> None:
    with pytest.raises(CommandRejected) as info:
        GameClient(game.port).command("warp")
    assert info.value.render().startswith("BridgeUsageError: The game on port")
    assert info.value.exit_code == 2 and info.value.answer["accepted"] is False
