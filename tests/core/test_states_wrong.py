"""States against what goes wrong on the other side: a game that answers ``snapshot``
wrongly, a game that ran on its own clock for long, a state file written by hand. Each is a
clear error or an honest ``exact: false``, nothing is left running that should not be, and
the bridge goes on serving (test_states.py has the plain bad input of docs/states.md)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from launch_helpers import ProcessGuard
from mcp_harness import data, is_error, text
from test_states import HANDMADE, PYGAME_RANDOM, bridge_for, call, run, whole

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_a_game_that_ran_free_past_one_steps_worth_is_re_executed_to_its_frame(tmp_path: Path,
                                                                              guard: ProcessGuard) -> None:
    """A game's step takes at most 10,000 frames: a stretch it ran on its own clock that is
    longer (resume, then pause) is stepped again in pieces, not in one step it refuses."""
    bridge = bridge_for(tmp_path, guard, HANDMADE + ["--features", "results,after,clock", "--hz", "8000"])

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "move", port, dx=2)
        await call(client, "advance", port, frames=2)
        await call(client, "resume", port)
        deadline = time.monotonic() + 60
        while data(await call(client, "get_state", port, path="simFrame"))["value"] < 10_200:
            assert time.monotonic() < deadline, "the game did not run 10,200 frames in 60 s"
            await anyio.sleep(0.05)
        await call(client, "pause", port)
        saved = data(await call(client, "save_state", port))
        assert saved["how"] == "re-execution" and saved["simFrame"] > 10_200, saved
        assert saved["exact"] is False and "own clock" in saved["note"]  # said, not hidden
        forked = await call(client, "fork_instance", state=saved["state"])
        assert not is_error(forked), text(forked)
        forked = data(forked)
        assert forked["simFrame"] == saved["simFrame"] and forked["game"]["x"] == 2, forked
        assert forked["exact"] is True, forked  # the hand-made game's future is its commands alone

    run(bridge, body)


def test_a_fork_by_snapshot_keeps_the_note_that_its_past_ran_on_its_own_clock(tmp_path: Path,
                                                                              guard: ProcessGuard) -> None:
    """The fork's journal continues the state's, free run included, as a restore's does: a
    later re-execution of what the fork saves says it may not come back exact."""
    bridge = bridge_for(tmp_path, guard, HANDMADE)

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "advance", port, frames=3)
        await call(client, "resume", port)
        await call(client, "advance", port, frames=2)  # (a running game: frames pass, at least these)
        await call(client, "pause", port)
        saved = data(await call(client, "save_state", port))
        assert saved["how"] == "snapshot", saved
        free_since = bridge.instance(port).journal.free_since  # type: ignore[union-attr]
        assert free_since is not None
        forked = data(await call(client, "fork_instance", state=saved["state"]))
        assert forked["how"] == "snapshot" and forked["exact"] is True, forked
        assert bridge.instance(forked["port"]).journal.free_since == free_since  # type: ignore[union-attr]
        restored = data(await call(client, "restore_state", port, state=saved["state"]))
        assert restored["exact"] is True
        assert bridge.instance(port).journal.free_since == free_since  # type: ignore[union-attr]

    run(bridge, body)


# --------------------------------------------------------------------------- a game that answers snapshot wrongly

def wrong(tmp_path: Path, guard: ProcessGuard, lie: str) -> Any:
    return bridge_for(tmp_path, guard, HANDMADE + ["--lie", lie])


def test_a_load_that_does_not_give_the_frame_back_is_not_exact(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = wrong(tmp_path, guard, "snapshot-load-partial")

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "move", port, dx=1)
        await call(client, "advance", port, frames=3)
        saved = data(await call(client, "save_state", port))
        await call(client, "advance", port, frames=4)
        restored = data(await call(client, "restore_state", port, state=saved["state"]))
        assert restored["exact"] is False and restored["differed"] == ["simFrame: 3 -> 7"], restored
        assert "does not come back the same" in restored["note"]
        assert data(await call(client, "get_state", port))["game"]["x"] == 1  # and it goes on serving

    run(bridge, body)


@pytest.mark.parametrize("lie,fragment", [
    ("snapshot-save-bad-id", "snapshot_save's result has no id of 1-64 [A-Za-z0-9._-]"),
])
def test_a_save_answered_wrongly_is_a_clear_error(tmp_path: Path, guard: ProcessGuard, lie: str,
                                                  fragment: str) -> None:
    bridge = wrong(tmp_path, guard, lie)

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        result = await call(client, "save_state", port)
        assert is_error(result) and text(result).startswith("NotAGameSurface") and fragment in text(result), \
            text(result)
        assert data(await call(client, "list_states"))["count"] == 0
        assert data(await call(client, "get_state", port))["simFrame"] == 0

    run(bridge, body)


@pytest.mark.parametrize("lie,fragment", [
    ("snapshot-get-junk", "refused the state's bytes as not bytes it can load (HTTP 400: not a Handmade snapshot"),
    ("snapshot-post-no-id", "answered POST /snapshot without an id"),
])
def test_a_fork_whose_bytes_do_not_go_back_leaves_nothing_running(tmp_path: Path, guard: ProcessGuard, lie: str,
                                                                  fragment: str) -> None:
    """The bytes the game sent are not ones it takes back (or it takes them without saying
    where): the fork fails saying so, its instance is stopped, the parent is untouched."""
    bridge = wrong(tmp_path, guard, lie)

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "move", port, dx=-2)
        await call(client, "advance", port, frames=2)
        saved = data(await call(client, "save_state", port))
        before = data(await call(client, "get_state", port))
        result = await call(client, "fork_instance", state=saved["state"])
        assert is_error(result) and fragment in text(result), text(result)
        assert bridge.launched_ports() == [port]
        assert whole(data(await call(client, "get_state", port))) == whole(before)
        restored = data(await call(client, "restore_state", port, state=saved["state"]))  # its live copy still works
        assert restored["exact"] is True and restored["how"] == "snapshot"

    run(bridge, body)


# --------------------------------------------------------------------------- another bridge, another environment

def test_a_kept_state_forks_alike_under_a_bridge_whose_environment_says_another_seed(tmp_path: Path,
                                                                                    guard: ProcessGuard) -> None:
    """A paused launch fixes the seed it got (here none: 0) with its record, and a fork of its
    kept state repeats it: a tester whose shell sets GAME_BRIDGE_SEED=9 gets the same game,
    where the fork would otherwise be launched with seed 9 (another build, to the bridge)."""
    pytest.importorskip("pygame")
    from dataclasses import replace

    from game_bridge_mcp.core.bridge import Bridge

    bridge = bridge_for(tmp_path, guard, PYGAME_RANDOM)
    kept: dict[str, Any] = {}

    async def play(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "advance", port, frames=20, inputs=[{"at": 2, "key": "right", "frames": 6}])
        kept.update(data(await call(client, "save_state", port, keep=True)))
        kept["state"] = whole(data(await call(client, "get_state", port)))

    run(bridge, play)
    tester = Bridge(replace(bridge.config, environ={**bridge.config.environ, "GAME_BRIDGE_SEED": "9"}))

    async def fork(client: Any) -> None:
        forked = await call(client, "fork_instance", file=kept["file"])
        assert not is_error(forked), text(forked)
        assert data(forked)["exact"] is True and data(forked)["simFrame"] == kept["simFrame"] == 21, data(forked)
        assert whole(data(await call(client, "get_state", data(forked)["port"]))) == kept["state"]
        assert "seed 0" in data(await client.call_tool("list_instances", {}))["live"][0]["version"]

    run(tester, fork)


# --------------------------------------------------------------------------- a step cut short

SLOW_GAME = """
import sys, time
from game_bridge_mcp.game import GameBridge

