"""Smaller holes: a passthrough call does not re-fetch ``/tools`` every
time, an argument too long for a URL is the caller's error before anything is sent, and
``--eager`` does not keep re-reading a manifest that does not change.

The game counts its requests (``FakeGame.requests``), so each test says what reached it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.manifest.choose import RecentMisses
from game_bridge_mcp.mcp_server.adapter import EAGER_MAX_REREAD_S, BridgeServer
from game_bridge_mcp.wire.client import MAX_COMMAND_URL
from peers.fakegame import DEFAULT_MANIFEST, FakeGame

pytestmark = pytest.mark.timeout(60)


def bridge_for(port: int, **kw: Any) -> Bridge:
    return Bridge(Config(port=port, environ={}, scan_range=(port,), registry=False, **kw))


def tools_fetches(game: FakeGame) -> int:
    return sum(1 for path in game.requests if path == "/tools")


def test_passthrough_calls_do_not_refetch_the_manifest_every_time() -> None:
    with FakeGame() as game:
        bridge = bridge_for(game.port)
        for _ in range(6):  # add_score is not in the manifest: every call is a miss
            assert bridge.run_tool("call_tool", {"name": "add_score", "arguments": {"n": 1}})["via"] == "passthrough"
        assert tools_fetches(game) == 2  # the first read, and one re-fetch for the miss
        for _ in range(3):
            try:
                bridge.run_tool("describe_toolset", {"name": "nope"})
            except BridgeUsageError:
                pass
        assert tools_fetches(game) == 3  # a toolset that misses: one re-fetch, then remembered


def test_a_miss_is_remembered_briefly_and_for_one_generation_only() -> None:
    now = [100.0]
    misses = RecentMisses(clock=lambda: now[0])
    misses.remember("teleport", 0)
    assert misses.recent("teleport", 0) and not misses.recent("other", 0)
    assert not misses.recent("teleport", 1)  # the game restarted: it may have the name now
    now[0] += RecentMisses.MISS_TTL_S
    assert not misses.recent("teleport", 0)  # a rebuild may have added it: look again


def test_a_name_added_by_a_rebuild_is_found_after_the_miss_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGame() as game:
        bridge = bridge_for(game.port)
        bridge.run_tool("call_tool", {"name": "add_score"})
        manifest = copy.deepcopy(DEFAULT_MANIFEST)
        manifest["toolsets"][0]["tools"].append({"name": "add_score", "description": "Now listed."})
        game.manifest = manifest
        assert bridge.run_tool("call_tool", {"name": "add_score"})["via"] == "passthrough"  # remembered miss
        monkeypatch.setattr(RecentMisses, "MISS_TTL_S", 0.0)
        assert bridge.run_tool("call_tool", {"name": "add_score"}).get("via", "manifest") == "manifest"  # (via is said only when it is not the manifest)


def test_an_argument_too_long_for_a_url_is_refused_before_anything_is_sent() -> None:
    with FakeGame() as game:
        bridge = bridge_for(game.port)
        with pytest.raises(BridgeUsageError) as info:
            bridge.run_tool("call_tool", {"name": "add_score", "arguments": {"n": "9" * MAX_COMMAND_URL}})
        assert "URL" in info.value.message and "nothing was sent" in info.value.message
        assert "/command" not in game.requests
        assert bridge.run_tool("call_tool", {"name": "add_score", "arguments": {"n": "9" * 100}})["applied"] is True


def test_eager_rereads_an_unchanged_manifest_less_and_less_often() -> None:
    with FakeGame() as game:
        app = BridgeServer(bridge_for(game.port, eager=True))
        now = [1000.0]
        app.clock = lambda: now[0]
        app._eager_tool_list()
        start = tools_fetches(game)
        rereads = []
        for _ in range(60):  # two minutes of 2 s refresh cycles, nothing changing
            before = tools_fetches(game)
            app.refresh_eager()
            if tools_fetches(game) > before:
                rereads.append(now[0])
            now[0] += 2.0
        assert tools_fetches(game) - start <= 8, tools_fetches(game) - start  # not 60
        gaps = [b - a for a, b in zip(rereads, rereads[1:])]
        assert gaps == sorted(gaps) and max(gaps) <= EAGER_MAX_REREAD_S
        # A change is still found at the next re-read, and re-reads are frequent again.
        manifest = copy.deepcopy(DEFAULT_MANIFEST)
        manifest["toolsets"][0]["tools"].append({"name": "rebuilt", "description": "new"})
        game.manifest = manifest
        now[0] += EAGER_MAX_REREAD_S
        changes = app.bridge.manifest_changes
        app.refresh_eager()
        assert app.bridge.manifest_changes == changes + 1  # announced with list_changed
        assert f"p{game.port}_rebuilt" in [tool.name for tool in app._eager_tool_list()]
