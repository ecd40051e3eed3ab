"""Waiting on the picture (issue 37): ``advance``'s, ``call_tool``'s and ``wait_for``'s
``{screen: "changes"}`` and ``{screen: "stable", frames}``, whole or in a region, through the
real MCP client, against the kit's demo (its picture is raw pixels the kit hashes itself,
``/screenshot?hash=1``) and the hand-made reference game (no hash, or no screenshots)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from game_bridge_mcp.mcp_server.adapter import BridgeServer
from kit_helpers import demo, doc, fetch
from loop_helpers import bridge_for
from mcp_harness import connect, data, is_error, text
from peers.handmade import HandmadeGame
from test_clock import MOVES, SEED, reference

pytestmark = pytest.mark.timeout(60)

#: The demo's "SCORE n" line, in its picture's pixels (the best score and the fruit are below).
SCORE = {"x": 0, "y": 0, "width": 200, "height": 40}


async def call(client: Any, name: str, port: int, **arguments: Any) -> Any:
    return await client.call_tool("call_tool", {"name": name, "port": port, "arguments": arguments})


def test_the_kit_hashes_its_picture_whole_or_in_a_region() -> None:
    with demo() as port:
        whole = doc(port, "/screenshot?hash=1")
        assert whole["ok"] is True and len(whole["hash"]) == 24 and isinstance(whole["frame"], int)
        assert doc(port, "/screenshot?hash=1")["hash"] == whole["hash"]  # paused: the same picture
        region = doc(port, f"/screenshot?hash=1&x=0&y=0&width={SCORE['width']}&height={SCORE['height']}")
        assert region["hash"] != whole["hash"]
        status, refused = fetch(port, "/screenshot?hash=1&x=300&y=0&width=200&height=10")
        assert status == 400 and "not inside the 384x616 picture" in refused["error"]
        status, refused = fetch(port, "/screenshot?hash=1&x=0&y=0")
        assert status == 400 and "x, y, width and height" in refused["error"]


def test_advance_until_the_picture_changes_or_holds_still() -> None:
    expected = reference(SEED, MOVES)
    frames, merged = next((f, m) for f, m in expected if m is not None)
    moves = MOVES[:[m for _f, m in expected].index(merged) + 1]
    with demo() as port:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(port))) as client:
                for x in moves[:-1]:  # the moves before the first merge, each settled
                    assert not is_error(await call(client, "drop", port, x=x))
                    done = data(await call(client, "advance", port, until={"path": "game.moving", "equals": 0}))
                    assert done["matched"] is True
                assert not is_error(await call(client, "drop", port, x=moves[-1]))
                # the score's corner of the picture changes at exactly the frame of the merge
                scored = data(await call(client, "advance", port, until={"screen": "changes", "region": SCORE}))
                assert scored["matched"] is True and scored["framesAdvanced"] == merged, scored
                assert len(scored["screenHash"]) == 24
                # then it settles: the first frame from which it held still for 5 frames
                still = data(await call(client, "advance", port, until={"screen": "stable", "frames": 5}))
                assert still["matched"] is True and still["game"]["moving"] == 0, still
                assert still["simFrame"] - still.get("lastChangeFrame", still["simFrame"] - still["framesAdvanced"]) == 5
                # a drop (applied now, shown from the next frame on), then the first frame that shows it
                assert not is_error(await call(client, "drop", port, x=0.0))
                moved = data(await call(client, "advance", port, until={"screen": "changes"}))
                assert moved["matched"] is True and moved["framesAdvanced"] >= 1
                # while a fruit falls the picture keeps changing: not stable for 40 frames within 10
                moving = data(await call(client, "advance", port, until={"screen": "stable", "frames": 40},
                                         maxFrames=10))
                assert moving["matched"] is False and moving["framesAdvanced"] == 10
                assert moving["simFrame"] - 10 < moving["lastChangeFrame"] <= moving["simFrame"], moving
        anyio.run(main)


def test_wait_for_and_until_on_a_running_game() -> None:
    with demo(paused=False) as port:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(port))) as client:
                held = data(await call(client, "wait_for", port, screen="stable", frames=3, timeoutMs=5000))
                assert held["matched"] is True and "screenHash" in held, held
                dropped = data(await client.call_tool("call_tool", {"name": "drop", "port": port, "arguments": {"x": 1.0},
                                                                    "until": {"screen": "changes", "timeoutMs": 5000}}))
                assert dropped["settled"] is True and "screenHash" in dropped, dropped
        anyio.run(main)


@pytest.mark.parametrize("arguments, needle", [
    ({"until": {"screen": "moves"}}, 'screen is "changes" or "stable"'),
    ({"until": {"screen": "stable", "frames": 0}}, "frames must be a whole number from 1"),
    ({"until": {"frames": 5}}, "frames and region go with screen"),
    ({"until": {"screen": "changes", "region": {"x": 1, "y": 1}}}, "region is {x, y, width, height}"),
    ({"until": {"screen": "changes", "region": {"x": 1000, "y": 0, "width": 5, "height": 5}}},
     "not inside the 384x616 picture"),
    ({"until": {"screen": "changes", "path": "game.x"}}, "got screen 'changes' and a path"),
])
def test_bad_picture_conditions_are_clear_errors(arguments: dict[str, Any], needle: str) -> None:
    with demo() as port:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(port))) as client:
                bad = await call(client, "advance", port, **arguments)
                assert is_error(bad) and needle in text(bad), text(bad)
                assert data(await call(client, "advance", port, frames=2))["framesAdvanced"] == 2  # still serving
        anyio.run(main)


def test_a_game_without_screenshots_or_without_the_hash() -> None:
    with HandmadeGame(hz=500, start_paused=True, features={"results", "clock"}) as blind, \
            HandmadeGame(hz=500, start_paused=True) as plain:
        async def main() -> None:
            async with connect(BridgeServer(bridge_for(blind.port))) as client:
                for name, args in (("advance", {"until": {"screen": "changes"}}),
                                   ("wait_for", {"screen": "stable"})):
                    refused = await call(client, name, blind.port, **args)
                    assert is_error(refused) and "does not serve screenshots" in text(refused), text(refused)
                    assert "screenshot feature" in text(refused)
            async with connect(BridgeServer(bridge_for(plain.port))) as client:
                # its /screenshot knows no hash: the bridge hashes the image it sends instead
                still = data(await call(client, "advance", plain.port, until={"screen": "stable", "frames": 3}))
                assert still["matched"] is True and still["framesAdvanced"] == 3, still
                region = await call(client, "advance", plain.port,
                                    until={"screen": "changes", "region": {"x": 0, "y": 0, "width": 4, "height": 4}})
                assert is_error(region) and "does not hash its picture" in text(region), text(region)
        anyio.run(main)
