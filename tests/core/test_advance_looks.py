"""``advance {frames}`` without a look first: on a game the bridge last saw paused, one
frame is two requests (the ``step`` and its held answer), checked against what it saw; and
every case where what it saw may not hold, so it still asks ``/health`` and ``/state``
first or checks again after (docs/clock.md, "What a step costs"). Counted on the
hand-made reference game's own log of what it served (port 0), through the real MCP
client; the kit's demo for a game that resumes itself."""

from __future__ import annotations

import socket
import time
from typing import Any

import anyio
import pytest

from game_bridge_mcp.game.demo import build
from game_bridge_mcp.game.demo.fruit import FruitMerge
from kit_helpers import command, doc, looping
from loop_helpers import app_for, call, error_text, handmade_game
from mcp_harness import connect, data
from peers.handmade import FEATURES, HandmadeGame

pytestmark = pytest.mark.timeout(90)


def kinds(paths: list[str]) -> list[str]:
    """What each request was: health, state, after (a held /state), tools, or the command's name."""
    out = []
    for path in paths:
        if path.startswith("/command?cmd="):
            out.append(path[len("/command?cmd="):].split("&")[0])
        elif path.startswith("/state?after="):
            out.append("after")
        else:
            out.append(path.split("?")[0].strip("/"))
    return out


async def advance(client: Any, port: int, **arguments: Any) -> Any:
    return await call(client, "advance", arguments, port=port)


async def served(game: HandmadeGame, act: Any) -> tuple[Any, list[str]]:
    """``act``'s result and the kinds of request the game served meanwhile."""
    mark = len(game.requests)
    result = await act
    return result, kinds(game.requests[mark:])


def settle(port: int, command_id: int) -> None:
    """Wait until another client's command has run (its id completed)."""
    deadline = time.monotonic() + 10
    while doc(port, "/state?view=digest")["completedCommandId"] < command_id:
        assert time.monotonic() < deadline, "the command never completed"
        time.sleep(0.002)


def test_a_frame_is_the_step_and_its_answer_once_the_bridge_has_seen_the_game_paused() -> None:
    with handmade_game(start_paused=True) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                first, asked = await served(game, advance(client, game.port))
                assert asked.index("health") < asked.index("state") < asked.index("step"), asked  # learned first
                sim = data(first)["simFrame"]
                for n in range(1, 6):
                    one, asked = await served(game, advance(client, game.port))
                    assert asked == ["step", "after"], asked
                    one = data(one)
                    assert one["framesAdvanced"] == 1 and one["simFrame"] == sim + n and one["paused"] is True
                    assert "note" not in one
                many, asked = await served(game, advance(client, game.port, frames=30))
                assert asked == ["step", "after"] and data(many)["simFrame"] == sim + 35
                # A command of this bridge's own, confirmed, leaves a look to step from, and
                # its events are shown once: in its answer, not again in the advance's.
                emitted = data(await call(client, "emit", {"n": 2}, port=game.port))
                assert [e["m"] for e in emitted["events"]] == ["ping", "ping"]
                after, asked = await served(game, advance(client, game.port))
                assert asked == ["step", "after"], asked
                assert not any(e["m"] == "ping" for e in data(after).get("events", []))
                assert game.sim_frame == data(after)["simFrame"] == sim + 36  # the answer is the truth
        anyio.run(main)


def test_until_inputs_and_a_pending_command_still_look_first() -> None:
    with handmade_game(start_paused=True) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                sim = data(await advance(client, game.port))["simFrame"]
                # until: the condition's value before any frame is the start's.
                changed, asked = await served(game, advance(client, game.port, until={"path": "simFrame", "changes": True}))
                assert asked[:3] == ["health", "state", "step"], asked
                assert data(changed)["initialValue"] == sim and data(changed)["framesAdvanced"] == 1
                # inputs: delivered at their frames from a looked-at start.
                timed, asked = await served(game, advance(client, game.port, frames=2, inputs=[{"at": 0, "key": "right"}]))
                assert asked[:2] == ["health", "state"] and "step" in asked, asked
                assert data(timed)["framesAdvanced"] == 2 and data(timed)["simFrame"] == sim + 3
                # A key on the paused game waits for the clock: the next advance looks first,
                # steps behind it and delivers it.
                assert data(await call(client, "key", {"key": "left"}, port=game.port))["pending"] is True
                delivered, asked = await served(game, advance(client, game.port))
                assert asked[:2] == ["health", "state"] and "step" in asked, asked
                assert data(delivered)["delivered"][0]["tool"] == "key" and data(delivered)["simFrame"] == sim + 4
                # Then the step's answer is a look again.
                _again, asked = await served(game, advance(client, game.port))
                assert asked == ["step", "after"], asked
        anyio.run(main)


