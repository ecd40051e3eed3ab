"""The bridge's side of ``clock`` through the real MCP client: ``advance`` (frames,
until at exactly the first frame, maxFrames), ``wait_for`` on a paused game, and bad
input, against the kit's demo game and against the hand-made reference game (which
also lies on purpose). Launching paused and determinism are in test_clock_launch.py."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from game_bridge_mcp.game.demo.fruit import FruitMerge
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from kit_helpers import demo
from loop_helpers import bridge_for
from mcp_harness import connect, data, is_error, start_call, text
from peers.handmade import HandmadeGame

pytestmark = pytest.mark.timeout(60)

SEED = 7
MOVES = [0.5, 0.5, 0.5, 0.5, -2.0, 2.5]  # with SEED, the 2nd and 3rd merge


def reference(seed: int, moves: list[float]) -> list[tuple[int, int | None]]:
    """The demo's rules on their own: for each move, the simulation frames until the
    board settles, and the frame of the first merge (None when none)."""
    out: list[tuple[int, int | None]] = []
    events: list[str] = []
    game = FruitMerge(seed, emit=lambda m, **_f: events.append(m))
    game.new_round()
    for x in moves:
        game.drop(x)
        frames, merged = 0, None
        while game.moving:
            mark = len(events)
            game.tick()
            frames += 1
            if merged is None and any(e.startswith("merge:") for e in events[mark:]):
                merged = frames
        out.append((frames, merged))
    return out


async def call(client: Any, name: str, port: int, **arguments: Any) -> Any:
    return await client.call_tool("call_tool", {"name": name, "port": port, "arguments": arguments})


async def loop_frames_pass(client: Any, port: int, count: int, timeout_s: float = 10.0) -> None:
    """Wait until the game's loop has turned ``count`` more times (``frame``)."""
    first = data(await call(client, "get_health", port))["frame"]
    deadline = time.monotonic() + timeout_s
    while data(await call(client, "get_health", port))["frame"] < first + count:
        assert time.monotonic() < deadline, "the game's loop stopped turning"
        await anyio.sleep(0.002)


def test_advance_until_stops_at_exactly_the_frame_the_rules_say() -> None:
    expected = reference(SEED, MOVES)
    assert any(merged for _f, merged in expected), "pick moves that merge, so the event case is tested"
    with demo() as port:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(port))) as client:
                for x, (frames, merged) in zip(MOVES, expected):
                    start = data(await call(client, "get_state", port, summary=True))
                    assert start["paused"] is True
                    assert not is_error(await call(client, "drop", port, x=x))
                    if merged is not None:  # first to the merge, then on until settled
                        hit = data(await call(client, "advance", port, until={"event": "merge"}))
                        assert hit["matched"] is True and hit["framesAdvanced"] == merged
                        assert hit["value"].startswith("merge:")
                        rest = frames - merged
                    else:
                        rest = frames
                    done = data(await call(client, "advance", port, until={"path": "game.moving", "equals": 0}))
                    assert done["matched"] is True and done["framesAdvanced"] == rest, (x, done)
                    assert done["game"]["moving"] == 0 and done["paused"] is True
                    assert done["simFrame"] == start["simFrame"] + frames
                # Already settled: 0 frames, and the world did not move.
                again = data(await call(client, "advance", port, until={"path": "game.moving", "equals": 0}))
                assert again["matched"] is True and again["framesAdvanced"] == 0
        anyio.run(main)


