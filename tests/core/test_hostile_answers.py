"""A game's answers cannot break or mislead the bridge: the
decoded size of an answer is bounded, absurd numbers give a clear error or a sane
answer (never an InternalError, never a port that stays broken), and a commandId the
game already reported completed cannot confirm a new command.

The games here are written by hand (``peers.hostile.routed``: raw bytes per path), so
they can say what no JSON encoder would.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import BridgeError, CommandTimeout, NotAGameSurface
from game_bridge_mcp.jsonio import MAX_VALUES, MAX_WHOLE, as_int, count_values, decode_json
from game_bridge_mcp.wire.frames import FrameClock
from peers.hostile import routed

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


def test_a_lone_surrogate_escape_is_shown_as_a_replacement_character_and_every_answer_stays_utf8(
        serve: Any) -> None:
    """JSON's grammar allows ``"\\ud800"`` alone; Unicode has no such character and UTF-8
    cannot carry it, so the answer (and a state file, a trace) could not be written: it
    becomes U+FFFD, in keys and values, where a pair's halves stay one character."""
    from game_bridge_mcp.core.states.store import fingerprint
    from game_bridge_mcp.mcp_server.results import call_result_line

    routes: dict[str, Any] = {"/health": HEALTH, "/state": (
        b'{"frame": 5, "completedCommandId": 0, "ui": {"screen": "Menu \\ud800"}, '
        b'"game": {"name\\udfff": ["x\\udc00y", {"face": "\\ud83d\\ude00"}], "path": "C:\\\\ud800"}}')}
    peer = serve(routed(routes))
    state = bridge_for(peer.port).run_tool("call_tool", {"name": "get_state"})
    assert state["ui"]["screen"] == "Menu \ufffd"
    assert state["game"] == {"name\ufffd": ["x\ufffdy", {"face": "\U0001f600"}], "path": "C:\\ud800"}
    line = call_result_line(1, state)  # the MCP answer is written (it raised UnicodeEncodeError)
    assert "Menu \ufffd" in json.loads(line.decode("utf-8"))["result"]["content"][0]["text"]
    assert fingerprint(state)[1] > 0  # and a save's fingerprint
    assert decode_json(b'"\\ud800"') == "\ufffd" and decode_json(b'"\\ud83d\\ude00"') == "\U0001f600"


def test_a_number_of_thousands_of_digits_is_a_clear_reason() -> None:
    with pytest.raises(ValueError) as info:
        decode_json(b'{"frame": ' + b"9" * 5000 + b"}")
    assert "number too long" in str(info.value)


# --------------------------------------------------------------------------- numbers
class NumberGame:
    """A hand-written game whose ``field`` carries ``raw`` (bytes as sent), with frames
    that advance 200 times a second and commands that complete at once, until
    :meth:`behave` makes every answer normal again."""

    def __init__(self, field: str, raw: Callable[[int], bytes]) -> None:
        self.field, self.raw = field, raw
        self.started = time.monotonic()
        self.last_id = 0
        self.normal = False

    def behave(self) -> None:
        self.normal = True

    def _frame(self) -> int:
        return int((time.monotonic() - self.started) * 200) + 10

    def _value(self, field: str, normal: int) -> bytes:
        if self.normal or field != self.field:
            return str(normal).encode()
        return self.raw(self._frame())

    def health(self, _target: str) -> tuple[int, bytes]:
        return 200, (b'{"ok": true, "frame": ' + self._value("frame", self._frame())
                     + b', "completedCommandId": ' + self._value("completedCommandId", self.last_id) + b"}")

    def state(self, _target: str) -> tuple[int, bytes]:
        return 200, (b'{"frame": ' + self._value("frame", self._frame()) + b', "completedCommandId": '
                     + self._value("completedCommandId", self.last_id) + b', "ui": {"screen": "Play"}, "game": {"x": 1}}')

    def command(self, _target: str) -> tuple[int, bytes]:
        self.last_id += 1
        return 200, (b'{"accepted": true, "frame": ' + self._value("frame", self._frame())
                     + b', "commandId": ' + self._value("commandId", self.last_id) + b"}")

    def routes(self) -> dict[str, Any]:
        return {"/health": self.health, "/state": self.state, "/command": self.command,
                "/tools": b'{"game": {"name": "Numbers"}, "toolsets": []}'}


ABSURD: dict[str, Callable[[int], bytes]] = {
    "10^400 and counting": lambda frame: str(10 ** 400 + frame).encode(),
    "2^53 and counting": lambda frame: str(2 ** 53 - 10_000 + frame).encode(),
    "2^63": lambda frame: str(2 ** 63).encode(),
    "1e400": lambda frame: b"1e400",
    "1e300": lambda frame: b"1e300",
    "NaN": lambda frame: b"NaN",
    "negative": lambda frame: str(-frame).encode(),
    "a fraction": lambda frame: b"0.5",
    "a string": lambda frame: b'"7"',
}


