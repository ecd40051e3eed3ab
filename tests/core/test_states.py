"""save_state, restore_state, fork_instance and list_states through the real MCP client,
against the hand-made reference game (its snapshot written from docs/contract.md, not with
the kit) and the demo: by the game's own snapshot, by its live copies, and by re-execution;
and the bad input of docs/states.md, each a clear error that leaves the game as it was."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import ProcessGuard, wait_until
from ports import free_range
from mcp_harness import connect, data, is_error, text

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HANDMADE = [sys.executable, str(REPO / "tests" / "peers" / "handmade.py"), "--port", "{port}", "--hz", "200"]
DEMO = [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}", "--seed", "5", "--start",
        "--no-register", "--hz", "200"]


def bridge_for(tmp_path: Path, guard: ProcessGuard, argv: list[str], *, ports: int = 4,
               version: str | None = None) -> Bridge:
    low, high = free_range(ports)
    path = tmp_path / "gamebridge.json"
    path.write_text(json.dumps({"name": "Stateful", "launch": {
        "argv": argv, "cwd": str(REPO), "portRange": f"{low}-{high}", "readyTimeoutMs": 20000,
        "env": {"PYTHONPATH": str(REPO)}}}))
    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    config = Config(environ=env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(path))
    return Bridge(config)


async def call(client: Any, name: str, port: int | None = None, **arguments: Any) -> Any:
    args: dict[str, Any] = {"name": name, "arguments": arguments}
    if port is not None:
        args["port"] = port
    return await client.call_tool("call_tool", args)


def run(bridge: Bridge, body: Any) -> None:
    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            await body(client)
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()


def whole(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in ("frame", "completedCommandId", "commandResults", "events")}


# --------------------------------------------------------------------------- by the game's own snapshot

def test_the_reference_game_saved_played_restored_and_forked(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, HANDMADE)

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "move", port, dx=2)
        await call(client, "advance", port, frames=3)
        saved = data(await call(client, "save_state", port, label="two right"))
        assert saved["how"] == "snapshot" and saved["exact"] is True and saved["state"] == "s1", saved
        assert saved["simFrame"] == 3 and saved["bytes"] > 0 and saved["kept"] is False
        before = data(await call(client, "get_state", port))
        for dx in (3, -1, 2):
            await call(client, "move", port, dx=dx)
            await call(client, "spawn", port)
        await call(client, "advance", port, frames=7)
        assert data(await call(client, "get_state", port))["game"]["x"] == 6
        restored = data(await call(client, "restore_state", port, state="two right"))
        assert restored["exact"] is True and restored["how"] == "snapshot" and "differed" not in restored
        assert restored["simFrame"] == 3 and restored["game"]["x"] == 2, restored
        assert [e["m"] for e in restored["events"]][-1] == "snapshot:loaded"
        after = data(await call(client, "get_state", port))
        assert whole(after) == whole(before)
        forked = data(await call(client, "fork_instance", state="s1"))
        assert forked["port"] != port and forked["exact"] is True and forked["how"] == "snapshot", forked
        assert forked["simFrame"] == 3 and forked["paused"] is True and forked["pid"] > 0
        # the fork and its parent, the same inputs at the same frames: the same states
        for target in (port, forked["port"]):
            await call(client, "move", target, dx=-3)
            await call(client, "spawn", target, kind="barrel")
            await call(client, "advance", target, frames=11)
        one, two = [data(await call(client, "get_state", p)) for p in (port, forked["port"])]
        assert whole(one) == whole(two) and one["simFrame"] == 14
        listed = data(await call(client, "list_states"))
        assert [s["state"] for s in listed["states"]] == ["s1"] and listed["states"][0]["label"] == "two right"
        assert listed["maxStates"] == 64 and listed["count"] == 1
        assert set(bridge.launched_ports()) == {port, forked["port"]}

    run(bridge, body)


def test_live_copies_restore_in_place_and_fork_by_re_execution(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, HANDMADE + ["--snapshot-live-only"])

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "spawn", port)
        await call(client, "advance", port, frames=4)
        saved = data(await call(client, "save_state", port))
        await call(client, "move", port, dx=3)
        await call(client, "advance", port, frames=2)
        restored = data(await call(client, "restore_state", port, state=saved["state"]))
        assert restored["exact"] is True and restored["how"] == "snapshot" and restored["game"]["x"] == 0
        forked = data(await call(client, "fork_instance", state=saved["state"]))
        assert forked["how"] == "re-execution" and forked["exact"] is True, forked
        assert forked["game"]["spawned"] == 1 and forked["simFrame"] == 4
        kept = await call(client, "save_state", port, keep=True)
        assert not is_error(kept), text(kept)  # its journal is kept, since the bytes cannot leave
        assert data(kept)["file"].endswith(".gbstate")

    run(bridge, body)


def test_a_fork_of_a_ports_current_frame_and_a_fork_that_runs(tmp_path: Path, guard: ProcessGuard) -> None:
    """fork_instance {port}: the frame the game is at, saved first as a state the answer
    names; {paused: false}: the fork's clock runs once it is restored."""
    bridge = bridge_for(tmp_path, guard, HANDMADE)

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "move", port, dx=3)
        await call(client, "advance", port, frames=6)
        parent = data(await call(client, "get_state", port))
        here = await call(client, "fork_instance", port)
        assert not is_error(here), text(here)
        here = data(here)
        assert here["port"] not in (port,) and here["exact"] is True and here["simFrame"] == 6, here
        assert here["paused"] is True and here["game"]["x"] == parent["game"]["x"] == 3, here
        assert whole(data(await call(client, "get_state", here["port"]))) == whole(parent)
        assert f"Saved port {port}'s" in here["note"]
        listed = data(await call(client, "list_states"))["states"]
        assert [(s["state"], s.get("label")) for s in listed] == [(here["state"], "fork")]
        running = data(await call(client, "fork_instance", state=here["state"], paused=False))
        assert running["paused"] is False and running["exact"] is True, running
        assert wait_until(lambda: bridge.client(running["port"]).state()["simFrame"] > 6, 10)
        assert data(await call(client, "get_state", here["port"]))["simFrame"] == 6  # the paused one stays
        assert set(bridge.launched_ports()) == {port, here["port"], running["port"]}

    run(bridge, body)