@pytest.mark.slow
def test_frames_alone_step_exactly_that_many_and_stay_paused() -> None:
    with demo() as port, HandmadeGame(hz=500, start_paused=True) as hand:
        async def main() -> None:
            for target in (port, hand.port):
                async with connect(BridgeServer(bridge_for(target))) as client:
                    before = data(await call(client, "get_state", target, summary=True))
                    one = data(await call(client, "advance", target))
                    assert one["framesAdvanced"] == 1 and one["simFrame"] == before["simFrame"] + 1
                    many = data(await call(client, "advance", target, frames=250))
                    assert many["matched"] is True and many["framesAdvanced"] == 250
                    assert many["simFrame"] == before["simFrame"] + 251 and many["paused"] is True
                    await loop_frames_pass(client, target, 5)
                    held = data(await call(client, "get_state", target, summary=True))
                    assert held["simFrame"] == many["simFrame"] and held["frame"] > many["frame"]
        anyio.run(main)


def test_until_on_the_hand_made_game_every_shape() -> None:
    with HandmadeGame(hz=1000, start_paused=True) as game:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(game.port))) as client:
                start = data(await call(client, "get_state", game.port, summary=True))["simFrame"]
                hit = data(await call(client, "advance", game.port, until={"path": "simFrame", "equals": start + 37}))
                assert hit == {**hit, "matched": True, "framesAdvanced": 37, "path": "simFrame", "simFrame": start + 37}
                changed = data(await call(client, "advance", game.port, until={"path": "simFrame", "changes": True}))
                assert changed["framesAdvanced"] == 1 and changed["initialValue"] == start + 37
                # The world of this game moves only by commands: until never holds.
                never = data(await call(client, "advance", game.port, until={"path": "game.x", "equals": 2}, maxFrames=25))
                assert never["matched"] is False and never["framesAdvanced"] == 25 and never["lastValue"] == 0
                assert "did not hold within 25 frames" in never["note"]
                capped = data(await call(client, "advance", game.port, until={"event": "moved"}, frames=5, maxFrames=9))
                assert capped["matched"] is False and capped["framesAdvanced"] == 5
                missing = data(await call(client, "advance", game.port, until={"path": "game.nope", "equals": 1}, maxFrames=3))
                assert missing["matched"] is False and missing["pathFound"] is False
        anyio.run(main)


def test_an_old_event_does_not_count_only_one_that_appears() -> None:
    with demo() as port:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(port))) as client:
                seen = []  # each event is shown once, in the answer after it happened
                for x in (0.5, 0.5):  # two cherries in one column merge
                    seen += data(await call(client, "drop", port, x=x)).get("events", [])
                    seen += data(await call(client, "advance", port, until={"path": "game.moving", "equals": 0})).get("events", [])
                state = data(await call(client, "get_state", port, summary=True))
                assert state["game"]["merges"] == 1 and any(e["m"].startswith("merge:") for e in seen)
                quiet = data(await call(client, "advance", port, until={"event": "merge"}, maxFrames=20))
                assert quiet["matched"] is False and quiet["framesAdvanced"] == 20
        anyio.run(main)


@pytest.mark.parametrize("arguments, needle", [
    ({"frames": 0}, "'frames' must be between 1 and 10000, not 0"),
    ({"frames": -5}, "'frames' must be between 1 and 10000, not -5"),
    ({"frames": 1_000_000}, "'frames' must be between 1 and 10000, not 1000000"),
    ({"frames": "5"}, "'frames' must be of type integer"),
    ({"frames": 2.5}, "'frames' must be of type integer"),
    ({"maxFrames": 0, "until": {"path": "simFrame", "changes": True}}, "'maxFrames' must be between 1 and 10000"),
    ({"maxFrames": 10}, "maxFrames bounds an 'until'"),
    ({"until": "game.x"}, "'until' must be of type object"),
    ({"until": {}}, "exactly one condition"),
    ({"until": {"path": "game.x"}}, "exactly one condition"),
    ({"until": {"equals": 1}}, "'path' is required"),
    ({"until": {"path": "game.x", "equals": 1, "timeoutMs": 50}}, "bounded by frames"),
    ({"until": {"path": 5, "equals": 1}}, "'path' must be a dotted path"),
    ({"until": {"path": "game.x", "changes": "yes"}}, "'changes' must be true"),
    ({"until": {"event": ""}}, "'event' must be a non-empty text"),
    ({"until": {"path": "game.x", "equals": 1, "wait": 3}}, "unknown key 'wait'"),
    ({"seconds": 3}, "unknown argument 'seconds'"),
])
def test_bad_input_is_a_clear_error_and_the_bridge_keeps_serving(arguments: dict, needle: str) -> None:
    with HandmadeGame(hz=500, start_paused=True) as game:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(game.port))) as client:
                before = data(await call(client, "get_state", game.port, summary=True))["simFrame"]
                bad = await call(client, "advance", game.port, **arguments)
                assert is_error(bad) and text(bad).startswith("BridgeUsageError") and needle in text(bad), text(bad)
                after = data(await call(client, "get_state", game.port, summary=True))["simFrame"]
                assert after == before  # refused before anything was stepped
                assert data(await call(client, "advance", game.port, frames=2))["framesAdvanced"] == 2
        anyio.run(main)


