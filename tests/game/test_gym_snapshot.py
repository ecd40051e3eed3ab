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
                  autoreset=False, journal=not family.native)
    game.pictures = made.get("render_mode") == "rgb_array"
    game.reset(3, None)
    game.snapshots = Snapshots(game, {"env": env_id, "makeKwargs": json.loads(json.dumps(made))}, remake=lambda: make(env_id, made))
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


def test_atari_saved_and_loaded_over_and_over_stays_exact_and_replays_nothing() -> None:
    """As an agent searching does: save, try a few steps, take them back, go on a little;
    every load lands on the saved state with the action ALE repeats in place (its future
    the same), stepping the environment not once (the action is set on ALE's own frames)."""
    require("ale_py")
    game = engine("ALE/Breakout-v5", render_mode="rgb_array")
    play(game, [1] * 30)
    steps = 0
    original_step = game.env.step

    def counted(action: Any) -> Any:
        nonlocal steps
        steps += 1
        return original_step(action)

    for cycle in range(40):
        data = game.snapshots.save()
        assert set(json.loads(section(data, "aleWindow"))) == {"rng", "last"}  # no marks, no replay
        before = (game.state(), game.picture().tobytes())
        future = play(game, [(cycle + i) % 4 for i in range(6)])
        game.env.step = counted
        game.snapshots.load(data)
        game.env.step = original_step
        assert steps == 0, "a load stepped the environment"
        assert (game.state(), game.picture().tobytes()) == before, f"cycle {cycle}"
        assert play(game, [(cycle + i) % 4 for i in range(6)]) == future, f"the future after load {cycle}"
        play(game, [2, 3, 1][cycle % 3:] * 2)


@pytest.mark.parametrize("frameskip, repeat", [((2, 5), 0.25), (1, 0.9)])
def test_atari_with_a_frame_skip_drawn_each_step_or_mostly_repeated_actions_comes_back_exactly(
        frameskip: Any, repeat: float) -> None:
    """ALE counts the frames of each step, so a frame skip the environment draws per step
    (2 to 4 frames) is followed too, across more steps than are kept unfolded; with one frame
    a step and nine actions in ten repeated, most steps keep an action from further back, and
    a wrong one would show for many frames (player A's draw, not B's, decides)."""
    require("ale_py")
    game = engine("ALE/Breakout-v5", render_mode="rgb_array", frameskip=frameskip,
                  repeat_action_probability=repeat)
    assert game.family.sticky is not None
    for round_ in range(12):
        play(game, [(i * 7 + round_) % 4 for i in range(1500 if round_ == 1 else 5 + round_)])
        if game.book.ended:
            game.reset(None, None)
            play(game, [1, 1, 3])
        data = game.snapshots.save()
        before = (game.state(), game.picture().tobytes())
        future = [(i * 5 + round_) % 4 for i in range(30)]
        original = play(game, future)
        game.snapshots.load(data)
        assert (game.state(), game.picture().tobytes()) == before
        assert play(game, future) == original, f"round {round_}"


def test_an_atari_game_whose_generator_was_changed_behind_the_wrapper_says_so_instead_of_saving() -> None:
    """The copy of ALE's generator is checked against ALE's at every save: ALE restored
    behind the wrapper's back (so the action it repeats is unknown) is an error that says what
    to do, not a snapshot that would load wrong."""
    require("ale_py")
    from game_bridge_mcp.game.gym._snapshot import SnapshotError

    game = engine("ALE/Breakout-v5", render_mode="rgb_array")
    ale = game.env.unwrapped.ale
    early = ale.cloneState(include_rng=True)
    play(game, [1, 3, 3, 2, 1])
    ale.restoreState(early)
    with pytest.raises(SnapshotError, match="repeat_action_probability=0"):
        game.snapshots.save()
    game.reset(None, None)  # a reset follows ALE again
    play(game, [1, 2])
    assert game.snapshots.save()


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


def section(data: bytes, name: str) -> bytes:
    """The section ``name`` of a snapshot."""
    first = data.index(b"\n") + 1
    end = data.index(b"\n", first)
    position = end + 1
    for entry in json.loads(data[first:end])["sections"]:
        if entry[0] == name:
            return data[position:position + entry[1]]
        position += entry[1]
    raise KeyError(name)


def resection(data: bytes, name: str, change: Any) -> bytes:
    """``data`` with its section ``name`` changed and the header saying so (size and digest
    right: only the family's own checks stand between it and the game)."""
    import hashlib

    first = data.index(b"\n") + 1
    end = data.index(b"\n", first)
    header = json.loads(data[first:end])
    chunks, position = [], end + 1
    for entry in header["sections"]:
        chunk = data[position:position + entry[1]]
        position += entry[1]
        if entry[0] == name:
            chunk = change(chunk)
            entry[1], entry[2] = len(chunk), hashlib.sha256(chunk).hexdigest()
        chunks.append(chunk)
    return data[:first] + json.dumps(header, separators=(",", ":")).encode() + b"\n" + b"".join(chunks)


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
                          (data.replace(b'"how":"native"', b'"how":"pickle"'), "is not one this wrapper makes"),
                          (resection(data, "aleWindow", lambda w: w.replace(b'"last":', b'"last":9')),
                           "last ALE action is not one of this game's"),
                          (resection(data, "aleWindow", lambda w: w.replace(b'"PCG64"', b'"Nope"')),
                           "environment generator is damaged"),
                          (resection(data, "ale", lambda a: a[:-30] + b"x" * 22 + a[-8:]),
                           "random generator")):
        with pytest.raises(SnapshotError, match=fragment):
            game.snapshots.load(bad)
        assert (game.state(), game.picture().tobytes()) == before


def test_atari_with_continuous_and_sticky_actions_is_re_executed_exactly() -> None:
    """A continuous action's strength is sticky too, which the wrapper does not follow: such
    an environment is saved as its seed and actions and re-executed, exactly."""
    require("ale_py")
    import numpy as np

    game = engine("ALE/Breakout-v5", render_mode="rgb_array", continuous=True)
    assert game.journal is not None and not game.family.native

    def act(i: int) -> Any:
        return np.array([0.5 + (i % 2) / 2, (i % 4) * 1.5 - 3.0, float(i % 3 == 0)], dtype=np.float32)

    for i in range(10):
        game.step(act(i))
    data = game.snapshots.save()
    before = (game.state(), game.picture().tobytes())
    future = []
    for i in range(12):
        game.step(act(i + 5))
        future.append((game.state(), game.picture().tobytes()))
    game.snapshots.load(data)
    assert (game.state(), game.picture().tobytes()) == before
    again = []
    for i in range(12):
        game.step(act(i + 5))
        again.append((game.state(), game.picture().tobytes()))
    assert again == future
