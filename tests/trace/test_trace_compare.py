"""Comparing answers (any JSON, under ignore rules), the replay engine's stepping and
stopping, and the text diff a person reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from game_bridge_mcp.errors import BridgeError, CommandTimeout, GameOffline
from game_bridge_mcp.trace.compare import DEFAULT_IGNORE, IgnoreRules, differences, strip_ignored
from game_bridge_mcp.trace.diff import render
from game_bridge_mcp.trace.format import header
from game_bridge_mcp.trace.identity import compare_identity
from game_bridge_mcp.trace.reader import read_trace
from game_bridge_mcp.trace.replay import DIVERGED, FAILED, NOT_RUN, SAME, SKIPPED, replay


def paths(a: Any, b: Any, rules: IgnoreRules | None = None) -> list[tuple[str, str]]:
    return [(d.path, d.kind) for d in differences(a, b, rules)]


def test_equal_json_has_no_differences_and_numbers_compare_as_json() -> None:
    assert differences({"a": [1, {"b": None}], "c": "x"}, {"c": "x", "a": [1.0, {"b": None}]}) == []
    assert paths({"a": True}, {"a": 1}) == [("a", "changed")]
    assert paths({"a": "1"}, {"a": 1}) == [("a", "changed")]
    assert paths(1, 2) == [("", "changed")]


def test_differences_name_the_path_in_document_order() -> None:
    recorded = {"game": {"score": 12, "state": "RUNNING"}, "events": ["a", "b"], "gone": 1}
    replayed = {"game": {"score": 9, "state": "RUNNING"}, "events": ["a", "c", "d"], "new": {"x": 1}}
    assert paths(recorded, replayed) == [("game.score", "changed"), ("events.1", "changed"),
                                         ("events.2", "added"), ("gone", "missing"), ("new", "added")]
    diff = differences(recorded, replayed)[0]
    assert (diff.recorded_text(), diff.replayed_text()) == ("12", "9")
    assert differences(recorded, replayed)[3].replayed_text() == "(absent)"


def test_a_list_or_object_against_a_scalar_is_one_change() -> None:
    assert paths({"a": [1, 2]}, {"a": None}) == [("a", "changed")]
    assert paths({"a": {}}, {"a": []}) == [("a", "changed")]


def test_ignore_patterns() -> None:
    rules = IgnoreRules(["game.score", "**.frame", "events.*.seq", "a.**.b"])
    assert rules.ignores(("game", "score")) and not rules.ignores(("score",))
    assert rules.ignores(("frame",)) and rules.ignores(("x", "y", "frame")) and not rules.ignores(("frames",))
    assert rules.ignores(("events", "3", "seq")) and not rules.ignores(("events", "seq"))
    assert rules.ignores(("a", "b")) and rules.ignores(("a", "x", "y", "b"))
    assert IgnoreRules(["events[2]"]).ignores(("events", "2"))
    recorded = {"frame": 1, "game": {"score": 1, "frame": 7}, "events": [{"seq": 4, "m": "x"}]}
    replayed = {"frame": 9, "game": {"score": 2, "frame": 8}, "events": [{"seq": 9, "m": "x"}]}
    assert differences(recorded, replayed, rules) == []
    assert strip_ignored(recorded, rules) == {"game": {}, "events": [{"m": "x"}]}


def test_the_default_rules_ignore_what_differs_run_to_run_and_keep_sim_frames_when_paused() -> None:
    recorded = {"port": 7820, "frame": 10, "simFrame": 40, "commandId": 3, "elapsedMs": 12, "polls": 4,
                "file": "/tmp/a.png", "game": {"score": 5, "next": "grape"}}
    replayed = {"port": 40001, "frame": 99, "simFrame": 41, "commandId": 8, "elapsedMs": 30, "polls": 1,
                "file": "/tmp/b.png", "game": {"score": 5, "next": "grape"}}
    assert differences(recorded, replayed, IgnoreRules.defaults()) == []
    assert paths(recorded, replayed, IgnoreRules.defaults(paused=True)) == [("simFrame", "changed")]
    # the game's own "next" is compared; only the top-level cursor of get_events is ignored
    replayed["game"]["next"] = "cherry"
    assert paths(recorded, replayed, IgnoreRules.defaults()) == [("game.next", "changed")]
    assert "**.frame" in DEFAULT_IGNORE


def test_identity_name_and_version_block_checkout_differences_are_notes() -> None:
    recorded = {"name": "Fruit Merge", "version": "1.0", "cwd": "/home/a/game",
                "declaration": {"command": "run {port}"}}
    assert compare_identity(recorded, dict(recorded)) == ([], [])
    blocking, notes = compare_identity(recorded, {"name": "Other", "version": "2.0", "cwd": "/ci/game",
                                                  "declaration": {"command": "make {port}"}})
    assert blocking == ["the recording was made against game 'Fruit Merge', this instance is 'Other'",
                        "the recording was made against version '1.0', this instance is '2.0'"]
    assert notes[0] == "recorded in /home/a/game, replayed against a game running in /ci/game"
    paused = compare_identity({"name": "G", "paused": True}, {"name": "G", "paused": False})[0]
    assert paused == ["the recording's game started paused and this one is running"]
    assert compare_identity({"name": "G", "paused": None}, {"name": "G", "paused": True}) == ([], [])
    assert "command differs" in notes[1]


# ----------------------------------------------------------------------------- the engine

def make_trace(tmp_path: Path, calls: list[dict]) -> Path:
    path = tmp_path / "session.trace"
    lines = [header("serve", "1")]
    for i, call in enumerate(calls):
        line = {"type": "call", "time": "t", "t": 100.0 + i, "port": 7820, "arguments": {}, "durationMs": 1.0}
        line.update(call)
        lines.append(line)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def state(score: int, frame: int = 1) -> dict:
    return {"port": 7820, "tool": "drop", "frame": frame, "game": {"score": score}, "events": ["drop:cherry"]}


SESSION = [
    {"tool": "launch_instance", "port": None, "answer": {"port": 7820, "pid": 1}},
    {"tool": "list_toolsets", "answer": {"port": 7820, "toolsets": []}},
    {"tool": "call_tool", "name": "restart", "answer": state(0)},
    {"tool": "call_tool", "name": "drop", "arguments": {"x": 1}, "answer": state(3)},
    {"tool": "call_tool", "name": "drop", "arguments": {"x": -1},
     "error": {"error": "CommandFailed", "message": "'drop' was applied on port 7820, but the game refused it: full",
               "exitCode": 6}},
    {"tool": "call_tool", "name": "get_state", "arguments": {"summary": True}, "answer": state(3)},
]


class FakeGame:
    """Answers replayed calls from a script: (name, arguments) -> answer or exception."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, dict, int]] = []

    def __call__(self, name: str, arguments: dict, port: int, options: dict) -> Any:
        self.calls.append((name, arguments, port))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class CommandFailed(BridgeError):
    """Stands in for the error the ``results`` extension brings (the engine compares by name)."""

    exit_code = 6


