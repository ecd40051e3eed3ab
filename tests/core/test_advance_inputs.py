"""``advance {frames, inputs}``: input delivered at given frames of a paused game, for every
game with clock and input: the hand-made reference game (written from the contract
alone), an unmodified pygame game through the pygame wrapper, and a web page through the
browser wrapper over MCP, each checked to the frame; bad inputs refused before any frame
runs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.core.tools.calls import call_tool
from game_bridge_mcp.core.tools.state import get_state
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import ProcessGuard
from loop_helpers import bridge_for
from mcp_harness import connect, data, is_error, text
from peers.handmade import HandmadeGame
from pygame_helpers import CLOCKED, game_env, wrapped as pygame_wrapped
from web_helpers import PAGES, wrapped as browser_wrapped

pytestmark = pytest.mark.timeout(120)


def advance(bridge: Bridge, port: int, **arguments: Any) -> dict[str, Any]:
    return call_tool(bridge, name="advance", arguments=arguments, port=port)


@pytest.mark.parametrize("arguments, needle", [
    ({"inputs": [{"at": 0, "key": "right"}]}, "inputs needs 'frames'"),
    ({"frames": 5, "inputs": [{"at": 5, "key": "right"}]}, "'at' must be a whole frame from 0 to 4"),
    ({"frames": 5, "inputs": [{"at": 0}]}, "needs exactly one of key, mouse or text, not none"),
    ({"frames": 5, "inputs": [{"at": 0, "key": "a", "text": "b"}]}, "exactly one of key, mouse or text, not key, text"),
    ({"frames": 5, "inputs": [{"at": 0, "key": "a", "hold": 3}]}, "unknown field 'hold'"),
    ({"frames": 5, "inputs": [{"at": 0, "key": "a", "action": "tap"}]}, "'action' is one of press, down, up"),
    ({"frames": 5, "inputs": [{"at": 0, "key": "a", "action": "up", "frames": 2}]}, "a up has none"),
    ({"frames": 5, "inputs": [{"at": 0, "mouse": {"x": -1, "y": 2}}]}, "'mouse.x' must be a whole number"),
    ({"frames": 5, "inputs": [{"at": 0, "mouse": {"x": 1, "y": 2, "button": 4}}]}, "'mouse.button' is 1"),
    ({"frames": 5, "inputs": [{"at": 0, "text": ""}]}, "'text' must be a string of 1 to 1000"),
    ({"frames": 5, "inputs": "right"}, "'inputs' must be of type array"),
    ({"frames": 5, "inputs": []}, "holds 1 to 256 inputs"),
    ({"frames": 5, "until": {"path": "simFrame", "equals": 9}, "inputs": [{"at": 0, "key": "a"}]}, "not 'until'"),
])
def test_bad_inputs_are_refused_before_any_frame_runs(arguments: dict[str, Any], needle: str) -> None:
    with HandmadeGame(hz=500, start_paused=True) as game:
        bridge = bridge_for(game.port)
        before = get_state(bridge, port=game.port, summary=True)["simFrame"]
        with pytest.raises(BridgeUsageError) as info:
            advance(bridge, game.port, **arguments)
        assert needle in info.value.render(), info.value.render()
        assert get_state(bridge, port=game.port, summary=True)["simFrame"] == before
        assert game.snapshot()["game"]["lastInput"] is None  # nothing was sent


def test_the_hand_made_game_gets_each_input_and_exactly_the_frames() -> None:
    with HandmadeGame(hz=500, start_paused=True) as game:
        bridge = bridge_for(game.port)
        before = get_state(bridge, port=game.port, summary=True)["simFrame"]
        answer = advance(bridge, game.port, frames=12, inputs=[
            {"at": 0, "key": "right", "action": "down"}, {"at": 4, "mouse": {"x": 3, "y": 4}},
            {"at": 4, "key": "space"}, {"at": 9, "text": "hi"}])
        assert answer["framesAdvanced"] == 12 and answer["simFrame"] == before + 12 and answer["paused"] is True
        assert [(i["at"], i["tool"], i.get("ok")) for i in answer["inputs"]] == [
            (0, "key", True), (4, "mouse", True), (4, "key", True), (9, "text", True)]
        assert game.snapshot()["game"]["lastInput"] == {"device": "text", "text": "hi"}
        assert [e["device"] for e in game.snapshot()["events"] if e["m"] == "input"][-4:] == ["key", "mouse", "key", "text"]
    with HandmadeGame(hz=500, start_paused=True, features={"results", "after", "clock"}) as game:
        with pytest.raises(BridgeUsageError, match="does not take input"):
            advance(bridge_for(game.port), game.port, frames=3, inputs=[{"at": 0, "key": "a"}])


def test_a_pygame_game_holds_right_for_exactly_ten_frames_and_reads_space_at_its_frame(tmp_path: Path) -> None:
    with pygame_wrapped(str(CLOCKED), env=game_env(tmp_path, paused=True)) as game:
        bridge = bridge_for(game.port)
        plan = [{"at": 0, "key": "right", "action": "down"}, {"at": 10, "key": "space"},
                {"at": 10, "key": "right", "action": "up"}]
        results = []
        for _ in range(2):  # the same call, the same frames
            start = game.doc("/state")["game"]
            answer = advance(bridge, game.port, frames=30, inputs=plan)
            assert answer["framesAdvanced"] == 30 and all(i["ok"] for i in answer["inputs"]), answer["inputs"]
            after = game.doc("/state")["game"]
            results.append((after["right"] - start["right"], [f - start["frames"] for f in after["spaces"]
                                                             if f > start["frames"]]))
        assert results[0] == results[1] == (10, [11])  # held in frames 1-10; space read in frame 11


@pytest.mark.slow
def test_a_web_page_over_mcp_inputs_at_their_frames_and_the_picture_after(guard: ProcessGuard) -> None:
    with browser_wrapped(guard, "--size", "320x240", str(PAGES)) as game:
        bridge = bridge_for(game.port)

        async def main() -> None:
            async with connect(BridgeServer(bridge)) as client:
                start = game.doc("/state")["game"]
                result = await client.call_tool("call_tool", {"port": game.port, "name": "advance", "arguments": {
                    "frames": 20, "screenshot": True, "inputs": [
                        {"at": 0, "key": "right", "action": "down"}, {"at": 12, "mouse": {"x": 30, "y": 45}},
                        {"at": 10, "key": "right", "action": "up"}, {"at": 15, "key": "right", "frames": 3}]}})
                assert not is_error(result), text(result)
                answer = json.loads(text(result))
                assert [i["at"] for i in answer["inputs"]] == [0, 10, 12, 15] and all(i["ok"] for i in answer["inputs"])
                after = game.doc("/state")["game"]
                assert after["frames"] - start["frames"] == 20
                assert after["x"] - start["x"] == 10 + 3  # held frames 1-10, then 16-18
                assert after["clicks"][-1] == [30, 45, 0]
                assert answer["screenshot"]["changed"] is True and answer["screenshot"]["window"] == {"width": 320, "height": 240}
                assert result.content[1].type == "image" and base64.b64decode(result.content[1].data)[:4] == b"\x89PNG"
                same = data(await client.call_tool("call_tool", {"port": game.port, "name": "advance",
                                                                 "arguments": {"frames": 1, "screenshot": True}}))
                assert same["framesAdvanced"] == 1 and "inputs" not in same
        anyio.run(main)
