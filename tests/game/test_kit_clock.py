"""The kit's clock (clock=True): pause, step and resume counted exactly, a paused loop that
keeps serving, START_PAUSED, the API for games with their own loop, and the hook that
completes a command on a later simulation frame."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import pytest

from game_bridge_mcp.game import GameBridge
from kit_helpers import command, doc, fetch, looping, outcome, settled
from peers.fakegame import wait_until

pytestmark = pytest.mark.timeout(30)


class World:
    def __init__(self) -> None:
        self.updates = 0
        self.renders = 0
        self.seen_sim: list[int] = []


def make(world: World, **kwargs: Any) -> GameBridge:
    kwargs.setdefault("register", False)
    kwargs.setdefault("environ", {})
    bridge = GameBridge("Clock Test", "1", clock=True, state=lambda: {"game": {"updates": world.updates}},
                        **kwargs)

    @bridge.command
    def mark() -> dict[str, Any]:
        """Note the simulation frame this command ran at."""
        world.seen_sim.append(int(bridge.sim_frame or 0))
        return {"simFrame": bridge.sim_frame}

    @bridge.command
    def press() -> Any:
        """Completes once the next simulation frame has run (like input on a paused game)."""
        pending = bridge.defer()
        pending.complete_after_sim_frames(1, lambda: {"deliveredAt": bridge.sim_frame})
        return pending

    return bridge


@pytest.fixture
def game() -> Iterator[tuple[GameBridge, World, int]]:
    world = World()
    bridge = make(world)

    def update() -> None:
        world.updates += 1

    def render() -> None:
        world.renders += 1

    with looping(bridge, update, render=render) as port:
        yield bridge, world, port


def test_pause_holds_the_simulation_while_frames_and_commands_go_on(game: Any) -> None:
    bridge, world, port = game
    wait_until(lambda: doc(port, "/health")["simFrame"] > 3)  # running
    paused = settled(port, "cmd=pause")
    result = outcome(paused, paused["completedCommandId"])["result"]
    assert result["paused"] is True and paused["paused"] is True
    sim, updates = paused["simFrame"], world.updates
    assert sim == result["simFrame"] == updates  # one update per simulation frame
    frame = paused["frame"]
    renders = world.renders
    wait_until(lambda: doc(port, "/health")["frame"] > frame + 10)  # the loop keeps turning...
    marked = settled(port, "cmd=mark")  # ...and applying commands
    assert world.renders > renders  # and rendering
    assert marked["simFrame"] == sim and world.updates == updates and world.seen_sim == [sim]
    health = doc(port, "/health")
    assert health["paused"] is True and health["simFrame"] == sim and "clock" in health["features"]


def test_step_runs_exactly_its_frames_and_completes_only_after_them(game: Any) -> None:
    bridge, world, port = game
    paused = settled(port, "cmd=pause")
    sim = paused["simFrame"]
    for frames in (1, 5, 1, 240):
        stepped = settled(port, f"cmd=step&frames={frames}")
        entry = outcome(stepped, stepped["completedCommandId"])
        assert entry == {"id": stepped["completedCommandId"], "ok": True,
                         "result": {"simFrame": sim + frames, "frames": frames}}
        assert stepped["simFrame"] == sim + frames == world.updates and stepped["paused"] is True
        sim += frames
    default = settled(port, "cmd=step")
    assert default["simFrame"] == sim + 1
    # Commands queued behind a step run after its frames, in order.
    step_id = command(port, "cmd=step&frames=30")
    mark_id = command(port, "cmd=mark")
    done = doc(port, f"/state?after={mark_id}&waitMs=10000")
    assert world.seen_sim == [sim + 1 + 30]
    assert outcome(done, step_id)["result"]["frames"] == 30
    resumed = settled(port, "cmd=resume")
    assert resumed["paused"] is False
    wait_until(lambda: doc(port, "/health")["simFrame"] > resumed["simFrame"] + 3)


def test_step_on_a_running_game_pauses_it_first_and_pause_false_resumes(game: Any) -> None:
    _bridge, _world, port = game
    wait_until(lambda: doc(port, "/health")["simFrame"] > 2)
    stepped = settled(port, "cmd=step&frames=3")
    assert stepped["paused"] is True
    resumed = settled(port, "cmd=pause&paused=false")
    assert resumed["paused"] is False
    assert outcome(resumed, resumed["completedCommandId"])["result"]["paused"] is False


@pytest.mark.parametrize("value, fragment", [
    ("0", "must be between 1 and 10000 (got 0)"),
    ("-4", "must be between 1 and 10000 (got -4)"),
    ("1000000", "must be between 1 and 10000 (got 1000000)"),
    ("lots", "must be an integer"),
    ("2.5", "must be an integer"),
])
def test_bad_step_frames_are_refused(game: Any, value: str, fragment: str) -> None:
    _bridge, _world, port = game
    status, body = fetch(port, f"/command?cmd=step&frames={value}")
    assert status == 400 and body["accepted"] is False and fragment in body["error"]


def test_a_deferred_command_completes_on_the_next_simulated_frame(game: Any) -> None:
    _bridge, _world, port = game
    paused = settled(port, "cmd=pause")
    sim = paused["simFrame"]
    press_id = command(port, "cmd=press")
    mark_id = command(port, "cmd=mark")  # runs meanwhile (press does not hold the queue)...
    waited = doc(port, f"/state?after={press_id}&waitMs=50")
    assert waited["completedCommandId"] == paused["completedCommandId"]  # ...but completes after press
    step_id = command(port, "cmd=step")
    stepped = doc(port, f"/state?after={step_id}&waitMs=10000")
    assert outcome(stepped, press_id)["result"] == {"deliveredAt": sim + 1}
    assert outcome(stepped, mark_id)["result"] == {"simFrame": sim}


def test_start_paused_from_the_environment() -> None:
    world = World()
    bridge = make(world, environ={"GAME_BRIDGE_START_PAUSED": "1"})
    with looping(bridge, lambda: setattr(world, "updates", world.updates + 1)) as port:
        health = doc(port, "/health")
        wait_until(lambda: doc(port, "/health")["frame"] > health["frame"] + 5)
        state = doc(port, "/state")
        assert state["paused"] is True and state["simFrame"] == 0 and world.updates == 0
        assert settled(port, "cmd=step&frames=2")["simFrame"] == 2
    assert make(World(), environ={"GAME_BRIDGE_START_PAUSED": "0"}).paused is False


def test_start_paused_without_a_clock_says_so_and_runs(caplog: pytest.LogCaptureFixture) -> None:
    bridge = GameBridge("No Clock", "1", register=False, environ={"GAME_BRIDGE_START_PAUSED": "1"})
    assert bridge.paused is False and "clock" not in bridge.health()["features"]
    assert "has no clock" in caplog.text
    assert "paused" not in bridge.snapshot() and "pause" not in bridge.commands()
    with pytest.raises(RuntimeError, match="clock=True"):
        bridge.set_paused(True)


def test_the_clock_commands_are_listed_and_reserved() -> None:
    bridge = make(World())
    manifest = bridge.manifest()
    clock = [ts for ts in manifest["toolsets"] if ts["name"] == "clock"]
    assert [t["name"] for t in clock[0]["tools"]] == ["pause", "resume", "step"]
    step = clock[0]["tools"][2]
    assert step["inputSchema"]["properties"]["frames"] == {
        "type": "integer", "description": "Simulation frames to run, 1 to 10000.", "minimum": 1,
        "maximum": 10000, "default": 1}
    assert manifest["toolsets"][-1]["name"] == "clock"  # the game's own toolsets first
    with pytest.raises(ValueError, match="clock's command"):
        bridge.command(lambda: None, name="pause")


def test_a_game_with_its_own_loop_asks_the_kit() -> None:
    """The API for a loop the kit does not own: pump, sim_dt, end_sim_frame."""
    world = World()
    bridge = make(world)
    bridge.fixed_dt = 0.02
    bridge.start(0)
    try:
        port = int(bridge.port or 0)

        def frame(real_dt: float = 0.5) -> float | None:
            bridge.pump()
            dt = bridge.sim_dt(real_dt)
            if dt is not None:
                world.updates += 1
                bridge.end_sim_frame()
            return dt

        assert frame() == 0.5  # running: the game's own dt
        command(port, "cmd=pause")
        assert frame() is None and frame() is None and bridge.sim_frame == 1
        command(port, "cmd=step&frames=2")
        assert [frame(), frame(), frame()] == [0.02, 0.02, None]  # fixed dt while stepping
        state = json.loads(bridge.encoded_state())
        assert state["simFrame"] == 3 == world.updates and state["completedCommandId"] == 2
        with pytest.raises(ValueError):
            bridge.fixed_dt = 0
    finally:
        bridge.stop()


def test_hold_until_sim_holds_a_paused_loop_until_stepped_and_ends_on_stop() -> None:
    world = World()
    bridge = make(world, environ={"GAME_BRIDGE_START_PAUSED": "yes"})
    port = bridge.start(0)
    outcomes: list[bool] = []

    def flips() -> None:  # a game whose frame boundary is its display flip
        while True:
            due = bridge.hold_until_sim(hz=200)
            outcomes.append(due)
            if not due:
                return
            world.updates += 1
            bridge.end_sim_frame()

    thread = threading.Thread(target=flips, daemon=True)
    thread.start()
    try:
        frame = doc(port, "/health")["frame"]
        wait_until(lambda: doc(port, "/health")["frame"] > frame + 5)  # held, but pumping
        assert world.updates == 0 and outcomes == []
        stepped = settled(port, "cmd=step&frames=3")
        assert stepped["simFrame"] == 3 and world.updates == 3
    finally:
        bridge.stop()
        thread.join(5)
    assert not thread.is_alive() and outcomes == [True, True, True, False]


def test_close_still_works_while_paused(game: Any) -> None:
    bridge, _world, port = game
    settled(port, "cmd=pause")
    command(port, "cmd=close")
    wait_until(lambda: not bridge.running)