def refused(port: int) -> CommandFailed:
    return CommandFailed(f"'drop' was applied on port {port}, but the game refused it: full", port=port)


def test_a_faithful_replay_is_the_same_and_skips_session_tools(tmp_path: Path) -> None:
    trace = read_trace(make_trace(tmp_path, SESSION))
    game = FakeGame([state(0, 50), state(3, 51), refused(40001), state(3, 60)])
    result = replay(trace, game, {7820: 40001}, rules=IgnoreRules.defaults(), summarise=lambda s: s)
    assert [s.status for s in result.steps] == [SKIPPED, SKIPPED, SAME, SAME, SAME, SAME]
    assert game.calls[1] == ("drop", {"x": 1}, 40001)  # recorded arguments, the replay's port
    assert result.exit_code() == 0
    text = render(result)
    assert "SAME: every replayed answer matches the recording." in text
    assert "4 of 4 replayed calls matched; 2 session call(s)" in text


def test_the_first_divergence_stops_the_replay_with_a_readable_diff(tmp_path: Path) -> None:
    trace = read_trace(make_trace(tmp_path, SESSION))
    game = FakeGame([state(0), state(5)])
    result = replay(trace, game, {7820: 40001}, rules=IgnoreRules.defaults(), summarise=lambda s: s)
    assert [s.status for s in result.steps] == [SKIPPED, SKIPPED, SAME, DIVERGED, NOT_RUN, NOT_RUN]
    assert result.exit_code() == 1
    assert len(game.calls) == 2
    text = render(result)
    assert ('DIVERGED at step 4 of 6: drop {"x": 1} (port 7820 in the recording, 40001 now)\n'
            "  game.score\n    recorded: 3\n    replayed: 5\n") in text
    assert "1 of 4 replayed calls matched" in text and "2 not run after the divergence" in text