@pytest.mark.parametrize("lie, needle", [
    ("simframe-runs-while-paused", "simFrame ran on while paused"),
    ("step-early", "publishes step's completion before its frames have run"),
    ("step-short", "publishes step's completion before its frames have run"),
])
def test_a_game_whose_clock_lies_is_caught_and_named(lie: str, needle: str) -> None:
    with HandmadeGame(hz=300, start_paused=True, lies={lie}) as game:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(game.port))) as client:
                for args in ({"until": {"path": "game.x", "equals": 3}}, {"frames": 5}):
                    r = await call(client, "advance", game.port, **args)
                    assert is_error(r) and text(r).startswith("NotAGameSurface"), text(r)
                    assert "advertises clock but broke it" in text(r) and needle in text(r), text(r)
                    assert "check --port" in text(r)
                assert data(await call(client, "get_health", game.port))["ok"] is True
        anyio.run(main)


def test_no_clock_is_a_clear_error() -> None:
    with HandmadeGame(hz=300, features={"results", "after"}) as game:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(game.port))) as client:
                r = await call(client, "advance", game.port, frames=3)
                assert is_error(r) and text(r).startswith("BridgeUsageError"), text(r)
                assert "has no clock" in text(r) and "(after, results)" in text(r)
                waited = data(await call(client, "wait_for", game.port, path="game.x", equals=0))
                assert waited["matched"] is True  # a game without a clock is waited on as ever
        anyio.run(main)


def test_a_running_game_is_paused_first_and_says_so() -> None:
    with demo(paused=False) as port, HandmadeGame(hz=500) as hand:
        async def main() -> None:
            for target in (port, hand.port):
                async with connect(BridgeServer(bridge_for(target))) as client:
                    r = data(await call(client, "advance", target, frames=3))
                    assert r["framesAdvanced"] == 3 and r["paused"] is True
                    assert "was running; advance paused it first" in r["note"] and "resume" in r["note"]
                    again = data(await call(client, "advance", target, frames=3))
                    assert "note" not in again and again["simFrame"] == r["simFrame"] + 3
        anyio.run(main)


def test_wait_for_on_a_paused_game_fails_at_once_and_points_to_advance() -> None:
    with demo() as port, HandmadeGame(hz=500, start_paused=True) as hand:
        async def main() -> None:
            for target, path, value in ((port, "game.moving", 1), (hand.port, "game.x", 3)):
                async with connect(BridgeServer(bridge_for(target))) as client:
                    r = await call(client, "wait_for", target, path=path, equals=value, timeoutMs=20000)
                    assert is_error(r) and text(r).startswith("BridgeUsageError"), text(r)
                    assert "is paused" in text(r) and '"name": "advance"' in text(r) and path in text(r)
                    # What already holds is answered: nothing needs to move for it.
                    current = data(await call(client, "get_state", target, summary=True))
                    held = data(await call(client, "wait_for", target, path="simFrame", equals=current["simFrame"]))
                    assert held["matched"] is True
        anyio.run(main)