def test_another_clients_commands_are_noticed_and_the_bridge_looks_first_from_then_on() -> None:
    with handmade_game(start_paused=True) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                sim = data(await advance(client, game.port))["simFrame"]
                settle(game.port, command(game.port, "cmd=step&frames=3"))  # another client steps it
                one, asked = await served(game, advance(client, game.port))
                assert asked == ["step", "after"], asked
                one = data(one)
                assert one["framesAdvanced"] == 1 and one["simFrame"] == sim + 4 == game.sim_frame
                assert "Commands this bridge did not send" in one["note"] and "could not be checked" in one["note"]
                for _ in range(2):  # from then on: /health and /state before each step, and no note
                    again, asked = await served(game, advance(client, game.port))
                    assert asked == ["health", "state", "step", "after"], asked
                    assert "note" not in data(again)
        anyio.run(main)


@pytest.mark.parametrize("how", ["another client's resume", "its own pause control"])
def test_a_game_resumed_since_the_bridge_looked_is_paused_and_stepped_as_a_running_game(how: str) -> None:
    with handmade_game(start_paused=True) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                data(await advance(client, game.port))
                if how == "its own pause control":
                    with game.lock:
                        game.paused = False
                else:
                    settle(game.port, command(game.port, "cmd=resume"))
                one, asked = await served(game, advance(client, game.port))
                assert asked[:2] == ["step", "after"] and asked[2:5] == ["health", "state", "pause"], asked
                one = data(one)
                assert one["framesAdvanced"] == 1 and one["paused"] is True and game.paused
                assert "was running; advance paused it first" in one["note"]
                held = data(await call(client, "get_state", {"summary": True}, port=game.port))
                assert held["simFrame"] == one["simFrame"]  # paused where the answer says
                _again, asked = await served(game, advance(client, game.port))
                # Another client's command seen: the bridge looks first from then on.
                assert asked == (["step", "after"] if how == "its own pause control"
                                 else ["health", "state", "step", "after"]), asked
        anyio.run(main)


def test_a_restarted_game_on_the_same_port_is_looked_at_before_it_is_stepped() -> None:
    first = HandmadeGame(hz=500, start_paused=True).start()
    port = first.port
    try:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                for _ in range(3):
                    data(await advance(client, port))
                first.stop()
                with HandmadeGame(hz=500, start_paused=True, port=port) as second:
                    deadline = time.monotonic() + 5
                    while second.frame < 5:  # its loop is running (its frame is below the old one's)
                        assert time.monotonic() < deadline
                        await anyio.sleep(0.005)
                    one, asked = await served(second, advance(client, port))
                    assert asked[0] == "health", asked  # the kept connection went with the old process
                    one = data(one)
                    assert one["framesAdvanced"] == 1 and one["simFrame"] == 1 == second.sim_frame
                    _again, asked = await served(second, advance(client, port))
                    assert asked == ["step", "after"], asked
        anyio.run(main)
    finally:
        first.stop()


# (A step that completes early is caught when its answer comes before its frames have run:
# a step of many frames, so a loaded machine's slow answer cannot hide it.)
@pytest.mark.parametrize("lie, needle, steps", [
    ("simframe-runs-while-paused", "simFrame ran on while paused", (1, 4)),
    ("step-early", "publishes step's completion before its frames have run", (60, 200)),
    ("step-short", "publishes step's completion before its frames have run", (1, 4)),
])
def test_a_clock_that_lies_is_caught_without_a_look_first(lie: str, needle: str, steps: tuple[int, int]) -> None:
    with handmade_game(hz=300, start_paused=True, lies={lie}) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                data(await call(client, "get_state", {"summary": True}, port=game.port))  # a look, paused
                for frames in steps:
                    broken, asked = await served(game, advance(client, game.port, frames=frames))
                    assert asked[:2] == ["step", "after"], asked
                    message = error_text(broken)
                    assert message.startswith("NotAGameSurface") and "advertises clock but broke it" in message
                    assert needle in message, message
        anyio.run(main)


