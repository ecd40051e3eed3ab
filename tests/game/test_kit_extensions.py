"""The kit's extensions on the wire, exactly as docs/contract.md spells them: features,
results, events by cursor, after (held requests) and view=digest. Real HTTP on port 0."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import pytest

from game_bridge_mcp.game import GameBridge, RawJson
from game_bridge_mcp.game.kit.outcomes import RESULT_LIMIT, RESULTS_KEPT
from game_bridge_mcp.game.kit.state import UI_TEXT_LIMIT
from kit_helpers import Held, command, doc, fetch, looping, outcome, settled
from peers.fakegame import wait_until

pytestmark = pytest.mark.timeout(30)


class Rules(ValueError):
    """How the test game says no."""


def make(**kwargs: Any) -> tuple[GameBridge, dict[str, Any]]:
    world: dict[str, Any] = {"score": 0, "state_calls": 0, "big": [{"id": i} for i in range(50)]}

    def state() -> dict[str, Any]:
        world["state_calls"] += 1
        return {"ui": {"screen": "Main", "text": "|..|"}, "paused": False, "extra": {"a": 1},
                "game": {"score": world["score"], "name": "test", "ratio": 0.5, "flag": True,
                         "none": None, "entities": world["big"], "blob": RawJson('{"x":1}')}}

    kwargs.setdefault("register", False)
    bridge = GameBridge("Ext Test", "1", state=state, **kwargs)

    @bridge.command
    def add(n: int) -> dict[str, Any]:
        """Add n."""
        if n < 0:
            raise Rules(f"n must not be negative (got {n})")
        world["score"] += n
        return {"score": world["score"]}

    @bridge.command
    def quiet() -> None:
        """Return nothing."""

    @bridge.command
    def crash() -> None:
        """A bug."""
        raise KeyError("missing")

    @bridge.command
    def huge() -> list[int]:
        """Too much to return."""
        return list(range(RESULT_LIMIT))

    @bridge.command
    def odd() -> object:
        """Not JSON."""
        return object()

    @bridge.command
    def note(text: str) -> None:
        """Record an event."""
        bridge.event("note", text=text, seq=-5)

    return bridge, world


def snapshot(bridge: GameBridge) -> dict[str, Any]:
    """The /state document as a client decodes it."""
    return json.loads(bridge.encoded_state())


@pytest.fixture
def game() -> Iterator[tuple[GameBridge, dict[str, Any], int]]:
    bridge, world = make()
    with looping(bridge) as port:
        yield bridge, world, port


# --------------------------------------------------------------------------- features

def test_health_advertises_what_the_kit_implements() -> None:
    assert make()[0].health()["features"] == ["results", "after", "view", "events"]
    assert make(clock=True)[0].health()["features"] == ["results", "after", "view", "events", "clock", "snapshot"]
    assert make(clock=True, snapshot=False)[0].health()["features"] == ["results", "after", "view", "events", "clock"]
    bridge, _ = make()
    bridge.screenshot(lambda: None)
    bridge.advertise("input", "input")
    assert bridge.health()["features"] == ["results", "after", "view", "events", "screenshot", "input"]


def test_health_on_the_wire(game: Any) -> None:
    _bridge, _world, port = game
    health = doc(port, "/health")
    assert set(health) == {"ok", "frame", "completedCommandId", "features"}
    assert health["features"] == ["results", "after", "view", "events"]


# --------------------------------------------------------------------------- results

def test_each_outcome_shape(game: Any) -> None:
    _bridge, _world, port = game
    state = settled(port, "cmd=add&n=5")
    assert outcome(state, 1) == {"id": 1, "ok": True, "result": {"score": 5}}
    assert outcome(settled(port, "cmd=quiet"), 2) == {"id": 2, "ok": True}
    assert outcome(settled(port, "cmd=add&n=-2"), 3) == {"id": 3, "ok": False,
                                                        "error": "n must not be negative (got -2)"}
    assert outcome(settled(port, "cmd=crash"), 4) == {"id": 4, "ok": False, "error": "KeyError: 'missing'"}
    big = outcome(settled(port, "cmd=huge"), 5)
    assert big["ok"] is True and "left out" in big["result"] and str(RESULT_LIMIT) in big["result"]
    odd = outcome(settled(port, "cmd=odd"), 6)
    assert odd["ok"] is True and "left out" in odd["result"] and "object" in odd["result"]
    state = doc(port, "/state")
    assert [entry["id"] for entry in state["commandResults"]] == [1, 2, 3, 4, 5, 6]  # oldest first
    assert state["game"]["score"] == 5  # the refused add changed nothing


def test_results_keep_the_newest_and_each_entry_arrives_with_its_completion(game: Any) -> None:
    _bridge, _world, port = game
    ids = [command(port, f"cmd=add&n={i}") for i in range(RESULTS_KEPT + 10)]
    seen = 0
    while True:  # every snapshot taken meanwhile: the newest entry is the completed command
        state = doc(port, "/state?view=digest")
        if state["commandResults"]:
            assert state["commandResults"][-1]["id"] == state["completedCommandId"]
            seen += 1
        if state["completedCommandId"] == ids[-1]:
            break
    results = state["commandResults"]
    assert len(results) == RESULTS_KEPT >= 16
    assert [entry["id"] for entry in results] == ids[-RESULTS_KEPT:]
    assert seen >= 1


def test_a_deferred_command_completes_later_and_in_order() -> None:
    bridge, _world = make()
    handles: list[Any] = []

    @bridge.command
    def slow() -> Any:
        """Completes when the test says so."""
        handles.append(bridge.defer())
        return handles[-1]

    @bridge.command
    def gate() -> Any:
        """Holds the queue until completed."""
        handles.append(bridge.defer(hold=True))
        return handles[-1]

    bridge.start(0)
    try:
        port = int(bridge.port or 0)
        first, second = command(port, "cmd=slow"), command(port, "cmd=add&n=1")
        bridge.pump()
        assert bridge.completed_command_id == 0 and snapshot(bridge)["game"]["score"] == 1  # ran, not published
        handles[0].complete({"took": "a while"})
        state = snapshot(bridge)
        assert state["completedCommandId"] == second
        assert outcome(state, first) == {"id": first, "ok": True, "result": {"took": "a while"}}
        gated, after_gate = command(port, "cmd=gate"), command(port, "cmd=add&n=10")
        bridge.pump()
        bridge.pump()
        assert snapshot(bridge)["game"]["score"] == 1  # held behind the gate
        handles[1].fail("the gate stayed shut")
        bridge.pump()
        state = snapshot(bridge)
        assert state["game"]["score"] == 11 and state["completedCommandId"] == after_gate
        assert outcome(state, gated) == {"id": gated, "ok": False, "error": "the gate stayed shut"}
        handles[1].complete("late")  # a second completion is ignored
        assert outcome(snapshot(bridge), gated)["ok"] is False
        with pytest.raises(RuntimeError, match="inside a command"):
            bridge.defer()
    finally:
        bridge.stop()


# --------------------------------------------------------------------------- events

def test_events_carry_seq_and_are_read_by_cursor_from_a_small_buffer_that_drops() -> None:
    bridge, _world = make(event_buffer=5, max_events=3)
    with looping(bridge) as port:
        for i in range(12):
            bridge.event(f"e{i}", i=i)
        state = doc(port, "/state")
        assert [(e["seq"], e["m"]) for e in state["events"]] == [(10, "e9"), (11, "e10"), (12, "e11")]
        assert state["events"][-1]["i"] == 11 and isinstance(state["events"][-1]["frame"], int)
        every = doc(port, "/events")
        assert every["dropped"] is True and every["next"] == 12
        assert [e["seq"] for e in every["events"]] == [8, 9, 10, 11, 12]
        assert doc(port, "/events?since=7") == {**every, "dropped": False}
        assert [e["seq"] for e in doc(port, "/events?since=9")["events"]] == [10, 11, 12]
        assert doc(port, "/events?since=12") == {"events": [], "next": 12, "dropped": False}
        assert doc(port, "/events?since=500") == {"events": [], "next": 500, "dropped": False}
        page = doc(port, "/events?since=8&limit=2")
        assert [e["seq"] for e in page["events"]] == [9, 10] and page["next"] == 10
        assert page["dropped"] is False
        # The ring wraps again and again; seq goes on counting.
        for i in range(7):
            bridge.event(f"f{i}")
        later = doc(port, "/events?since=12")
        assert [e["seq"] for e in later["events"]] == [15, 16, 17, 18, 19] and later["dropped"] is True
        # A game's field called seq (or m, or frame) does not overwrite the kit's.
        settled(port, "cmd=note&text=hi")
        last = doc(port, "/events?since=19")["events"]
        assert [(e["seq"], e["m"], e["text"]) for e in last] == [(20, "note", "hi")]


@pytest.mark.parametrize("query, fragment", [
    ("since=-1", "since must be at least 0"),
    ("since=abc", "since must be a whole number"),
    ("since=1.5", "since must be a whole number"),
    ("limit=0", "limit must be from 1 to 1000, got 0"),
    ("limit=1001", "limit must be from 1 to 1000, got 1001"),
    ("since=1&since=2", "given more than once"),
])
def test_bad_event_cursors_are_refused(game: Any, query: str, fragment: str) -> None:
    _bridge, _world, port = game
    status, body = fetch(port, "/events?" + query)
    assert status == 400 and body["ok"] is False and fragment in body["error"]


def test_events_default_limit_is_100() -> None:
    bridge, _world = make(event_buffer=300)
    for i in range(150):
        bridge.event(f"e{i}")
    assert len(bridge.events_since(0)["events"]) == 100
    with looping(bridge) as port:
        assert doc(port, "/events")["next"] == 100
        assert len(doc(port, "/events?limit=1000")["events"]) == 150


# --------------------------------------------------------------------------- after

def held_until_waiting(bridge: GameBridge, port: int, path: str) -> Held:
    """Send ``path`` and return once the kit is holding it (inside wait_completed)."""
    entered = threading.Event()
    original = bridge.wait_completed

    def instrumented(after: int, timeout_s: float) -> bool:
        entered.set()
        return original(after, timeout_s)

    bridge.wait_completed = instrumented  # type: ignore[method-assign]
    request = Held(port, path)
    assert entered.wait(5), "the request never reached the wait"
    bridge.wait_completed = original  # type: ignore[method-assign]
    return request


@pytest.mark.parametrize("plain, joiner", [("/state", "?"), ("/health", "?"), ("/state?view=digest", "&")])
def test_after_is_held_until_the_command_completes(plain: str, joiner: str) -> None:
    bridge, _world = make()
    port = bridge.start(0)
    try:
        command_id = command(port, "cmd=add&n=3")
        request = held_until_waiting(bridge, port, f"{plain}{joiner}after={command_id}&waitMs=10000")
        assert not request.answered  # nothing has applied the command: it waits
        assert doc(port, "/health")["completedCommandId"] == 0  # other requests are answered meanwhile
        bridge.pump()  # the game thread applies it; the held answer goes out
        status, body = request.join(5)
        assert status == 200 and body["completedCommandId"] == command_id
        assert list(body) == list(doc(port, plain))  # answered exactly as without the parameters
        if plain.startswith("/state"):
            assert outcome(body, command_id)["result"] == {"score": 3}
    finally:
        bridge.stop()


def test_after_ends_at_wait_ms_with_the_state_as_it_is() -> None:
    bridge, _world = make()
    port = bridge.start(0)
    try:
        command(port, "cmd=add&n=3")
        status, body = fetch(port, "/state?after=1&waitMs=30")
        assert status == 200 and body["completedCommandId"] == 0 and body["commandResults"] == []
        assert fetch(port, "/health?after=1&waitMs=0")[1]["completedCommandId"] == 0
        assert fetch(port, "/state?after=0&waitMs=10000")[0] == 200  # already satisfied: at once
        assert fetch(port, "/state?waitMs=10000")[0] == 200  # waitMs alone: no wait
    finally:
        bridge.stop()


def test_held_requests_end_when_the_game_stops() -> None:
    bridge, _world = make()
    port = bridge.start(0)
    requests = [held_until_waiting(bridge, port, f"/state?after={n}&waitMs=10000") for n in (1, 5)]
    requests.append(held_until_waiting(bridge, port, "/health?after=1&waitMs=10000"))
    bridge.stop()
    for request in requests:
        status, body = request.join(5)  # answered, well before the 10 s the requests asked for
        assert status == 200 and body["completedCommandId"] == 0


def test_held_requests_end_when_an_agent_closes_the_game() -> None:
    bridge, _world = make()
    with looping(bridge) as port:
        request = held_until_waiting(bridge, port, "/state?after=99&waitMs=10000")
        command(port, "cmd=close")
        status, body = request.join(5)
        assert status == 200 and body["completedCommandId"] == 1  # the close itself
        wait_until(lambda: not bridge.running)


@pytest.mark.parametrize("query, fragment", [
    ("after=-1", "after must be at least 0"),
    ("after=x", "after must be a whole number"),
    ("after=1&waitMs=-5", "waitMs must be from 0 to 10000"),
    ("after=1&waitMs=soon", "waitMs must be a whole number"),
    ("after=1&after=2", "given more than once"),
    ("view=everything", "view must be digest"),
])
def test_bad_after_and_view_values_are_refused(game: Any, query: str, fragment: str) -> None:
    _bridge, _world, port = game
    for path in ("/state", "/health"):
        if path == "/health" and "view" in query:
            continue
        status, body = fetch(port, f"{path}?{query}")
        assert status == 400 and body["ok"] is False and fragment in body["error"], (path, body)


def test_wait_ms_above_the_bound_is_clamped_not_refused(game: Any) -> None:
    _bridge, _world, port = game
    command_id = command(port, "cmd=quiet")
    assert doc(port, f"/state?after={command_id}&waitMs=99999")["completedCommandId"] >= command_id


# --------------------------------------------------------------------------- view=digest

def test_digest_keeps_exactly_the_listed_fields(game: Any) -> None:
    _bridge, _world, port = game
    settled(port, "cmd=add&n=2")
    digest = doc(port, "/state?view=digest")
    assert list(digest) == ["frame", "completedCommandId", "paused", "ui", "game", "events", "commandResults"]
    assert digest["game"] == {"score": 2, "name": "test", "ratio": 0.5, "flag": True, "none": None}
    assert digest["ui"] == {"screen": "Main", "text": "|..|"}
    full = doc(port, "/state")
    assert full["game"]["entities"][0] == {"id": 0} and full["game"]["blob"] == {"x": 1}
    assert full["extra"] == {"a": 1} and "extra" not in digest
    assert doc(port, "/state?view=full")["extra"] == {"a": 1}


def test_a_cheap_digest_function_is_used_for_the_digest_only() -> None:
    calls = {"digest": 0}

    def digest() -> dict[str, Any]:
        calls["digest"] += 1
        return {"game": {"score": 7, "list": [1]}, "ui": {"text": "x" * (UI_TEXT_LIMIT + 500)}}

    bridge, world = make(digest=digest)
    with looping(bridge) as port:
        before = world["state_calls"]
        small = doc(port, "/state?view=digest")
        assert world["state_calls"] == before and calls["digest"] == 1
        assert small["game"] == {"score": 7}
        assert len(small["ui"]["text"]) == UI_TEXT_LIMIT and small["ui"]["text"].endswith("cut at 4000 characters]")
        doc(port, "/state")
        assert world["state_calls"] == before + 1 and calls["digest"] == 1


def test_ui_text_is_capped_in_the_full_state_too_without_touching_the_game() -> None:
    ui = {"screen": "Big", "text": "y" * 10_000}
    bridge = GameBridge("Cap", "1", register=False, state=lambda: {"ui": ui})
    assert len(snapshot(bridge)["ui"]["text"]) == UI_TEXT_LIMIT
    assert len(ui["text"]) == 10_000
