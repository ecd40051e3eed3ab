"""The demo game on the kit's extensions: rules in game.description, ranges in its schemas,
the board as ui.text, results for moves (a drop's forecast is what then happens),
refusals as ok:false outcomes, a paused board that holds still and settles when
stepped, and two paused instances with the same seed identical frame for frame."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import pytest

from game_bridge_mcp.game.demo import (COLUMNS, PIECES, POINTS, POP_POINTS, ROWS, FruitMerge, build,
                                       rules)
from kit_helpers import command, doc, looping, outcome, settled
from peers.fakegame import wait_until

pytestmark = pytest.mark.timeout(60)

PAUSED = {"GAME_BRIDGE_START_PAUSED": "1"}


def paused_demo(stack: ExitStack, seed: int = 1) -> int:
    game = FruitMerge(seed)
    bridge = build(game, register=False, environ=PAUSED)
    return stack.enter_context(looping(bridge, game.update, render=game.frame_tick, hz=200))


def result_of(state: dict[str, Any]) -> Any:
    return outcome(state, state["completedCommandId"])


def step_until_still(port: int, limit: int = 2000) -> int:
    """Step one frame at a time until game.moving is 0: how many frames it took."""
    for frames in range(1, limit):
        if settled(port, "cmd=step", view="digest")["game"]["moving"] == 0:
            return frames
    raise AssertionError("the board never settled")


# --------------------------------------------------------------------------- the rules, on their own

def test_a_drops_forecast_is_what_then_happens() -> None:
    events: list[str] = []
    game = FruitMerge(4, emit=lambda message, **_fields: events.append(message))
    game.new_round()
    for x in [0, 0, 1, 1, -2, 0, 3, 3, 3, -1]:
        if game.state != "RUNNING":
            break
        score = game.score
        result = game.drop(x)
        events.clear()
        frames = 0
        landed = None
        while game.moving:
            game.update()
            frames += 1
            if landed is None and not game.falling and game.candidates:
                landed = {"row": game.candidates[0][0], "column": game.candidates[0][1]}
        assert result["framesToSettle"] == frames and result["scoreGained"] == game.score - score
        assert landed is not None and {"row": result["row"], "column": result["column"]} == landed
        assert landed["column"] == int(x) + COLUMNS // 2
        assert result["merges"] == [f"{m[6:]}->{PIECES[PIECES.index(m[6:]) + 1]}"
                                    for m in events if m.startswith("merge:")]
    assert game.merges > 0  # the sequence merged something, so merges were forecast too


def test_forecasting_changes_nothing_about_the_game() -> None:
    first, second = FruitMerge(9), FruitMerge(9)
    for game in (first, second):
        game.new_round()
    for x in [0, 1, 0, -1, 2]:
        first.drop(x)
        second.pending_drops.append((second.current, int(x) + COLUMNS // 2))  # the same move, no forecast
        second.current, second.next = second.next, second._roll()
        second.drops += 1
    for _ in range(400):
        first.update()
        second.update()
    assert first.to_state()["game"] == second.to_state()["game"]


def test_the_rules_text_names_the_ladder_the_points_and_the_end() -> None:
    text = rules()
    assert " > ".join(PIECES) in text and f"a pop {POP_POINTS}" in text
    assert f"strawberry {POINTS[1]}" in text and f"watermelon {POINTS[-1]}" in text
    assert "full to the top" in text and "x from -3" in text


# --------------------------------------------------------------------------- on the wire

def test_the_demo_explains_itself() -> None:
    game = FruitMerge(1)
    bridge = build(game, register=False, environ={})
    manifest = bridge.manifest()
    assert manifest["game"]["description"] == rules()
    tools = {t["name"]: t for ts in manifest["toolsets"] for t in ts["tools"]}
    assert tools["drop"]["inputSchema"]["properties"]["x"]["minimum"] == -3
    assert tools["drop"]["inputSchema"]["properties"]["x"]["maximum"] == 3
    assert tools["drop"]["inputSchema"]["additionalProperties"] is False
    assert tools["click"]["inputSchema"]["properties"]["label"]["enum"] == [
        "Start", "Hold", "Pause", "Resume", "Restart", "Menu"]
    assert bridge.health()["features"] == ["results", "after", "view", "events", "clock", "snapshot", "screenshot"]
    assert bridge.snapshot()["ui"]["text"] == game.board_text(fold_empty=True)


def test_moves_have_results_and_refusals_are_outcomes() -> None:
    with ExitStack() as stack:
        port = paused_demo(stack, seed=5)
        refused = settled(port, "cmd=drop&x=0")
        assert result_of(refused)["ok"] is False
        assert "drop does nothing on the MenuScreen: click Start" in result_of(refused)["error"]
        started = result_of(settled(port, "cmd=click&label=Start"))
        assert started["ok"] is True and started["result"]["screen"] == "GameScreen"
        assert started["result"]["seed"] == 5
        held = result_of(settled(port, "cmd=hold"))["result"]
        assert set(held) == {"held", "current", "next"}
        again = result_of(settled(port, "cmd=hold"))
        assert again["ok"] is False and "one hold per drop" in again["error"]
        hidden = result_of(settled(port, "cmd=click&label=Pause"))  # paused already: Resume shows
        assert hidden["ok"] is False and "no visible button 'Pause'" in hidden["error"]
        dropped = settled(port, "cmd=drop&x=-3")
        move = result_of(dropped)["result"]
        assert move["column"] == 0 and move["row"] == ROWS - 1
        assert move["merges"] == [] and move["scoreGained"] == 0
        # Paused: the board holds still while frames go by...
        frame = dropped["frame"]
        wait_until(lambda: doc(port, "/health")["frame"] > frame + 10)
        still = doc(port, "/state?view=digest")
        assert still["simFrame"] == dropped["simFrame"] and still["game"]["moving"] == 1
        # ...and stepping settles it in exactly the frames the result said.
        assert step_until_still(port) == move["framesToSettle"]
        board = doc(port, "/state")
        assert board["game"]["board"][ROWS - 1][0] == held["current"]
        assert board["ui"]["text"].splitlines()[-1].startswith("CSGOAPHIMW"[PIECES.index(held["current"])])
        assert board["ui"]["text"].splitlines()[0] == f"({ROWS - 1} empty rows)"
        paused = result_of(settled(port, "cmd=click&label=Resume"))["result"]
        assert paused == {"screen": "GameScreen", "paused": False}


@pytest.mark.slow
def test_two_paused_instances_with_the_same_seed_are_identical_frame_for_frame() -> None:
    moves = ["cmd=set_seed&seed=21", "cmd=drop&x=0", "cmd=drop&x=0", "cmd=hold", "cmd=drop&x=1",
             "cmd=drop&x=-1", "cmd=drop&x=0"]

    def comparable(state: dict[str, Any]) -> dict[str, Any]:
        """The state without the loop frame (a liveness counter, different in each)."""
        copy = {k: v for k, v in state.items() if k != "frame"}
        copy["events"] = [{k: v for k, v in e.items() if k != "frame"} for e in state["events"]]
        return copy

    with ExitStack() as stack:
        ports = [paused_demo(stack), paused_demo(stack)]
        for move in moves:
            answers = [settled(port, move) for port in ports]
            assert comparable(answers[0]) == comparable(answers[1]), move
            for _ in range(7):  # a few single frames between moves, compared after each
                frames = [settled(port, "cmd=step") for port in ports]
                assert comparable(frames[0]) == comparable(frames[1])
        ids = [command(port, "cmd=step&frames=300") for port in ports]
        final = [doc(port, f"/state?after={i}&waitMs=10000") for port, i in zip(ports, ids)]
        assert comparable(final[0]) == comparable(final[1])
        assert final[0]["game"]["moving"] == 0 and final[0]["game"]["drops"] == 5
        assert final[0]["simFrame"] == 7 * len(moves) + 300