world = {"x": 0, "sum": 0}
bridge = GameBridge("Slow", "1", clock=True, register=False, snapshot=False, state=lambda: {"game": dict(world)})


@bridge.command
def push(x: int) -> None:
    world["x"] += x


def update() -> None:
    world["sum"] += world["x"]
    time.sleep(0.002)


bridge.start(int(sys.argv[1]))
bridge.run(update, hz=500)
"""

def test_an_advance_cancelled_mid_step_is_re_executed_as_far_as_it_ran(tmp_path: Path, guard: ProcessGuard) -> None:
    """A cancelled advance's pause ends the game's step where it is (issue 38): its record says
    step 10000 then pause, and re-execution steps as far as the game was next seen, not 10000
    frames past it. A kit game without its own snapshot, each frame of which takes 2 ms."""
    from game_bridge_mcp.mcp_server.adapter import BridgeServer
    from mcp_harness import connect, start_call

    script = tmp_path / "slow.py"
    script.write_text(SLOW_GAME)
    bridge = bridge_for(tmp_path, guard, [sys.executable, str(script), "{port}"])
    app = BridgeServer(bridge)

    async def main() -> None:
        async with connect(app) as client:
            port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
            await call(client, "push", port, x=1)
            await call(client, "advance", port, frames=2)
            async with anyio.create_task_group() as tasks:
                running = await start_call(client, tasks, "call_tool", {
                    "name": "advance", "port": port, "arguments": {"frames": 10000}})
                deadline = time.monotonic() + 20
                while data(await call(client, "get_state", port, path="simFrame"))["value"] < 40:
                    assert time.monotonic() < deadline, "advance did not start stepping"
                    await anyio.sleep(0.01)
                await running.cancel()
                while app.calls_in_flight:
                    assert time.monotonic() < deadline, "the cancelled advance did not end"
                    await anyio.sleep(0.005)
            await call(client, "push", port, x=-2)  # what comes next is recorded where the game is
            await call(client, "advance", port, frames=5)
            saved = data(await call(client, "save_state", port))
            assert 45 <= saved["simFrame"] < 5000 and saved["exact"] is True, saved
            before = whole(data(await call(client, "get_state", port)))
            await call(client, "advance", port, frames=7)
            restored = data(await call(client, "restore_state", port, state=saved["state"]))
            assert restored["exact"] is True and restored["simFrame"] == saved["simFrame"], (restored.get("differed"), restored.get("note"), [(e.cmd, e.args, e.sim_frame) for e in bridge.states.get(saved["state"]).journal])
            assert whole(data(await call(client, "get_state", port))) == before

    try:
        anyio.run(main)
    finally:
        bridge.shutdown()
