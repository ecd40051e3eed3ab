"""Answers within every client's limits: no answer line is over ANSWER_LIMIT (the TypeScript
SDK's stdio transport closes the connection on a message over 10 MiB). A state too large is
refused with the parts to read, each of which fits; get_state {path, offset, limit} reads
them; a wait on a large value answers a glimpse of it."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest

from game_bridge_mcp.core.tools.state import ANSWER_LIMIT, PART_BUDGET, AnswerTooLarge, outline, state_part, too_large
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.mcp_server.results import call_result_line, error_result
from game_bridge_mcp.mcp_server.encoding import answer_size, dumps
from loop_helpers import bridge_for
from mcp_harness import connect, is_error, structured, text
from peers.fakegame import FakeGame

pytestmark = pytest.mark.timeout(180)


def entities(count: int) -> list[dict[str, Any]]:
    return [{"id": i, "kind": "crate", "x": i * 1.5, "y": -i, "tags": ["solid", "wood"], "note": "é\"\\" * 3}
            for i in range(count)]


STATE = {"frame": 7, "game": {"score": 1, "entities": entities(70_000), "blob": "b" * 2_000_000},
         "ui": {"screen": "Main", "text": "hello"}}


def line_of(value: Any, tool: str = "get_state", arguments: dict[str, Any] | None = None) -> bytes:
    return call_result_line(1, value, (tool, arguments or {}))


# ------------------------------------------------------------------ the size of a line

@pytest.mark.slow
def test_answer_size_is_the_lines_size() -> None:
    for value in ({"a": "x" * 1_500_000}, {"a": ["é\"\\\n" * 10] * 15_000}, {"frame": 1}):
        text_ = dumps(value)
        line = b"".join([call_result_line("some-id", dict(value))])
        assert len(line) <= answer_size(text_)
        if 9 * len(text_) > ANSWER_LIMIT:  # counted: exact but for the envelope
            assert answer_size(text_) - len(line) < 600, (answer_size(text_), len(line))


@pytest.mark.slow
def test_a_state_too_large_is_refused_with_the_parts_to_read() -> None:
    line = line_of(dict(STATE))
    assert len(line) < ANSWER_LIMIT
    result = json.loads(line)["result"]
    assert result["isError"] is True
    words = result["content"][0]["text"]
    assert words.startswith("BridgeUsageError: The answer is ") and "not sent" in words
    assert 'get_state {path: "game.entities", offset: 0, limit: ' in words
    assert 'get_state {path: "game.blob", offset: 0, limit: ' in words
    assert result["structuredContent"]["tooLarge"] is True and result["structuredContent"]["bytes"] > ANSWER_LIMIT


def calls_in(parts: list[str]) -> list[tuple[str, int | None, int | None]]:
    found = []
    for part in parts:
        match = re.match(r'get_state \{path: ("[^"]*")(?:, offset: (\d+), limit: (\d+))?\}', part)
        assert match, part
        found.append((json.loads(match.group(1)), int(match.group(2)) if match.group(2) else None,
                      int(match.group(3)) if match.group(3) else None))
    return found


@pytest.mark.slow
def test_every_part_named_fits_and_the_pages_cover_the_whole() -> None:
    error = too_large(STATE, 10 ** 8, "call_tool", {"name": "get_state"})
    assert isinstance(error, AnswerTooLarge) and error.name == "BridgeUsageError"
    calls = calls_in(error.parts)
    assert {path for path, _o, _l in calls} >= {"game", "ui", "frame"} or {path for path, _o, _l in calls} >= {
        "game.entities", "ui"}
    for path, offset, limit in calls:
        answer = {"port": 1, **state_part(STATE, path, offset, limit)}
        assert len(line_of(answer, "get_state", {"path": path})) <= ANSWER_LIMIT
        if limit is not None:  # page on to the end: every page fits, together they are the whole
            seen = len(answer["value"])
            while answer["next"] is not None:
                answer = {"port": 1, **state_part(STATE, path, answer["next"], limit)}
                assert len(line_of(answer)) <= ANSWER_LIMIT
                assert not json.loads(line_of(answer))["result"].get("isError")
                seen += len(answer["value"])
            assert seen == answer["total"]


def test_a_part_too_large_names_its_own_pages() -> None:
    whole = state_part(STATE, "game", None, None)
    error = too_large({"port": 1, **whole}, 10 ** 8, "get_state", {"path": "game"})
    assert any(part.startswith('get_state {path: "game.entities", offset: 0, limit: ') for part in error.parts)
    assert outline(["x"] * 3) == ['get_state {path: ""}: a list of 3, 13 bytes']


def test_other_answers_too_large_say_how_to_ask_for_less() -> None:
    line = line_of({"port": 1, "events": ["e" * 1000] * 5000}, "call_tool", {"name": "get_events"})
    words = json.loads(line)["result"]["content"][0]["text"]
    assert "Ask for less" in words and len(line) < 10_000


def test_an_image_counts_too() -> None:
    from game_bridge_mcp.core.screenshot import IMAGE_KEY, ImagePayload

    value = {"port": 1, "width": 4000, IMAGE_KEY: ImagePayload(b"\x89PNG" + b"\0" * (ANSWER_LIMIT * 3 // 4), "image/png")}
    result = json.loads(line_of(value, "call_tool", {"name": "get_screenshot"}))["result"]
    assert result["isError"] is True and "maxWidth" in result["content"][0]["text"]


def test_error_texts_are_capped() -> None:
    result = error_result(BridgeUsageError("y" * 5_000_000))
    assert len(result.content[0].text) < 300_000


# ------------------------------------------------------------------ get_state {path, offset, limit}

def test_state_parts() -> None:
    doc = {"a": {"b": [10, 11, 12, 13], "s": "abcdef"}, "k": {"x": 1, "y": 2, "z": 3}}
    assert state_part(doc, "a.b.2", None, None) == {"path": "a.b.2", "value": 12}
    assert state_part(doc, "a.b", 1, 2) == {"path": "a.b", "offset": 1, "total": 4, "value": [11, 12], "next": 3}
    assert state_part(doc, "a.b", 3, 5)["next"] is None
    assert state_part(doc, "a.b", 9, 5) == {"path": "a.b", "offset": 9, "total": 4, "value": [], "next": None}
    assert state_part(doc, "k", 1, None) == {"path": "k", "offset": 1, "total": 3, "value": {"y": 2, "z": 3},
                                             "next": None}
    assert state_part(doc, "a.s", 2, 2)["value"] == "cd"
    assert state_part(doc, "", 0, 1)["value"] == {"a": doc["a"]}
    with pytest.raises(BridgeUsageError, match=r"nothing at 'a\.c\.d' \('a' is an object with keys: b, s\)"):
        state_part(doc, "a.c.d", None, None)
    with pytest.raises(BridgeUsageError, match=r"'a\.b\.0' is int; offset and limit page"):
        state_part(doc, "a.b.0", 0, 1)
    with pytest.raises(BridgeUsageError, match=r"nothing at 'a\.b\.9' \('a\.b' is a list of 4\)"):
        state_part(doc, "a.b.9", None, None)


@pytest.mark.slow
def test_get_state_reads_a_large_state_in_parts_through_the_mcp_client() -> None:
    with FakeGame() as game:
        game.game["entities"] = entities(40_000)

        async def body() -> None:
            # a 40,000-entity state: a loaded machine took over the 5 s default to serve it
            async with connect(BridgeServer(bridge_for(game.port, timeout_ms=30000))) as client:
                refused = await client.call_tool("call_tool", {"name": "get_state"})
                assert is_error(refused) and "get_state {path: \"game.entities\", offset: 0, limit: " in text(refused)
                limit = int(re.search(r'"game\.entities", offset: 0, limit: (\d+)', text(refused)).group(1))
                assert limit * 2 > PART_BUDGET // 200  # pages of a useful size
                page = await client.call_tool("call_tool", {"name": "get_state", "arguments": {
                    "path": "game.entities", "offset": 0, "limit": limit}})
                assert not is_error(page), text(page)
                value = structured(page)
                assert value["total"] == 40_000 and value["value"][0]["id"] == 0 and value["next"] == limit
                missing = await client.call_tool("call_tool", {"name": "get_state", "arguments": {"path": "game.nope"}})
                assert is_error(missing) and "nothing at 'game.nope'" in text(missing)
                both = await client.call_tool("call_tool", {"name": "get_state", "arguments": {"summary": True, "path": "game"}})
                assert is_error(both) and "one or the other" in text(both)
                # the bridge keeps serving, and a wait on the large list answers a glimpse of it
                waited = await client.call_tool("call_tool", {"name": "wait_for", "arguments": {
                    "path": "game.entities", "equals": [], "timeoutMs": 300}})
                assert not is_error(waited), text(waited)
                assert len(text(waited)) < 20_000 and structured(waited)["matched"] is False

        anyio.run(body)