# --------------------------------------------------------------------------- the demo both ways, and re-execution

@pytest.mark.parametrize("how", ["snapshot", "re-execution"])
def test_the_demo_saved_twenty_moves_restored_and_compared_whole(tmp_path: Path, guard: ProcessGuard,
                                                                 how: str) -> None:
    """The demo saves itself (the kit's snapshot); with --no-snapshot it is re-executed."""
    bridge = bridge_for(tmp_path, guard, DEMO + (["--no-snapshot"] if how == "re-execution" else []))

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "drop", port, x=0)
        await call(client, "advance", port, until={"path": "game.moving", "equals": 0})
        saved = data(await call(client, "save_state", port))
        before = data(await call(client, "get_state", port))
        for move in range(20):
            await call(client, "drop", port, x=(move % 7) - 3)
            await call(client, "advance", port, frames=9)
        assert data(await call(client, "get_state", port))["game"]["drops"] > before["game"]["drops"]
        assert saved["how"] == how and saved["exact"] is True
        restored = data(await call(client, "restore_state", port, state=saved["state"]))
        assert restored["port"] == port and restored["exact"] is True and restored["how"] == how, restored
        assert whole(data(await call(client, "get_state", port))) == whole(before)
        # the restored instance goes on being recorded: saved again and forked, it is exact
        await call(client, "drop", port, x=2)
        await call(client, "advance", port, frames=40)
        again = data(await call(client, "save_state", port))
        forked = data(await call(client, "fork_instance", state=again["state"]))
        assert forked["exact"] is True and forked["how"] == how
        assert whole(data(await call(client, "get_state", forked["port"]))) == whole(
            data(await call(client, "get_state", port)))

    run(bridge, body)


def test_a_game_the_same_inputs_do_not_reproduce_is_reported_not_restored(tmp_path: Path,
                                                                          guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, HANDMADE + ["--features", "results,after,clock", "--noise"])

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        await call(client, "move", port, dx=1)
        await call(client, "advance", port, frames=5)
        saved = data(await call(client, "save_state", port))
        assert saved["how"] == "re-execution" and saved["exact"] is True
        forked = data(await call(client, "fork_instance", state=saved["state"]))
        assert forked["exact"] is False and forked["game"]["x"] == 1 and forked["simFrame"] == 5, forked
        assert any(d.startswith("game.noise: ") for d in forked["differed"]), forked
        assert "does not come back the same" in forked["note"]

    run(bridge, body)


# --------------------------------------------------------------------------- bad input

