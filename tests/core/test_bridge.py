"""The Bridge against a fake game that speaks the contract: resolution, caching,
confirmation, the bridge toolset and composites."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Iterator

import pytest

from peers.fakegame import DEFAULT_MANIFEST, FakeGame
from game_bridge_mcp import Composite
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.config import Config, parse_cli
from game_bridge_mcp.errors import BridgeUsageError, CommandTimeout, GameOffline, NotAGameSurface


@pytest.fixture
def game() -> Iterator[FakeGame]:
    with FakeGame() as g:
        yield g


def bridge_for(game: FakeGame, **kw) -> Bridge:
    return Bridge(Config(port=game.port, environ={}, **kw))


# ---------------------------------------------------------------- port resolution
def test_port_resolution_order() -> None:
    assert Config(environ={}).resolve_port() == 7777
    assert Config(environ={"GAME_BRIDGE_PORT": "7801"}).resolve_port() == 7801
    assert Config(port=7802, environ={"GAME_BRIDGE_PORT": "7801"}).resolve_port() == 7802
    assert Config(port=7802, environ={"GAME_BRIDGE_PORT": "7801"}).resolve_port(7803) == 7803
    assert parse_cli(["-p", "7805"], {"GAME_BRIDGE_PORT": "7801"}).config.resolve_port() == 7805


@pytest.mark.parametrize("bad", [0, 65536, -1, "abc", True, 1.5, [7777]])
def test_bad_port_is_a_usage_error(game: FakeGame, bad: object) -> None:
    with pytest.raises(BridgeUsageError, match="between 1 and 65535|must be of type integer"):
        bridge_for(game).run_tool("list_toolsets", {"port": bad})


def test_port_inside_arguments_and_conflicts(game: FakeGame) -> None:
    b = Bridge(Config(port=1, environ={}))
    assert b.run_tool("call_tool", {"name": "get_health", "arguments": {"port": game.port}})["port"] == game.port
    with pytest.raises(BridgeUsageError, match="two different ports"):
        b.run_tool("call_tool", {"name": "get_health", "port": game.port, "arguments": {"port": game.port + 1}})


# ---------------------------------------------------------------- manifests and caching
def test_manifest_is_cached_and_dropped_when_frame_goes_back() -> None:
    # Far from 0, so the restart to frame 0 is a step back however long the calls take.
    with FakeGame(start_frame=1_000_000) as game:
        _manifest_dropped_on_restart(game)


def _manifest_dropped_on_restart(game: FakeGame) -> None:
    b = bridge_for(game)
    b.run_tool("list_toolsets", {})
    b.run_tool("describe_toolset", {"name": "play"})
    assert game.requests.count("/tools") == 1
    b.run_tool("call_tool", {"name": "drop", "arguments": {"x": 1}})
    game.restart_frames(0)  # a new process on the port
    b.run_tool("call_tool", {"name": "get_health"})
    b.run_tool("list_toolsets", {})
    assert game.requests.count("/tools") == 2


def test_a_name_miss_refetches_once(game: FakeGame) -> None:
    b = bridge_for(game)
    b.run_tool("list_toolsets", {})
    manifest = copy.deepcopy(DEFAULT_MANIFEST)
    manifest["toolsets"][0]["tools"].append({"name": "noop", "description": "Added this afternoon."})
    game.manifest = manifest
    result = b.run_tool("call_tool", {"name": "noop"})
    assert result["via"] == "manifest" and result["applied"] is True
    assert game.requests.count("/tools") == 2
    before = game.requests.count("/tools")
    assert b.run_tool("call_tool", {"name": "hidden_cmd"})["via"] == "passthrough"
    assert game.requests.count("/tools") == before + 1  # one re-fetch for the miss, not more


def test_offline_drops_the_cache() -> None:
    first = FakeGame().start()
    port = first.port
    b = Bridge(Config(port=port, environ={}))
    assert b.run_tool("list_toolsets", {})["game"] == "Fake Game"
    first.stop()
    with pytest.raises(GameOffline):
        b.run_tool("call_tool", {"name": "get_health"})
    manifest = copy.deepcopy(DEFAULT_MANIFEST)
    manifest["game"]["name"] = "Second Game"
    with FakeGame(port=port, manifest=manifest, start_frame=10**6):
        assert b.run_tool("list_toolsets", {})["game"] == "Second Game"


def test_tools_404_uses_the_fallback_and_stays_drivable() -> None:
    with FakeGame(manifest=None) as g:
        b = bridge_for(g)
        listed = b.run_tool("list_toolsets", {})
        assert listed["manifest"] == "fallback" and "raw_command" in listed["note"]
        assert [t["name"] for t in listed["toolsets"]] == ["bridge", "passthrough"]
        r = b.run_tool("call_tool", {"name": "raw_command", "arguments": {"command": "add_score", "args": {"n": 3}}})
        assert r["applied"] is True and r["game"]["score"] == 3


def test_manifest_file_for_a_game_without_tools(tmp_path: Path) -> None:
    doc = copy.deepcopy(DEFAULT_MANIFEST)
    doc["game"]["name"] = "From File"
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with FakeGame(manifest=None, extra_commands=("drop",)) as g:
        b = bridge_for(g, manifest_file=path)
        listed = b.run_tool("list_toolsets", {})
        assert listed["manifest"] == "file" and listed["game"] == "From File"
        assert b.run_tool("call_tool", {"name": "drop", "arguments": {"x": 0}})["via"] == "manifest"


def test_a_broken_tools_document_does_not_take_the_instance_offline(game: FakeGame) -> None:
    def broken(handler) -> None:
        body = b'{"toolsets": [ oops'
        handler.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    game.overrides["/tools"] = broken
    b = bridge_for(game)
    listed = b.run_tool("list_toolsets", {})
    assert listed["manifest"] == "fallback"
    assert "not valid JSON" in json.dumps(listed["diagnostics"])
    assert b.run_tool("call_tool", {"name": "drop", "arguments": {"x": 1}})["applied"] is True


def test_malformed_tools_are_dropped_with_reasons(game: FakeGame) -> None:
    manifest = copy.deepcopy(DEFAULT_MANIFEST)
    manifest["toolsets"][0]["tools"] += [{"description": "no name"}, {"name": "get_state"}, 42]
    game.manifest = manifest
    listed = bridge_for(game).run_tool("list_toolsets", {})
    reasons = [d["reason"] for d in listed["diagnostics"]["dropped"]]
    assert len(reasons) == 3
    assert listed["toolsets"][0]["tools"] == ["drop", "spawn"]


def test_a_game_tool_never_shadows_a_bridge_tool(game: FakeGame) -> None:
    manifest = copy.deepcopy(DEFAULT_MANIFEST)
    manifest["toolsets"][0]["tools"].append({"name": "get_state", "command": "add_score"})
    game.manifest = manifest
    state = bridge_for(game).run_tool("call_tool", {"name": "get_state"})
    assert "ui" in state and game.game["score"] == 0


def test_describe_bridge_passthrough_and_unknown(game: FakeGame) -> None:
    b = bridge_for(game)
    bridge = b.run_tool("describe_toolset", {"name": "bridge"})
    assert {t["name"] for t in bridge["tools"]} == {"get_state", "get_health", "raw_command", "wait_for", "get_screenshot", "advance", "get_events", "save_state", "restore_state", "fork_instance", "list_states", "close"}
    assert all(t["inputSchema"]["type"] == "object" for t in bridge["tools"])
    passthrough = b.run_tool("describe_toolset", {"name": "passthrough"})
    assert passthrough["examples"] == ["add_score { n }"]
    with pytest.raises(BridgeUsageError, match="no toolset 'nope'.*play, flow, bridge, passthrough"):
        b.run_tool("describe_toolset", {"name": "nope"})


# ---------------------------------------------------------------- commands
def test_call_tool_returns_the_world_after_the_command(game: FakeGame) -> None:
    b = bridge_for(game)
    r = b.run_tool("call_tool", {"name": "drop", "arguments": {"x": 1.2}})
    assert r["confirmation"] == "completedCommandId" and r["applied"] is True
    assert r["game"]["score"] == 10 and r["events"][-1] == "drop:1.2"
    assert r["screen"] == "GameScreen" and isinstance(r["commandId"], int)
    assert "pieces" not in r["game"]  # nested arrays stay out of the digest


def test_the_command_key_is_cmd_so_a_name_argument_is_safe(game: FakeGame) -> None:
    r = bridge_for(game).run_tool("call_tool", {"name": "spawn", "arguments": {"type": "cherry", "name": "bob"}})
    assert r["command"] == "spawn_thing" and r["events"][-1] == "spawn:cherry:bob"


def test_frames_advanced_degradation() -> None:
    with FakeGame(publish_completed_id=False) as g:
        r = bridge_for(g).run_tool("call_tool", {"name": "drop", "arguments": {"x": 0}})
        assert r["confirmation"] == "frames-advanced" and r["game"]["score"] == 10


def test_a_command_never_applied_times_out() -> None:
    with FakeGame(apply=False) as g:
        b = bridge_for(g, timeout_ms=300)
        with pytest.raises(CommandTimeout, match="'drop' was queued on port .* not applied within 300ms"):
            b.run_tool("call_tool", {"name": "drop", "arguments": {"x": 0}})


def test_unknown_commands_get_the_list_of_what_is_accepted(game: FakeGame) -> None:
    with pytest.raises(BridgeUsageError) as info:
        bridge_for(game).run_tool("call_tool", {"name": "fly"})
    assert "rejected command 'fly'" in info.value.message
    assert {"drop", "add_score", "wait_for"} <= set(info.value.fields["accepted"])


def test_wrong_argument_types_are_caught_before_the_game(game: FakeGame) -> None:
    b = bridge_for(game)
    with pytest.raises(BridgeUsageError, match="'x' must be of type number"):
        b.run_tool("call_tool", {"name": "drop", "arguments": {"x": "left"}})
    with pytest.raises(BridgeUsageError, match="'x' is required"):
        b.run_tool("call_tool", {"name": "drop"})
    with pytest.raises(BridgeUsageError, match="arguments must be a JSON object|'arguments' must be of type object"):
        b.run_tool("call_tool", {"name": "drop", "arguments": [1]})
    with pytest.raises(BridgeUsageError, match="unknown argument 'bogus'"):
        b.run_tool("list_toolsets", {"bogus": 1})
    assert not any(cmd == "drop" for cmd, _, _ in game.applied)


def test_sync_false_is_not_waited_on(game: FakeGame) -> None:
    r = bridge_for(game).run_tool("call_tool", {"name": "screenshot"})
    assert r["confirmation"] == "not-waited" and r["applied"] is False


def test_close_waits_for_the_port_to_go_quiet() -> None:
    manifest = copy.deepcopy(DEFAULT_MANIFEST)
    manifest["toolsets"][1]["tools"].append({"name": "quit", "command": "close"})
    with FakeGame(manifest=manifest) as g:
        r = bridge_for(g).run_tool("call_tool", {"name": "quit"})
        assert r["closed"] is True and r["confirmation"] == "port-quiet"
        assert g.closed.is_set()


def test_stop_and_log_refuse_ports_this_bridge_did_not_launch(game: FakeGame) -> None:
    b = bridge_for(game)
    with pytest.raises(BridgeUsageError, match="not launched by this bridge.*close"):
        b.run_tool("stop_instance", {})
    with pytest.raises(BridgeUsageError, match="not launched by this bridge"):
        b.run_tool("instance_log", {})
    assert b.run_tool("call_tool", {"name": "get_health"})["ok"] is True


def test_not_a_game_surface(game: FakeGame) -> None:
    game.overrides["/health"] = lambda h: h.send_json(404, {"error": "nope"})
    game.manifest = None
    with pytest.raises(NotAGameSurface, match="GET /health returned HTTP 404"):
        bridge_for(game).run_tool("list_toolsets", {})


def test_game_offline_names_the_launch_hint() -> None:
    b = Bridge(Config(port=1, launch_hint="make run PORT={port}", environ={}))
    with pytest.raises(GameOffline) as info:
        b.run_tool("call_tool", {"name": "get_health"})
    assert info.value.render().startswith("GameOffline: No game is answering on http://127.0.0.1:1.")
    assert "make run PORT=1" in info.value.message


def test_game_offline_from_a_declared_game_points_to_launch_instance_and_its_range(tmp_path: Path) -> None:
    """The default port (7777) is not where a declaration's games go: the hint says so, and names
    launch_instance first, with the range it picks from, before the command to start one by hand."""
    from game_bridge_mcp.launch.declaration import apply_project_config

    (tmp_path / "gamebridge.json").write_text(json.dumps(
        {"launch": {"argv": ["./run", "--port", "{port}"], "portRange": "41000-41009"}}))
    config = apply_project_config(Config(environ={"GAME_BRIDGE_HOME": str(tmp_path / "home")}, scan_range=(1,)),
                                  cwd=tmp_path)
    with pytest.raises(GameOffline) as info:
        Bridge(config).run_tool("call_tool", {"port": 1, "name": "get_health"})
    assert info.value.message.splitlines()[1:3] == [
        "Start one with launch_instance, which picks a free port of 41000-41009 (gamebridge.json's portRange); "
        "or by hand on this port:", "  ./run --port 1"]
    config.launch_hint = "make run PORT={port}"  # the user's own hint is shown as given
    with pytest.raises(GameOffline) as info:
        Bridge(config).run_tool("call_tool", {"port": 1, "name": "get_health"})
    assert info.value.message.splitlines()[1:3] == ["Start one with:", "  make run PORT=1"]


# ---------------------------------------------------------------- bridge toolset
def test_get_state_full_and_summary(game: FakeGame) -> None:
    b = bridge_for(game)
    full = b.run_tool("call_tool", {"name": "get_state"})
    assert full["ui"]["elements"][1]["label"] == "Secret"
    summary = b.run_tool("call_tool", {"name": "get_state", "arguments": {"summary": True}})
    assert summary["elements"] == ["Restart"]
    assert not any(isinstance(v, (list, dict)) for v in summary["game"].values())


def test_wait_for_is_checked_against_the_current_state_first(game: FakeGame) -> None:
    r = bridge_for(game).run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "game.state", "equals": "RUNNING"}})
    assert r["matched"] is True and r["polls"] == 1


def test_wait_for_a_value_a_change_and_an_event(game: FakeGame) -> None:
    b = bridge_for(game)
    b.run_tool("call_tool", {"name": "screenshot"})
    r = b.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "screenshots.taken", "equals": 1, "timeoutMs": 3000}})
    assert r["matched"] is True and r["value"] == 1
    r = b.run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "frame", "changes": True}})
    assert r["matched"] is True and r["value"] != r["initialValue"]
    b.run_tool("call_tool", {"name": "drop", "arguments": {"x": 2}})
    r = b.run_tool("call_tool", {"name": "wait_for", "arguments": {"event": "drop:2"}})
    assert r["matched"] is True and r["value"] == "drop:2"


def test_wait_for_timeout_reports_the_last_value(game: FakeGame) -> None:
    r = bridge_for(game).run_tool("call_tool", {"name": "wait_for", "arguments": {"path": "game.score", "equals": 999, "timeoutMs": 100}})
    assert r["matched"] is False and r["lastValue"] == 0 and r["elapsedMs"] >= 100


@pytest.mark.parametrize("args", [{}, {"path": "a"}, {"path": "a", "equals": 1, "event": "x"}, {"equals": 1}])
def test_wait_for_needs_exactly_one_condition(game: FakeGame, args: dict) -> None:
    with pytest.raises(BridgeUsageError, match="wait_for"):
        bridge_for(game).run_tool("call_tool", {"name": "wait_for", "arguments": args})


# ---------------------------------------------------------------- composites
def _drop_and_settle(ctx) -> dict:
    before = ctx.state()
    ctx.command_and_sync("drop", {"x": ctx.args["x"]})
    settled = ctx.call("wait_for", {"path": "game.moving", "equals": 0, "timeoutMs": 5000})
    after = ctx.state()
    return {"settled": settled["matched"], "scoreDelta": after["game"]["score"] - before["game"]["score"]}


SETTLE = Composite(name="drop_and_settle", description="Drop at x and wait until nothing moves.",
                   only="Fake Game", args=[{"name": "x", "type": "number", "required": True}], run=_drop_and_settle)


def test_composite_runs_and_is_listed(game: FakeGame) -> None:
    b = Bridge(Config(port=game.port, environ={}), composites=[SETTLE])
    assert "drop_and_settle" in b.run_tool("list_toolsets", {})["toolsets"][-2]["tools"]
    r = b.run_tool("call_tool", {"name": "drop_and_settle", "arguments": {"x": 1}})
    assert r == {"port": game.port, "tool": "drop_and_settle", "via": "composite", "settled": True, "scoreDelta": 10}


def test_composite_shadows_a_game_command_and_only_limits_it(game: FakeGame) -> None:
    shadow = Composite(name="drop", description="A better drop.", only=["Fake Game"], run=lambda ctx: {"shadowed": True})
    b = Bridge(Config(port=game.port, environ={}), composites=[shadow])
    assert b.run_tool("call_tool", {"name": "drop", "arguments": {"x": 1}})["shadowed"] is True
    other = Composite(name="drop", description="For another game.", only="Flight Sim", run=lambda ctx: {"shadowed": True})
    b2 = Bridge(Config(port=game.port, environ={}), composites=[other])
    assert b2.run_tool("call_tool", {"name": "drop", "arguments": {"x": 1}})["via"] == "manifest"
    assert "drop" not in b2.run_tool("describe_toolset", {"name": "bridge"})["tools"]


def test_a_composite_that_raises_becomes_a_structured_error(game: FakeGame) -> None:
    boom = Composite(name="boom", description="Fails.", run=lambda ctx: 1 / 0)
    b = Bridge(Config(port=game.port, environ={}), composites=[boom])
    with pytest.raises(BridgeUsageError, match="Composite 'boom' failed.*ZeroDivisionError"):
        b.run_tool("call_tool", {"name": "boom"})
    assert b.run_tool("call_tool", {"name": "get_health"})["ok"] is True


def test_a_composite_may_not_hide_a_bridge_tool() -> None:
    with pytest.raises(BridgeUsageError, match="would hide a bridge tool"):
        Bridge(Config(environ={}), composites=[Composite(name="get_state", description="", run=lambda c: 1)])


@pytest.mark.parametrize("tool,args", [
    ("call_tool", {"name": "close", "arguments": {"graceMs": 10**9}}),
    ("call_tool", {"name": "raw_command", "arguments": {"command": "noop", "timeoutMs": 10**12}}),
    ("call_tool", {"name": "wait_for", "arguments": {"event": "x", "timeoutMs": 10**9}}),
    ("stop_instance", {"graceMs": 10**9}),
])
def test_waits_are_bounded(game: FakeGame, tool: str, args: dict) -> None:
    """A worker thread cannot be cancelled: no argument may make it wait for ever."""
    with pytest.raises(BridgeUsageError, match="between"):
        bridge_for(game).run_tool(tool, args)
    assert not game.closed.is_set()
