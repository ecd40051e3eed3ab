"""Pure tests of the digest, paths and JSON equality."""

from __future__ import annotations

import pytest

from game_bridge_mcp.core.digest import get_path, json_equal, recent_events, summarise

SPEC_STATE = {
    "frame": 91422, "simFrame": 48110, "completedCommandId": 17, "paused": False,
    "ui": {"screen": "GameScreen", "elements": [{"label": "Restart", "visible": True},
                                                {"label": "Hidden", "visible": False}, {"label": "NoFlag"}]},
    "events": [{"m": "merge:cherry"}, {"m": "click:Restart"}, "plain"],
    "game": {"score": 1280, "state": "RUNNING", "entities": [{"x": 1}], "nested": {"a": 1}, "ratio": 0.5, "none": None},
    "other": {"big": list(range(100))},
}


def test_digest_keeps_scalars_and_drops_nested() -> None:
    d = summarise(SPEC_STATE)
    assert d["frame"] == 91422 and d["screen"] == "GameScreen"
    assert d["elements"] == ["Restart", "NoFlag"]
    assert d["game"] == {"score": 1280, "state": "RUNNING", "ratio": 0.5, "none": None}
    assert d["events"] == ["merge:cherry", "click:Restart", "plain"]
    assert "other" not in d
    for value in d["game"].values():
        assert not isinstance(value, (list, dict))


def test_digest_of_hostile_shapes_never_raises() -> None:
    for state in (None, [], "x", {"ui": "x", "game": [1], "events": {"m": 1}},
                  {"ui": {"elements": "no"}, "events": [None, 3, {"no_m": [1]}]}):
        summarise(state)
    d = summarise({"events": [{"m": "a" * 10_000}], "game": {"s": "b" * 10_000}})
    assert len(d["events"][0]) <= 300 and len(d["game"]["s"]) <= 300


def test_recent_events_are_bounded() -> None:
    state = {"events": [{"m": str(i)} for i in range(50)]}
    assert recent_events(state) == [str(i) for i in range(40, 50)]


@pytest.mark.parametrize("path,expected", [
    ("game.score", (True, 1280)), ("ui.elements.0.label", (True, "Restart")),
    ("ui.elements[1].visible", (True, False)), ("game.entities.-1.x", (True, 1)),
    ("game.missing", (False, None)), ("game.score.deeper", (False, None)), ("ui.elements.9", (False, None)),
])
def test_get_path(path: str, expected: tuple) -> None:
    assert get_path(SPEC_STATE, path) == expected


def test_json_equal() -> None:
    assert json_equal(0, 0.0) and json_equal({"a": [1, 2]}, {"a": [1.0, 2]})
    assert not json_equal(True, 1) and not json_equal("1", 1) and not json_equal(None, 0)