def test_bad_input_is_a_clear_error_and_the_game_is_as_it_was(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, HANDMADE + ["--snapshot-max-bytes", "4096"])
    other = Bridge(bridge.config)  # another session of the same bridge

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        saved = data(await call(client, "save_state", port))
        state_now = data(await call(client, "get_state", port))

        async def refused(name: str, fragment: str, **arguments: Any) -> str:
            result = await call(client, name, port, **arguments)
            assert is_error(result) and text(result).startswith("BridgeUsageError"), text(result)
            assert fragment in text(result), text(result)
            return text(result)

        await refused("restore_state", "no state called 's9' in this session", state="s9")
        other.states.add(other_state(other, "s2"))
        await refused("restore_state", "belongs to another session", state="s2")
        await refused("restore_state", "either state", state="s1", file="x.gbstate")
        # a running game, then commands waiting for its clock
        await call(client, "resume", port)
        await refused("restore_state", "is running", state="s1")
        await call(client, "pause", port)
        await call(client, "key", port, key="left")  # waits for the clock: pending
        await refused("restore_state", "wait for the game's clock", state="s1")
        await call(client, "advance", port, frames=1)
        # state files: cut off, of another build, code in disguise
        kept = data(await call(client, "save_state", port, keep=True))
        raw = Path(kept["file"]).read_bytes()
        cut = tmp_path / "cut.gbstate"
        cut.write_bytes(raw[:-3])
        await refused("restore_state", "cut off or padded", file=str(cut))
        header, _, snapshot = raw.partition(b"\n")
        doc = json.loads(header)
        doc["game"]["version"] = "9.9"
        foreign = tmp_path / "foreign.gbstate"
        foreign.write_bytes(json.dumps(doc).encode() + b"\n" + snapshot)
        await refused("restore_state", "is of Handmade 9.9", file=str(foreign))
        pickled = tmp_path / "pickled.gbstate"
        pickled.write_bytes(b"\x80\x04\x95" + raw)
        await refused("restore_state", "not a game-bridge state file", file=str(pickled))
        # the game refuses bytes it cannot load (here: a checksum that does not match)
        doc = json.loads(header)
        bad = bytearray(snapshot)
        bad[-2] ^= 1
        import hashlib
        doc["snapshotSha256"] = hashlib.sha256(bytes(bad)).hexdigest()
        damaged = tmp_path / "damaged.gbstate"
        damaged.write_bytes(json.dumps(doc).encode() + b"\n" + bytes(bad))
        message = await refused("restore_state", "refused the state's bytes as not bytes it can load", file=str(damaged))
        assert "checksum" in message and "nothing was loaded" in message
        assert whole(data(await call(client, "get_state", port)))["game"]["x"] == state_now["game"]["x"]
        # over the game's snapshotMaxBytes: refused before sending
        doc = json.loads(header)
        huge = b"x" * 5000
        doc.update(snapshotBytes=len(huge), snapshotSha256=hashlib.sha256(huge).hexdigest())
        big = tmp_path / "big.gbstate"
        big.write_bytes(json.dumps(doc).encode() + b"\n" + huge)
        await refused("restore_state", "over the 4,096 the game on port", file=str(big))
        restored = data(await call(client, "restore_state", port, file=kept["file"]))
        assert restored["exact"] is True and restored["state"] == kept["state"]
        assert data(await call(client, "restore_state", port, state=saved["state"]))["exact"] is True

    try:
        run(bridge, body)
    finally:
        other.shutdown()


def other_state(bridge: Bridge, name: str) -> Any:
    from game_bridge_mcp.core.states.store import SavedState, Seen

    return SavedState(name, None, 1, 0, {"name": "Handmade", "version": "1.0"}, 0, Seen.of({}), journal=[])


def test_a_game_neither_with_snapshot_nor_launched_paused_cannot_be_saved(tmp_path: Path,
                                                                          guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, HANDMADE + ["--features", "results,after,clock"])

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {}))["port"]
        result = await call(client, "save_state", port)
        assert is_error(result) and "cannot be saved" in text(result) and "paused: true" in text(result), text(result)

    run(bridge, body)