def test_a_kit_game_that_resumed_itself_is_stepped_and_said_so() -> None:
    fruit = FruitMerge(7)
    kit = build(fruit, register=False, environ={"GAME_BRIDGE_START_PAUSED": "1"})
    fruit.new_round()
    with looping(kit, fruit.update, hz=200, render=fruit.frame_tick) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                sim = data(await advance(client, port))["simFrame"]
                kit.set_paused(False)  # the game's own pause button, say
                deadline = time.monotonic() + 10
                while doc(port, "/state?view=digest")["simFrame"] < sim + 5:
                    assert time.monotonic() < deadline, "the resumed game did not run"
                    await anyio.sleep(0.005)
                one = data(await advance(client, port))
                assert one["framesAdvanced"] == 1 and one["paused"] is True and one["simFrame"] > sim + 5
                assert "ran on after the bridge last saw it paused" in one["note"], one
                later = data(await call(client, "get_state", {"summary": True}, port=port))
                assert later["simFrame"] == one["simFrame"]
                quiet = data(await advance(client, port))
                assert quiet["simFrame"] == one["simFrame"] + 1 and "note" not in quiet
        anyio.run(main)


def test_a_different_game_on_the_port_is_looked_at_before_it_is_stepped() -> None:
    fruit = FruitMerge(7)
    kit = build(fruit, register=False, environ={"GAME_BRIDGE_START_PAUSED": "1"})
    fruit.new_round()
    with looping(kit, fruit.update, hz=200, render=fruit.frame_tick) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                for _ in range(3):  # the demo, stepped from what the bridge saw
                    data(await advance(client, port))
                kit.request_stop()
                kit.stop()
                deadline = time.monotonic() + 5
                while True:  # the port is free again (the demo's listener closed)
                    try:
                        second = HandmadeGame(hz=500, start_paused=True, port=port).start()
                        break
                    except OSError:
                        assert time.monotonic() < deadline, "the demo's port was never freed"
                        await anyio.sleep(0.01)
                try:
                    one, asked = await served(second, advance(client, port))
                    assert asked[:2] == ["health", "state"], asked  # the kept connection went with the demo
                    one = data(one)
                    assert one["framesAdvanced"] == 1 and one["simFrame"] == 1 == second.sim_frame
                    assert "x" in one["game"], one  # the hand-made game's digest, not the demo's
                    _again, asked = await served(second, advance(client, port))
                    assert asked == ["step", "after"], asked
                finally:
                    second.stop()
        anyio.run(main)


def hold_port(port: int) -> socket.socket | None:
    """A socket bound to ``port`` and not listening (connections are refused, and no other
    process can take the port meanwhile); None when another process took it first."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (the game's closed connections wait)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    return sock


def test_an_instance_that_died_since_the_bridge_looked_is_reported_offline() -> None:
    async def died() -> bool:
        """One try: False when another process took the port between the stop and the hold
        (the machine is shared: a freed port can be anyone's at once)."""
        game = HandmadeGame(hz=500, start_paused=True).start()
        port = game.port
        try:
            async with connect(app_for(port)) as client:
                data(await advance(client, port))
                _one, asked = await served(game, advance(client, port))
                assert asked == ["step", "after"], asked
                game.stop()
                held = hold_port(port)
                if held is None:
                    return False
                with held:
                    message = error_text(await advance(client, port))
                assert message.startswith("GameOffline"), message
                assert str(port) in message
                return True
        finally:
            game.stop()

    assert any(anyio.run(died) for _ in range(5)), "another process took the freed port every time"


@pytest.mark.parametrize("without", [("after",), ("after", "view")])
def test_a_game_without_after_is_stepped_from_the_look_and_polled(without: tuple[str, ...]) -> None:
    features = [f for f in FEATURES if f not in without]
    with handmade_game(start_paused=True, features=features) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                sim = data(await advance(client, game.port))["simFrame"]
                for n in range(1, 4):
                    one, asked = await served(game, advance(client, game.port))
                    assert "health" not in asked[:1] and asked[0] == "step", asked  # no look first
                    assert "after" not in asked, asked  # confirmed by polling
                    one = data(one)
                    assert one["framesAdvanced"] == 1 and one["simFrame"] == sim + n == game.sim_frame
                    assert "note" not in one
        anyio.run(main)