def test_an_error_where_an_answer_was_recorded_and_back_again(tmp_path: Path) -> None:
    trace = read_trace(make_trace(tmp_path, SESSION))
    result = replay(trace, FakeGame([state(0), CommandTimeout(40001, "drop", 5000)]), {7820: 40001},
                    rules=IgnoreRules.defaults(), summarise=lambda s: s)
    step = result.steps[3]
    assert step.status == DIVERGED and step.differences[0].path == "error"
    assert step.differences[0].recorded_text() == "(absent)"
    assert step.differences[0].replayed_text().startswith('"CommandTimeout: Command \'drop\'')
    result = replay(trace, FakeGame([state(0), state(3), state(3)]), {7820: 40001},
                    rules=IgnoreRules.defaults(), summarise=lambda s: s)
    step = result.steps[4]
    assert step.status == DIVERGED and step.differences[0].replayed_text() == "(absent)"
    assert "CommandFailed" in step.differences[0].recorded_text()


def test_update_runs_on_past_divergences(tmp_path: Path) -> None:
    trace = read_trace(make_trace(tmp_path, SESSION))
    game = FakeGame([state(1), state(5), state(5), state(5)])
    result = replay(trace, game, {7820: 40001}, rules=IgnoreRules.defaults(), summarise=lambda s: s,
                    keep_going=True)
    assert [s.status for s in result.steps][2:] == [DIVERGED, DIVERGED, DIVERGED, DIVERGED]
    assert result.exit_code(update=True) == 0
    assert render(result, update=True).count("UPDATED at step") == 4


def test_a_game_that_dies_mid_replay_is_an_error_with_its_exit_code(tmp_path: Path) -> None:
    trace = read_trace(make_trace(tmp_path, SESSION))
    game = FakeGame([state(0), GameOffline(40001)])
    result = replay(trace, game, {7820: 40001}, rules=IgnoreRules.defaults(), summarise=lambda s: s)
    assert [s.status for s in result.steps][2:] == [SAME, FAILED, NOT_RUN, NOT_RUN]
    assert result.exit_code() == 3
    text = render(result)
    assert 'FAILED at step 4 of 6: drop {"x": 1}' in text and "GameOffline: No game is answering" in text
    assert "2 not run after the failure" in text


def test_an_answer_kept_as_a_summary_is_compared_as_a_summary(tmp_path: Path) -> None:
    path = make_trace(tmp_path, [{"tool": "call_tool", "name": "get_state",
                                  "answerSummary": {"port": 7820, "game": {"score": 4}}, "answerBytes": 10 ** 6}])
    trace = read_trace(path)

    def summarise(s: dict) -> dict:
        return {"game": {k: v for k, v in s["game"].items() if not isinstance(v, list)}}

    big = {"port": 40001, "game": {"score": 4, "board": list(range(1000))}}
    result = replay(trace, FakeGame([big]), {7820: 40001}, rules=IgnoreRules.defaults(), summarise=summarise)
    assert result.steps[0].status == SAME