def test_a_game_that_dies_mid_advance_is_offline_with_how_far_it_got() -> None:
    game = HandmadeGame(hz=1000, start_paused=True).start()
    port = game.port
    bridge = bridge_for(port)
    stopped = threading.Event()
    try:
        async def main() -> None:
            async with connect(BridgeServer(bridge)) as client:
                start = data(await call(client, "get_state", port, summary=True))["simFrame"]

                def kill_when_advancing() -> None:
                    deadline = time.monotonic() + 20
                    while game.sim_frame < start + 20 and time.monotonic() < deadline:
                        time.sleep(0.002)
                    game.stop()
                    stopped.set()

                killer = threading.Thread(target=kill_when_advancing, daemon=True)
                killer.start()
                r = await call(client, "advance", port, until={"path": "game.x", "equals": 3}, maxFrames=10000)
                killer.join(10)
                assert is_error(r) and text(r).startswith("GameOffline"), text(r)
                assert ("stopped answering during advance, after" in text(r)
                        or "went away during advance, after" in text(r)), text(r)
                assert "frames (simFrame" in text(r)
                with HandmadeGame(hz=300, start_paused=True) as other:  # the bridge keeps serving
                    assert data(await call(client, "advance", other.port, frames=2))["framesAdvanced"] == 2
        anyio.run(main)
    finally:
        if not stopped.is_set():
            game.stop()


def test_a_cancelled_advance_ends_between_frames() -> None:
    with HandmadeGame(hz=1000, start_paused=True) as game:
        app = BridgeServer(bridge_for(game.port))

        async def main() -> None:
            async with connect(app) as client:
                async with anyio.create_task_group() as tasks:
                    start = game.sim_frame
                    running = await start_call(client, tasks, "call_tool", {
                        "name": "advance", "port": game.port,
                        "arguments": {"until": {"path": "game.x", "equals": 3}, "maxFrames": 10000}})
                    deadline = time.monotonic() + 10
                    while game.sim_frame < start + 10:  # it is stepping
                        assert time.monotonic() < deadline, "advance did not start stepping"
                        await anyio.sleep(0.005)
                    await running.cancel()
                    deadline = time.monotonic() + 10
                    while app.calls_in_flight:
                        assert time.monotonic() < deadline, "the cancelled advance went on stepping"
                        await anyio.sleep(0.005)
                    assert running.result is None
                stopped_at = game.sim_frame
                await loop_frames_pass(client, game.port, 5)
                assert game.sim_frame == stopped_at < start + 10000  # nothing steps it any more
        anyio.run(main)


def test_without_seq_an_event_already_there_does_not_count() -> None:
    features = {"results", "after", "view", "clock"}  # no events: entries carry no seq
    with HandmadeGame(hz=500, start_paused=True, features=features) as game:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(game.port))) as client:
                data(await call(client, "emit", game.port, n=3))
                state = data(await call(client, "get_state", game.port))
                assert [e["m"] for e in state["events"]] == ["ping"] * 3 and "seq" not in state["events"][0]
                quiet = data(await call(client, "advance", game.port, until={"event": "ping"}, maxFrames=5))
                assert quiet["matched"] is False and quiet["framesAdvanced"] == 5
        anyio.run(main)


def test_call_tool_until_on_a_paused_game_answers_at_once_that_it_is_paused() -> None:
    with HandmadeGame(hz=500, start_paused=True) as game:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(game.port))) as client:
                def move(until: dict[str, Any]) -> Any:
                    return client.call_tool("call_tool", {"name": "move", "port": game.port, "arguments": {"dx": 1},
                                                          "until": until})
                r = data(await move({"path": "game.x", "equals": 5, "timeoutMs": 30000}))
                assert r["applied"] is True and r["settled"] is False and r["lastValue"] == 1
                assert "is paused" in r["note"] and '"name": "advance"' in r["note"]
                held = data(await move({"path": "game.x", "equals": 2}))
                assert held["settled"] is True  # what holds at once is answered as ever
                wrong = await client.call_tool("call_tool", {"name": "advance", "port": game.port,
                                                             "until": {"path": "game.x", "equals": 2}})
                assert is_error(wrong) and "among its arguments" in text(wrong)
        anyio.run(main)


