"""Each event once (docs/contract.md, ``events``): call_tool's answer and get_state's
digest carry the events that are new since the bridge's last answer for the port, with
their fields, bounded, with a count of what was left out; ``get_events`` pages by cursor;
a restart resets the cursor and says so; a game without seq gets its recent events, as
before, with a note. Through the real MCP client, against the kit and the hand-made game."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import anyio
import pytest

from game_bridge_mcp.core.events import MAX_EVENT_CHARS, MAX_EVENTS_CHARS, SHOWN, EventsCursor, Shown
from game_bridge_mcp.game import GameBridge
from kit_helpers import looping
from loop_helpers import GAMES, MOVE, any_game, app_for, call, error_text, handmade_game, loads
from mcp_harness import connect, data
from peers.handmade import HandmadeGame


def seqs(body: dict[str, Any]) -> list[int]:
    return [e["seq"] for e in body.get("events", [])]


@pytest.mark.parametrize("kind", GAMES)
def test_each_event_is_reported_once_with_its_fields(kind: str) -> None:
    tool, arguments, until = MOVE[kind]
    with any_game(kind) as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                first = data(await call(client, tool, arguments, until=until))
                second = data(await call(client, tool, arguments))
                summary = data(await call(client, "get_state", {"summary": True}))
                # Settled, so nothing the move sets off (a merge, frames later) comes after it.
                settle = {"until": until} if kind == "kit" else {}
                third = data(await call(client, tool, arguments, **settle))
                seen = seqs(first) + seqs(second) + seqs(summary) + seqs(third)
                assert seen == sorted(set(seen)) and len(seen) >= 3  # each once, in order
                assert seqs(second) and seqs(third)
                field = {"kit": "frame", "handmade": "x"}[kind]
                moved = [e for e in second["events"] if field in e]
                assert moved and isinstance(moved[0][field], int)  # its fields, not only m
                again = data(await call(client, "get_state", {"summary": True}))
                assert again["events"] == []  # nothing new: nothing shown
        anyio.run(main)


def test_more_new_events_than_shown_are_counted_and_get_events_has_them() -> None:
    with handmade_game(event_buffer=64) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                data(await call(client, "noop"))
                body = data(await call(client, "emit", {"n": 25}))
                assert seqs(body) == list(range(16, 26)) and len(body["events"]) == SHOWN
                assert body["eventsLeftOut"] == {"count": 15, "since": 0}
                page = data(await call(client, "get_events", {"since": 0, "limit": 15}))
                assert [e["seq"] for e in page["events"]] == list(range(1, 16))
                assert page["next"] == 15 and page["dropped"] is False
                nothing = data(await call(client, "get_events"))  # the cursor is past them all
                assert nothing["events"] == [] and nothing["next"] == 25
        anyio.run(main)


def test_get_events_with_a_small_buffer_that_drops() -> None:
    with handmade_game(event_buffer=8) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                data(await call(client, "emit", {"n": 3}))
                body = data(await call(client, "emit", {"n": 30}))
                assert seqs(body) == list(range(26, 34))  # the 8 the game still lists
                assert body["eventsLeftOut"] == {"count": 22, "since": 3}
                page = data(await call(client, "get_events", {"since": 3}))
                assert page["dropped"] is True and [e["seq"] for e in page["events"]] == list(range(26, 34))
                assert page["next"] == 33
                limited = data(await call(client, "get_events", {"since": 28, "limit": 2}))
                assert [e["seq"] for e in limited["events"]] == [29, 30] and limited["next"] == 30
        anyio.run(main)


def test_a_since_beyond_the_newest_event_says_so_and_points_back() -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                data(await call(client, "emit", {"n": 4}))
                page = data(await call(client, "get_events", {"since": 500}))
                assert page["events"] == [] and page["next"] == 4
                assert "since 500 is beyond the game's newest event (4)" in page["note"]
                data(await call(client, "emit", {"n": 1}))
                page = data(await call(client, "get_events", {"since": page["next"]}))
                assert [e["seq"] for e in page["events"]] == [5]
        anyio.run(main)


@pytest.mark.parametrize("limit", [0, 1001, "10"])
def test_get_events_refuses_a_bad_limit(limit: Any) -> None:
    with handmade_game() as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                assert error_text(await call(client, "get_events", {"limit": limit})).startswith("BridgeUsageError: get_events")
        anyio.run(main)


def test_a_restart_resets_the_cursor_and_says_so() -> None:
    with handmade_game() as game:
        port = game.port

        async def main() -> None:
            async with connect(app_for(port)) as client:
                data(await call(client, "emit", {"n": 5}))
                game.stop()
                with HandmadeGame(port=port, hz=500.0) as again:
                    again_port = again.port
                    body = data(await call(client, "emit", {"n": 2}))
                    assert seqs(body) == [1, 2]
                    assert "restarted" in body["eventsNote"]
                    assert "eventsNote" not in data(await call(client, "emit", {"n": 1}))
                assert again_port == port
        anyio.run(main)


def test_seq_going_back_without_a_new_process_resets_the_cursor() -> None:
    with handmade_game(lies={"seq-restart"}) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                data(await call(client, "emit", {"n": 5}))
                body = data(await call(client, "emit", {"n": 2}))  # seq starts again at 1
                assert seqs(body) == [1, 2]
                assert body["eventsNote"].startswith("Event seq went back from 5 to 2")
                assert data(await call(client, "noop")).get("eventsNote") is None  # said once
        anyio.run(main)


def test_a_game_without_seq_gets_its_recent_events_as_before_with_a_note_once() -> None:
    with handmade_game(features=()) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                first = data(await call(client, "move", {"dx": 1}))
                assert first["events"] == ["moved"] and "cannot tell which are new" in first["eventsNote"]
                second = data(await call(client, "move", {"dx": 1}))
                assert second["events"] == ["moved", "moved"] and "eventsNote" not in second
                page = data(await call(client, "get_events"))
                assert page["events"] == ["moved", "moved"] and page["next"] is None
                assert "cannot tell which are new" in page["note"]
        anyio.run(main)


class Unadvertised(HandmadeGame):
    """Numbers its events in /state but does not advertise ``events``."""

    def health(self) -> dict[str, Any]:
        answer = super().health()
        answer["features"] = [f for f in answer["features"] if f != "events"]
        return answer


def test_numbered_events_without_the_feature_are_paged_from_the_state() -> None:
    with Unadvertised(hz=500.0) as game:
        async def main() -> None:
            async with connect(app_for(game.port)) as client:
                data(await call(client, "emit", {"n": 3}))
                page = data(await call(client, "get_events", {"since": 1}))
                assert [e["seq"] for e in page["events"]] == [2, 3] and page["next"] == 3
                assert "does not advertise events" in page["note"]
                assert not [r for r in game.requests if r.startswith("/events")]  # never asked
        anyio.run(main)


@contextmanager
def noisy_game() -> Iterator[int]:
    """A kit game whose one command makes 30 events with big fields."""
    bridge = GameBridge("Noisy", "1.0", state=lambda: {"game": {}}, register=False, environ={})

    @bridge.command()
    def shout(times: int = 30) -> dict[str, int]:
        """Make events with big fields."""
        for i in range(times):
            bridge.event("shout", i=i, text="x" * 2000, nested={"a": list(range(100))})
        return {"times": times}

    with looping(bridge) as port:
        yield port


def test_events_are_bounded_in_size_and_count() -> None:
    with noisy_game() as port:
        async def main() -> None:
            async with connect(app_for(port)) as client:
                assert data(await call(client, "shout", {"times": 0}))["events"] == []
                result = await call(client, "shout")
                body = loads(result)
                shown = body["events"]
                assert 1 <= len(shown) <= SHOWN
                assert all(len(str(e)) <= MAX_EVENT_CHARS * 2 for e in shown)
                assert sum(len(str(e)) for e in shown) <= MAX_EVENTS_CHARS * 2
                assert body["eventsLeftOut"]["count"] == 30 - len(shown)
                assert len(result.content[0].text) < 5000
        anyio.run(main)


def test_the_cursor_is_the_instances_and_a_new_generation_starts_a_new_one() -> None:
    cursor = EventsCursor()
    assert cursor.take([{"seq": 1, "m": "a"}, {"seq": 2, "m": "b"}]).events == [{"seq": 1, "m": "a"}, {"seq": 2, "m": "b"}]
    assert cursor.take([{"seq": 1, "m": "a"}, {"seq": 2, "m": "b"}]).events == []
    new = cursor.take([{"seq": 2, "m": "b"}, {"seq": 3, "m": "c"}])
    assert new.events == [{"seq": 3, "m": "c"}] and new.left_out == 0
    gap = cursor.take([{"seq": 20, "m": "t"}])
    assert gap.left_out == 16 and gap.since == 3
    assert cursor.take("not a list").events == [] and cursor.take([None, 3.5]).numbered is False
    with handmade_game() as game:
        from game_bridge_mcp.wire.client import GameClient
        client = GameClient(game.port)
        shown = Shown()
        shown.events(client.generation).take(client.state()["events"] + [{"seq": 9, "m": "x"}])
        assert shown.events(client.generation).seq == 9
        client.forget()
        restarted = shown.events(client.generation)
        assert restarted.seq is None
        assert "restarted" in (restarted.take([{"seq": 1, "m": "a"}]).note or "")
        shown.new_session()  # a replay's next recording session: nothing said of a restart
        assert shown.events(client.generation).take([{"seq": 1, "m": "a"}]).note is None


class Counted(dict):  # type: ignore[type-arg]
    """An event that counts how often its seq is read."""

    reads = 0

    def get(self, key: Any, default: Any = None) -> Any:
        if key == "seq":
            Counted.reads += 1
        return super().get(key, default)


def test_an_answer_reads_only_the_new_end_of_a_long_buffer() -> None:
    """A game keeps hundreds of events; an answer reads from the newest back to the cursor
    (or SHOWN of them), not the whole buffer each time, and says the same as a whole read."""
    from game_bridge_mcp.core.digest import recent_events

    buffer = [Counted(seq=i, m=f"merge:{i}") for i in range(1, 501)]
    cursor = EventsCursor()
    Counted.reads = 0
    first = cursor.take(buffer)
    assert [e["seq"] for e in first.events] == list(range(491, 501)) and Counted.reads <= SHOWN + 1
    Counted.reads = 0
    buffer += [Counted(seq=501, m="x"), Counted(seq=502, m="y")]
    second = cursor.take(buffer)
    assert [e["seq"] for e in second.events] == [501, 502] and second.left_out == 0
    assert Counted.reads <= 3  # the two new ones and the one at the cursor
    more = buffer + [Counted(seq=i, m="z") for i in range(503, 540)]
    third = cursor.take(more)
    assert len(third.events) == SHOWN and third.left_out == 37 - SHOWN and third.since == 502
    assert recent_events({"events": [f"e{i}" for i in range(300)]}, 3) == ["e297", "e298", "e299"]