def test_a_fork_with_no_free_port_leaves_nothing_running(tmp_path: Path, guard: ProcessGuard,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The declared range is one port, which the parent holds, and the OS has none to
    offer either (every port it assigns is that one, already claimed)."""
    from game_bridge_mcp.launch import portclaim

    bridge = bridge_for(tmp_path, guard, HANDMADE, ports=1)

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        saved = data(await call(client, "save_state", port))

        class Exhausted(socket.socket):
            def getsockname(self) -> Any:
                return ("127.0.0.1", port)

        monkeypatch.setattr(portclaim.socket, "socket", Exhausted)
        result = await call(client, "fork_instance", state=saved["state"])
        monkeypatch.undo()
        assert "No free port" in text(result), text(result)
        assert is_error(result) and text(result).startswith("BridgeUsageError"), text(result)
        assert bridge.launched_ports() == [port]
        with socket.socket() as probe:  # the parent still answers, untouched
            probe.connect(("127.0.0.1", port))

    run(bridge, body)


def test_states_are_bounded_named_and_dropped_with_the_session(tmp_path: Path, guard: ProcessGuard) -> None:
    bridge = bridge_for(tmp_path, guard, HANDMADE)
    bridge.states.max_states = 3

    async def body(client: Any) -> None:
        port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
        names = []
        for _ in range(4):
            answer = data(await call(client, "save_state", port))
            names.append(answer["state"])
        assert names == ["s1", "s2", "s3", "s4"] and answer["dropped"] == ["s1"], answer
        assert [s["state"] for s in data(await call(client, "list_states", port))["states"]] == ["s2", "s3", "s4"]
        kept = data(await call(client, "save_state", port, keep=True))
        assert Path(kept["file"]).parent.name == "kept"
        return None

    run(bridge, body)
    states = tmp_path / "home" / "states"
    assert [p.name for p in states.iterdir()] == ["kept"], "the session's folder went with it"
    assert len(list((states / "kept").iterdir())) == 1


# --------------------------------------------------------------------------- an unmodified pygame game

PYGAME_RANDOM = [sys.executable, "-m", "game_bridge_mcp.game.pygame", "--port", "{port}",
                 str(REPO / "tests" / "peers" / "games" / "pygame_random.py")]


def test_a_pygame_game_is_the_same_twice_and_restored_by_re_execution_exactly(tmp_path: Path,
                                                                             guard: ProcessGuard) -> None:
    """random, get_ticks, a clock's dt and a set_timer event all come out the same: two paused
    launches driven alike are identical screenshot for screenshot, and a state comes back exact."""
    pytest.importorskip("pygame")
    bridge = bridge_for(tmp_path, guard, PYGAME_RANDOM)

    async def body(client: Any) -> None:
        ports = [data(await client.call_tool("launch_instance", {"paused": True}))["port"] for _ in range(2)]
        views: list[list[Any]] = [[], []]
        for index, port in enumerate(ports):
            for at in range(4):
                await call(client, "advance", port, frames=15, inputs=[{"at": 0, "key": "right", "frames": 5 + at}])
                shot = data(await call(client, "get_screenshot", port, always=True))
                state = data(await call(client, "get_state", port, summary=True))
                views[index].append((state["simFrame"], state["game"], Path(shot["file"]).read_bytes()))
        for one, two in zip(*views):
            assert one[:2] == two[:2], (one[:2], two[:2])
        assert views[0] == views[1]
        last = views[0][-1][1]  # 60 frames: 1 s of game time, the 250 ms timer read 3 times (the 4th is due next)
        assert last["timerTicks"] == 3 and 960 <= last["ticks"] <= 1000 and last["stars"] > 0, last
        port = ports[0]
        saved = data(await call(client, "save_state", port))
        assert saved["how"] == "re-execution" and saved["exact"] is True
        before = data(await call(client, "get_state", port))
        await call(client, "advance", port, frames=20, inputs=[{"at": 3, "key": "left", "frames": 9}])
        restored = data(await call(client, "restore_state", port, state=saved["state"]))
        assert restored["exact"] is True and "differed" not in restored, restored
        assert whole(data(await call(client, "get_state", port))) == whole(before)
        forked = data(await call(client, "fork_instance", state=saved["state"]))
        assert forked["exact"] is True and forked["simFrame"] == saved["simFrame"] == 61  # the first flip is frame 1

    run(bridge, body)


def test_live_copies_in_a_game_the_bridge_did_not_launch_are_dropped_with_the_session(tmp_path: Path) -> None:
    from peers.handmade import HandmadeGame

    with HandmadeGame(hz=200, start_paused=True) as game:
        config = Config(environ={"GAME_BRIDGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)},
                        registry_dir=tmp_path / "home" / "instances", scan_range=(1,))
        bridge = Bridge(config)
        try:
            for _ in range(3):
                saved = bridge.run_tool("call_tool", {"port": game.port, "name": "save_state", "arguments": {}})
                assert saved["how"] == "snapshot"
            assert len(game.snapshots) == 3
            kept = bridge.run_tool("call_tool", {"port": game.port, "name": "save_state",
                                                 "arguments": {"keep": True}})
            assert Path(kept["file"]).is_file()
        finally:
            bridge.shutdown()
        assert wait_until(lambda: game.snapshots == {}, 5)  # the session's copies went with it (dropped, not waited on)
        assert Path(kept["file"]).is_file()  # a kept state did not
