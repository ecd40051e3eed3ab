"""Input on a paused game answers at once and is delivered once: a command that cannot
complete until the clock moves (input on a paused game, a command queued behind one) is
answered ``applied: false, pending: true`` with a note naming ``advance``, not a
CommandTimeout after the deadline; the next ``advance`` delivers it and says so
(``delivered``, with its outcome). Against the hand-made reference game through the real
MCP client, a kit game whose input takes frames (``advance {until}`` frame by frame
behind it), and the pygame wrapper on a real pygame game; and the bad input: more
pending commands than the bridge keeps, a restart that loses them."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator

import anyio
import pytest

from game_bridge_mcp.core.outcome import CONTRACT_FIELDS
from game_bridge_mcp.core.pending import MAX_PENDING, PendingCommands
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.game import GameBridge
from game_bridge_mcp.game.kit.args import Arg
from kit_helpers import looping
from loop_helpers import app_for, bridge_for, call, handmade_game
from mcp_harness import connect, data

pytestmark = pytest.mark.timeout(90)


def key_commands(game: Any) -> int:
    return sum(1 for path in game.requests if path.startswith("/command?cmd=key"))


def test_input_on_a_paused_game_answers_at_once_and_advance_delivers_it_once() -> None:
    with handmade_game(start_paused=True) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                started = time.monotonic()
                pressed = data(await call(client, "key", {"key": "space"}))
                assert time.monotonic() - started < 4  # not the 5 s command deadline
                assert [k for k in pressed if k in CONTRACT_FIELDS] == list(CONTRACT_FIELDS)
                assert pressed["applied"] is False and pressed["pending"] is True
                assert pressed["confirmation"] == "pending" and "advance" in pressed["note"]
                assert "do not send it again" in pressed["note"] and pressed["paused"] is True
                assert pressed["game"]["lastInput"] is None  # not delivered: the world stands still
                # A command behind it completes after it (in queue order): pending too, and told.
                behind = data(await call(client, "noop"))
                assert behind["pending"] is True
                assert behind["stillPending"] == [{"commandId": pressed["commandId"], "tool": "key"}]
                advanced = data(await call(client, "advance", {"frames": 1}))
                assert advanced["framesAdvanced"] == 1
                assert [(d["tool"], d["ok"]) for d in advanced["delivered"]] == [("key", True), ("noop", True)]
                whole = data(await call(client, "get_state"))
                assert whole["game"]["lastInput"] == {"device": "key", "key": "space"}
                assert "stillPending" not in advanced
                again = data(await call(client, "advance", {"frames": 1}))
                assert "delivered" not in again  # each delivery said once
                assert key_commands(game) == 1  # nothing sent twice
                # The game running again: input is confirmed as ever.
                data(await call(client, "resume"))
                assert data(await call(client, "key", {"key": "a"}))["applied"] is True
        anyio.run(main)


def test_an_until_on_a_pending_command_names_the_advance_that_waits() -> None:
    with handmade_game(start_paused=True) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                until = {"path": "game.lastInput.key", "equals": "left"}
                pressed = data(await call(client, "key", {"key": "left"}, until=until))
                assert pressed["pending"] is True and "settled" not in pressed
                assert '"name": "advance", "arguments": {"until": {"path": "game.lastInput.key"' in pressed["note"]
                advanced = data(await call(client, "advance", {"until": until}))
                assert advanced["matched"] is True and advanced["framesAdvanced"] == 1
                assert advanced["delivered"][0]["tool"] == "key"
        anyio.run(main)


@contextmanager
def slow_input_game() -> Iterator[int]:
    """A kit game, paused, whose ``press`` holds a key for ``frames`` simulated frames
    (as the pygame wrapper's key does) and whose world counts simulated frames."""
    world = {"frames": 0, "held": False, "presses": 0}
    kit = GameBridge("Slow Input", "1", register=False, clock=True, environ={"GAME_BRIDGE_START_PAUSED": "1"},
                     state=lambda: {"game": dict(world)})

    @kit.command()
    def press(frames: Annotated[int, Arg("How long.", minimum=1, maximum=100)] = 2) -> Any:
        """Hold the key for some simulated frames."""
        world["held"] = True
        world["presses"] += 1
        pending = kit.defer()

        def release() -> dict[str, Any]:
            world["held"] = False
            return {"released": world["frames"]}
        pending.complete_after_sim_frames(frames, release)
        return pending

    def update(_dt: float = 0.0) -> None:
        world["frames"] += 1

    with looping(kit, update, hz=300) as port:
        yield port


def test_advance_until_frame_by_frame_behind_a_pending_press() -> None:
    with slow_input_game() as port:
        bridge = bridge_for(port)
        try:
            pressed = bridge.run_tool("call_tool", {"name": "press", "arguments": {"frames": 3}})
            assert pressed["pending"] is True and pressed["game"]["held"] is True
            done = bridge.run_tool("call_tool", {"name": "advance", "arguments": {
                "until": {"path": "game.held", "equals": False}}})
            assert done["matched"] is True and done["framesAdvanced"] == 3  # exactly when it was released
            assert done["delivered"] == [{"commandId": pressed["commandId"], "tool": "press", "ok": True,
                                          "result": {"released": pressed["game"]["frames"] + 3}}]
            assert bridge.run_tool("call_tool", {"name": "get_state"})["game"]["presses"] == 1
            # A short advance leaves it waiting, and says so.
            second = bridge.run_tool("call_tool", {"name": "press", "arguments": {"frames": 5}})
            short = bridge.run_tool("call_tool", {"name": "advance", "arguments": {"frames": 2}})
            assert short["framesAdvanced"] == 2 and "delivered" not in short
            assert short["stillPending"] == [{"commandId": second["commandId"], "tool": "press"}]
            rest = bridge.run_tool("call_tool", {"name": "advance", "arguments": {"frames": 3}})
            assert [d["tool"] for d in rest["delivered"]] == ["press"] and "stillPending" not in rest
        finally:
            bridge.shutdown()


@pytest.mark.slow
def test_pending_commands_are_bounded_and_the_bridge_keeps_serving() -> None:
    with handmade_game(start_paused=True) as game:
        bridge = bridge_for(game.port)
        try:
            for _n in range(MAX_PENDING):
                assert bridge.run_tool("call_tool", {"name": "key", "arguments": {"key": "a"}})["pending"] is True
            with pytest.raises(BridgeUsageError) as info:
                bridge.run_tool("call_tool", {"name": "key", "arguments": {"key": "b"}})
            assert f"{MAX_PENDING} commands on port {game.port} are waiting" in info.value.message
            assert "advance" in info.value.message
            assert key_commands(game) == MAX_PENDING  # the refused one was never sent
            assert bridge.run_tool("call_tool", {"name": "get_state", "arguments": {"summary": True}})["paused"]
            advanced = bridge.run_tool("call_tool", {"name": "advance", "arguments": {"frames": 1}})
            assert len(advanced["delivered"]) == MAX_PENDING
            assert bridge.run_tool("call_tool", {"name": "key", "arguments": {"key": "b"}})["pending"] is True
        finally:
            bridge.shutdown()


def test_a_restart_loses_pending_commands_and_says_so() -> None:
    ledger = PendingCommands()
    ledger.add(4, "key", generation=1)
    assert ledger.settle({"completedCommandId": 3}, 1) == {"stillPending": [{"commandId": 4, "tool": "key"}]}
    lost = ledger.settle({"completedCommandId": 9}, 2)
    assert "lost: the game restarted" in lost["pendingNote"] and "delivered" not in lost
    assert len(ledger) == 0
    ledger.add(5, "mouse", generation=2)
    ledger.check_room(1, None, 2)  # one waits: room for more


def test_the_pygame_wrapper_answers_paused_input_at_once(tmp_path: Path) -> None:
    pytest.importorskip("pygame")
    from pygame_helpers import CLOCKED, game_env, wrapped

    with wrapped(str(CLOCKED), env=game_env(tmp_path, paused=True)) as game:
        bridge = bridge_for(game.port)
        try:
            pressed = bridge.run_tool("call_tool", {"name": "key", "arguments": {"key": "left", "frames": 2}})
            assert pressed["pending"] is True and pressed["applied"] is False
            advanced = bridge.run_tool("call_tool", {"name": "advance", "arguments": {"frames": 3}})
            assert advanced["delivered"] == [{"commandId": pressed["commandId"], "tool": "key", "ok": True,
                                              "result": {"key": "left", "action": "press", "frames": 2}}]
            downs = [e for e in bridge.run_tool("call_tool", {"name": "get_events", "arguments": {"since": 0}})
                     ["events"] if e["m"] == "keydown:left"]
            assert len(downs) == 1  # delivered once
        finally:
            bridge.shutdown()


def test_the_pygame_wrappers_digest_shows_window_keys_pointer_and_rate(tmp_path: Path) -> None:
    pytest.importorskip("pygame")
    from pygame_helpers import CLOCKED, game_env, wrapped

    with wrapped(str(CLOCKED), env=game_env(tmp_path)) as game:
        bridge = bridge_for(game.port)
        try:
            bridge.run_tool("call_tool", {"name": "key", "arguments": {"key": "left", "action": "down"}})
            moved = bridge.run_tool("call_tool", {"name": "mouse", "arguments": {"x": 10, "y": 20, "action": "move"}})
            assert moved["screen"] == "Clocked Box"  # the window's caption
            digest = moved["game"]
            assert digest["window"] == "160x120" and digest["keysDown"] == "left" and digest["pointer"] == "10,20"
            assert isinstance(digest["fps"], int) and digest["fps"] > 0
            assert digest["frames"] >= 1  # the game's own state hook is still there
        finally:
            bridge.shutdown()