@pytest.mark.slow
@pytest.mark.parametrize("field", ["frame", "completedCommandId", "commandId"])
@pytest.mark.parametrize("absurd", list(ABSURD))
def test_absurd_numbers_give_a_clear_error_or_a_sane_answer_and_the_port_recovers(
        serve: Any, field: str, absurd: str) -> None:
    game = NumberGame(field, ABSURD[absurd])
    peer = serve(routed(game.routes()))
    bridge = bridge_for(peer.port)
    calls = [("raw_command", {"command": "poke", "timeoutMs": 300})] * 4 + [
        ("get_state", {"summary": True}), ("get_state", {}), ("get_health", {}),
        ("wait_for", {"path": "game.x", "equals": 1, "timeoutMs": 200})]
    for name, args in calls:
        try:
            answer = bridge.run_tool("call_tool", {"name": name, "arguments": args})
        except BridgeError as exc:  # a clear error is fine; anything else is a bug
            # GameOffline: on a loaded machine the in-process game may not answer within 300 ms.
            assert exc.name in ("CommandTimeout", "NotAGameSurface", "GameOffline"), exc.render()
        else:
            json.dumps(answer, allow_nan=False)  # what reaches the agent is JSON
    game.behave()  # the game answers normally again: so does the bridge
    first = bridge.run_tool("call_tool", {"name": "raw_command", "arguments": {"command": "poke"}})
    assert first["confirmation"] in ("completedCommandId", "frames-advanced")  # the count it saw last was absurd
    answer = bridge.run_tool("call_tool", {"name": "raw_command", "arguments": {"command": "poke"}})
    assert answer["confirmation"] == "completedCommandId" and "confirmationNote" not in answer


def test_as_int_reads_only_sane_whole_numbers() -> None:
    assert as_int(12) == 12 and as_int(12.0) == 12 and as_int(12.0, floats=False) is None
    assert as_int(MAX_WHOLE) == MAX_WHOLE and as_int(MAX_WHOLE + 1) is None and as_int(-MAX_WHOLE - 1) is None
    assert as_int(10 ** 400) is None and as_int(1e300) is None and as_int(float("inf")) is None
    assert as_int(float("nan")) is None and as_int(True) is None and as_int("7") is None
    assert as_int(-5) == -5 and as_int(-5, minimum=0) is None


# --------------------------------------------------------------------------- commandId
class ReusedIds:
    """A game that answers every command with the id it already reported completed (a
    counter that restarted without the process, or a lie); ``frames`` whether its frames
    advance."""

    def __init__(self, *, frames: bool) -> None:
        self.frames = frames
        self.started = time.monotonic()
        self.applied = 0
        self.honest = False

    def _frame(self) -> bytes:
        return str(int((time.monotonic() - self.started) * 200) + 10 if self.frames else 10).encode()

    def _completed(self) -> bytes:
        return str(self.applied if self.honest else 5).encode()

    def routes(self) -> dict[str, Any]:
        def health(_t: str) -> tuple[int, bytes]:
            return 200, b'{"ok": true, "frame": ' + self._frame() + b', "completedCommandId": ' + self._completed() + b"}"

        def state(_t: str) -> tuple[int, bytes]:
            return 200, b'{"frame": ' + self._frame() + b', "completedCommandId": ' + self._completed() + b"}"

        def command(_t: str) -> tuple[int, bytes]:
            self.applied += 1
            ident = self.applied if self.honest else 5
            return 200, b'{"accepted": true, "frame": ' + self._frame() + b', "commandId": ' + str(ident).encode() + b"}"

        return {"/health": health, "/state": state, "/command": command, "/tools": b'{"toolsets": []}'}


def test_a_commandid_already_completed_never_confirms_the_command_by_id(serve: Any) -> None:
    game = ReusedIds(frames=True)
    peer = serve(routed(game.routes()))
    bridge = bridge_for(peer.port)
    for _ in range(2):
        answer = bridge.run_tool("call_tool", {"name": "raw_command", "arguments": {"command": "poke"}})
        assert answer["confirmation"] == "frames-advanced", answer  # a weaker confirmation, labelled
        assert "not above the completedCommandId 5" in answer["confirmationNote"]
        assert answer["commandId"] == 5
    game.honest = True  # ids that move on again confirm by id again (once past the count last seen)
    bridge.run_tool("call_tool", {"name": "raw_command", "arguments": {"command": "poke"}})
    answer = bridge.run_tool("call_tool", {"name": "raw_command", "arguments": {"command": "poke"}})
    assert answer["confirmation"] == "completedCommandId" and "confirmationNote" not in answer


def test_without_frames_an_already_completed_commandid_is_a_commandtimeout(serve: Any) -> None:
    peer = serve(routed(ReusedIds(frames=False).routes()))
    bridge = bridge_for(peer.port)
    with pytest.raises(CommandTimeout) as info:
        bridge.run_tool("call_tool", {"name": "raw_command", "arguments": {"command": "poke", "timeoutMs": 300}})
    assert "could not be confirmed by its id" in info.value.message


def test_the_frame_clock_learns_a_period_from_frame_numbers_near_2_to_the_53() -> None:
    clock = FrameClock()
    first = MAX_WHOLE - 40
    for index in range(1, 40):  # one frame every 10 ms, polled just before and just after it began
        start = index * 0.01
        clock.observe(first + index - 1, start - 0.0002, start - 0.0001)
        clock.observe(first + index, start + 0.0001, start + 0.0002)
    assert clock.period_s is not None and abs(clock.period_s - 0.01) < 0.001
    predicted = clock.next_frame_at(first + 39)
    assert predicted is not None and abs(predicted - 0.40) < 0.002


def test_a_health_that_names_a_port_cannot_overwrite_the_bridges(serve: Any) -> None:
    peer = serve(routed({"/health": b'{"ok": true, "frame": 5, "port": "mine"}', "/state": STATE}))
    answer = bridge_for(peer.port).run_tool("call_tool", {"name": "get_health", "arguments": {}})
    assert answer["port"] == peer.port and list(answer)[0] == "port"
    assert answer["ok"] is True and answer["frame"] == 5