def test_each_frame_is_one_step_and_one_held_digest_unless_the_condition_needs_more() -> None:
    with HandmadeGame(hz=500, start_paused=True) as game:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(game.port))) as client:
                data(await call(client, "advance", game.port))  # features learned
                start = data(await call(client, "get_state", game.port, summary=True))["simFrame"]
                mark = len(game.requests)
                hit = data(await call(client, "advance", game.port, until={"path": "simFrame", "equals": start + 10}))
                assert hit["framesAdvanced"] == 10
                served = game.requests[mark:]
                steps = [r for r in served if r.startswith("/command?cmd=step")]
                held = [r for r in served if r.startswith("/state?after=")]
                assert len(steps) == 10 and len(held) == 10 and all("view=digest" in r for r in held), served
                # A path the digest leaves out (a nested value): the whole state every frame.
                mark = len(game.requests)
                deep = data(await call(client, "advance", game.port, until={"path": "game.meta.seed", "equals": 8},
                                       maxFrames=4))
                assert deep["matched"] is False and deep["lastValue"] == 7
                held = [r for r in game.requests[mark:] if r.startswith("/state?after=")]
                assert len(held) == 4 and not any("view=digest" in r for r in held), game.requests[mark:]
        anyio.run(main)


def test_a_cancelled_advance_of_many_frames_stops_its_step_and_says_where() -> None:
    """One step of 10000 frames (no until): cancelled, the bridge sends a pause, which ends
    the kit's step at the frame it reached (issue 38, item 7); the step's result and the
    step:interrupted event say where, and nothing steps the game any more. (A kit game
    whose every update takes 2 ms, so 10000 frames take 20 s at least.)"""
    from game_bridge_mcp.game.kit import GameBridge
    from kit_helpers import looping

    slow = GameBridge("Slow", clock=True, register=False, environ={"GAME_BRIDGE_START_PAUSED": "1"})
    with looping(slow, lambda: time.sleep(0.002), hz=500) as port:
        app = BridgeServer(bridge_for(port))

        async def main() -> None:
            async with connect(app) as client:
                start = data(await call(client, "get_state", port, summary=True))["simFrame"]
                async with anyio.create_task_group() as tasks:
                    running = await start_call(client, tasks, "call_tool", {
                        "name": "advance", "port": port, "arguments": {"frames": 10000}})
                    deadline = time.monotonic() + 10
                    while data(await call(client, "get_state", port, summary=True))["simFrame"] < start + 5:
                        assert time.monotonic() < deadline, "advance did not start stepping"
                        await anyio.sleep(0.01)
                    await running.cancel()
                    deadline = time.monotonic() + 10
                    while app.calls_in_flight:
                        assert time.monotonic() < deadline, "the cancelled advance did not end"
                        await anyio.sleep(0.005)
                after = data(await call(client, "get_state", port, summary=True))
                stopped_at = after["simFrame"]
                assert stopped_at < start + 10000 and after["paused"] is True
                await loop_frames_pass(client, port, 10)
                assert data(await call(client, "get_state", port, summary=True))["simFrame"] == stopped_at
                events = data(await call(client, "get_events", port, since=0))["events"]
                cut = [e for e in events if e["m"] == "step:interrupted"]
                assert cut and cut[-1]["simFrame"] <= stopped_at, events
                assert data(await call(client, "advance", port, frames=3))["framesAdvanced"] == 3  # steps as before
        anyio.run(main)
