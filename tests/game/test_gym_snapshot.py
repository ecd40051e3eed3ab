"""The gym wrapper's snapshots, in-process: saved at any step and loaded into the same
environment or a fresh one (a fork), the state, the picture and the future for the same
actions are the same, with ALE's sticky actions (which its own clone does not carry) and
for environments re-executed from their seed; bytes of another environment, damaged or cut
short are refused and change nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from game_bridge_mcp.game.kit import GameBridge
from gym_helpers import require

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def engine(env_id: str, **kwargs: Any) -> Any:
    from game_bridge_mcp.game.gym._engine import Engine
    from game_bridge_mcp.game.gym._families import family_of, make_defaults
    from game_bridge_mcp.game.gym._make import make, resolve
    from game_bridge_mcp.game.gym._snapshot import Snapshots

    made = {**make_defaults(env_id), **kwargs}
    env = make(resolve(env_id), made)
    family = family_of(env)
    game = Engine(env, family, GameBridge("t", "1", clock=True, register=False), env_id=env_id, seed_base=3,
                  autoreset=False, journal=not callable(getattr(family, "native_save", None)))
    game.pictures = made.get("render_mode") == "rgb_array"
    game.reset(3, None)
    game.snapshots = Snapshots(game, {"env": env_id, "makeKwargs": made}, remake=lambda: make(env_id, made))
    return game


def play(game: Any, actions: list[int]) -> list[tuple[Any, bytes | None]]:
    """Each step's /state and picture."""
    seen = []
    for index in actions:
        game.step(game.action_of(index % len(game.names)))
        picture = game.picture()
        seen.append((game.state(), None if picture is None else picture.tobytes()))
    return seen


def test_atari_with_sticky_actions_comes_back_exactly_at_any_step_and_in_a_fork() -> None:
    require("ale_py")
    game = engine("ALE/Breakout-v5", render_mode="rgb_array")  # repeat_action_probability 0.25
    assert game.family.sticky
    fork = engine("ALE/Breakout-v5", render_mode="rgb_array")
    play(fork, [3, 2, 2, 3, 1] * 7)  # another past: its last applied action is not the original's
    saved_at = 0
    for target in (0, 1, 2, 5, 9, 17, 40):
        play(game, [(i * 7 + 1) % 4 for i in range(target - saved_at)])
        saved_at = target
        data = game.snapshots.save()
        before = (game.state(), game.picture().tobytes())
        future = [(i * 5 + target) % 4 for i in range(24)]
        original = play(game, future)
        game.snapshots.load(data)
        assert (game.state(), game.picture().tobytes()) == before, f"restored at step {target}"
        assert play(game, future) == original, f"the future after a restore at step {target}"
        fork.snapshots.load(data)
        assert (fork.state(), fork.picture().tobytes()) == before
        assert play(fork, future) == original, f"the future of a fork at step {target}"
        game.snapshots.load(data)  # back to the save point for the next round
        fork.snapshots.load(data)


def test_atari_saved_and_loaded_over_and_over_keeps_its_replay_short() -> None:
    require("ale_py")
    from game_bridge_mcp.game.gym._families import MARK_EVERY, MIN_WINDOW

    game = engine("ALE/Breakout-v5", render_mode="rgb_array")
    play(game, [1] * 30)
    for _ in range(40):  # save; try a few steps; take them back; go on a little (as an agent searching does)
        data = game.snapshots.save()
        play(game, [3] * 5)
        game.snapshots.load(data)
        play(game, [2] * 3)
        step = game.book.step
        window = json.loads(game.family.native_save(step)["aleWindow"])
        origin = max(mark[0] for mark in window["marks"] if mark[0] <= step - MIN_WINDOW)
        assert MIN_WINDOW <= step - origin < MARK_EVERY + MIN_WINDOW, window["marks"]  # what a load replays
        assert len(window["actions"]) <= 3 * MARK_EVERY


@pytest.mark.parametrize("env_id, kwargs", [("MiniGrid-DoorKey-5x5-v0", {"render_mode": "rgb_array"}),
                                            ("NetHackScore-v0", {"render_mode": "ansi"}),
                                            ("Taxi-v3", {"render_mode": "ansi"})])
def test_reexecuted_environments_come_back_exactly(env_id: str, kwargs: dict[str, Any]) -> None:
    require("minigrid", "nle")
    game = engine(env_id, **kwargs)
    assert game.journal is not None
    play(game, [(i * 3 + 1) % 5 for i in range(6)])
    data = game.snapshots.save()
    before = game.state()
    future = [(i * 5 + 2) % 5 for i in range(10)]
    original = play(game, future)
    old_env = game.env
    game.snapshots.load(data)
    assert game.env is not old_env  # re-executed in a fresh environment, which took the old one's place
    assert game.state() == before and play(game, future) == original
    fork = engine(env_id, **kwargs)
    fork.snapshots.load(data)
    assert fork.state() == before and play(fork, future) == original


def test_bytes_that_cannot_load_here_are_refused_and_change_nothing() -> None:
    require("ale_py")
    from game_bridge_mcp.game.gym._snapshot import SnapshotError

    game = engine("ALE/Breakout-v5", render_mode="rgb_array")
    play(game, [1, 2, 3])
    data = game.snapshots.save()
    other = engine("ALE/Pong-v5", render_mode="rgb_array")
    play(game, [2, 2])
    before = (game.state(), game.picture().tobytes())
    header_end = data.index(b"\n", data.index(b"\n") + 1)
    for bad, fragment in ((other.snapshots.save(), "another environment or build: its env is"),
                          (data[:-10], "damaged or cut off"), (data + b"x", "1 bytes more than its header says"),
                          (data[:header_end - 5] + b"}}}}}" + data[header_end:], "header"),
                          (data[:header_end + 20] + bytes([data[header_end + 20] ^ 1]) + data[header_end + 21:],
                           "section is damaged"),
                          (b"GBX" + data, "not a snapshot of game-bridge-mcp's gym wrapper"),
                          (data.replace(b'"how":"native"', b'"how":"pickle"'), "is not one this wrapper makes")):
        with pytest.raises(SnapshotError, match=fragment):
            game.snapshots.load(bad)
        assert (game.state(), game.picture().tobytes()) == before
