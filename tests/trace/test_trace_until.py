"""Every argument a call carried is recorded and replayed: a session played the recommended
way (``call_tool drop {x} until {game.moving == 0}``, over the real MCP client, against the
demo launched from a declaration) replays with no divergence; a version-1 trace (no
``options``) still replays; a call line whose options this bridge does not know is
refused with the option named; and the pytest driver's ``call`` takes ``until``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.cli.replay import main as replay_main
from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.testing import GameDriver
from game_bridge_mcp.trace.format import VERSION
from game_bridge_mcp.trace.reader import read_trace
from game_bridge_mcp.trace.recorder import canonical_call
from launch_helpers import ProcessGuard, declaration
from loop_helpers import bridge_for, demo_game
from mcp_harness import connect, data

pytestmark = pytest.mark.timeout(120)

SETTLED = {"path": "game.moving", "equals": 0, "timeoutMs": 15000}


def record(tmp_path: Path, guard: ProcessGuard) -> tuple[Path, Path, dict[str, str]]:
    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    decl = declaration(tmp_path / "project")
    trace = tmp_path / "until.trace"
    config = Config(environ=env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(decl), record=trace)
    bridge = Bridge(config)

    async def agent() -> None:
        async with connect(BridgeServer(bridge)) as client:
            port = data(await client.call_tool("launch_instance", {}))["port"]

            async def play(name: str, arguments: dict[str, Any], **top: Any) -> Any:
                return data(await client.call_tool("call_tool", {"port": port, "name": name,
                                                                 "arguments": arguments, **top}))

            await play("click", {"label": "Start"})
            for x in (0, 0, 1):
                answer = await play("drop", {"x": x}, until=SETTLED)
                assert answer["settled"] is True
            await client.call_tool("stop_instance", {"port": port})
    try:
        anyio.run(agent)
    finally:
        bridge.shutdown()
    return trace, decl, env


def replay(trace: Path, decl: Path, env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = replay_main([str(trace), "--launch", "--config", str(decl)], stdout=out, stderr=err, environ=env)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_a_session_played_with_until_replays_as_recorded(tmp_path: Path, guard: ProcessGuard) -> None:
    trace, decl, env = record(tmp_path, guard)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert lines[0]["version"] == VERSION == 2
    drops = [line for line in lines[1:] if line.get("name") == "drop"]
    assert len(drops) == 3 and all(line["options"] == {"until": SETTLED} for line in drops)
    assert all(line["arguments"].keys() == {"x"} for line in drops)
    assert read_trace(trace).calls[2].label().endswith(f"until {json.dumps(SETTLED, sort_keys=True)}")
    code, out, err = replay(trace, decl, env)
    assert code == 0, out + err
    assert "DIVERGED" not in out
    # A version-1 trace (recorded before options were) replays as it always did.
    old = tmp_path / "old.trace"
    head = dict(lines[0], version=1)
    kept = [line for line in lines[1:] if line.get("name") != "drop"]
    old.write_text("".join(json.dumps(line) + "\n" for line in [head] + kept))
    assert read_trace(old).header["version"] == 1
    code, out, err = replay(old, decl, env)
    assert code == 0, out + err


def test_the_recorder_keeps_every_argument_of_call_tool() -> None:
    name, port, args, options = canonical_call("call_tool", {
        "name": "drop", "port": 7820, "arguments": {"x": 1, "port": 7820}, "until": {"event": "merge"},
        "later": True})
    assert (name, port, args) == ("drop", 7820, {"x": 1})
    assert options == {"until": {"event": "merge"}, "later": True}
    assert canonical_call("get_state", {"port": 1, "summary": True}) == (None, 1, {"summary": True}, {})


def test_a_call_line_with_options_this_bridge_does_not_know_is_refused_naming_it(tmp_path: Path) -> None:
    from test_trace_file import call_line, write_lines
    from game_bridge_mcp.trace.format import header

    path = write_lines(tmp_path / "t.trace", [header("serve", "1"), call_line(options={"untill": {}})])
    with pytest.raises(BridgeUsageError) as info:
        read_trace(path)
    assert "'untill'" in info.value.message and "line 2" in info.value.message
    bad = write_lines(tmp_path / "u.trace", [header("serve", "1"), call_line(options=[1])])
    with pytest.raises(BridgeUsageError, match="options are not a JSON object"):
        read_trace(bad)
    # Fields of the line itself that this version does not know are kept and ignored.
    fine = write_lines(tmp_path / "f.trace", [header("serve", "1"), call_line(future={"a": 1})])
    assert read_trace(fine).calls[0].record["future"] == {"a": 1}


def test_the_driver_waits_with_until() -> None:
    with demo_game() as (port, _game):
        bridge = bridge_for(port)
        try:
            game = GameDriver(bridge, port)
            settled = game.call("drop", {"x": 0}, until={"path": "game.moving", "equals": 0})
            assert settled["settled"] is True and settled["game"]["moving"] == 0
            again = game.drop(x=0, until={"path": "game.moving", "equals": 0})
            assert again["settled"] is True and again["game"]["merges"] == 1
            advanced = game.advance(until={"path": "game.moving", "equals": 0})  # advance's own until
            assert advanced["tool"] == "advance" and advanced["matched"] is True
        finally:
            bridge.shutdown()

