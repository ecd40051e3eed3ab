"""A game's answers cannot break or mislead the bridge (issue 11, items 4 and 5): the
decoded size of an answer is bounded, absurd numbers give a clear error or a sane
answer (never an InternalError, never a port that stays broken), and a commandId the
game already reported completed cannot confirm a new command.

The games here are written by hand (``peers.hostile.routed``: raw bytes per path), so
they can say what no JSON encoder would.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import BridgeError, NotAGameSurface
from game_bridge_mcp.jsonio import MAX_VALUES, count_values, decode_json
from peers.hostile import routed, serve  # noqa: F401

pytestmark = pytest.mark.timeout(120)

HEALTH = b'{"ok": true, "frame": 5}'
STATE = b'{"frame": 5, "completedCommandId": 0, "ui": {"screen": "Menu"}, "game": {"score": 1}}'


def bridge_for(port: int) -> Bridge:
    return Bridge(Config(port=port, scan=False, registry=False, timeout_ms=3000))


# --------------------------------------------------------------------------- decoded size
def test_an_answer_of_too_many_values_is_refused_and_the_port_recovers(serve: Any) -> None:
    routes: dict[str, Any] = {"/health": HEALTH}
    # 4.8 MB of empty objects: 1.6 million dicts if decoded (115 MB); the bound is in values.
    routes["/state"] = b'{"frame": 5, "junk": [' + b"{}," * (MAX_VALUES // 2 + 1000) + b"{}]}"
    peer = serve(routed(routes))
    bridge = bridge_for(peer.port)
    with pytest.raises(NotAGameSurface) as info:
        bridge.run_tool("call_tool", {"name": "get_state"})
    text = info.value.render()
    assert "GET /state" in text and "objects, arrays and commas" in text and f"{MAX_VALUES:,}" in text
    routes["/state"] = STATE  # the game answers normally again: so does the bridge
    assert bridge.run_tool("call_tool", {"name": "get_state"})["ui"]["screen"] == "Menu"


def test_the_count_is_of_values_not_of_commas_inside_strings() -> None:
    text = b'{"csv": "' + b"a,[{" * (MAX_VALUES // 2) + b'", "n": [1, 2]}'
    assert count_values(text) == 4  # { , [ ,
    assert decode_json(text)["n"] == [1, 2]
    assert count_values(b"[1,2]") <= 5  # a short body is not even counted


def test_a_number_of_thousands_of_digits_is_a_clear_reason() -> None:
    with pytest.raises(ValueError) as info:
        decode_json(b'{"frame": ' + b"9" * 5000 + b"}")
    assert "number too long" in str(info.value)
