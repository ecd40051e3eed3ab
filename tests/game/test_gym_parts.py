"""The gym wrapper's parts, in-process: its command line and --init, action spaces as JSON
Schemas and JSON values as actions, text renderings, the families' names and keys, and each
way making an environment can fail said with what to install or change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.game.gym._options import UsageError, declaration, parse
from gym_helpers import require

pytestmark = pytest.mark.timeout(60)


def test_the_command_line_and_the_declaration_init_writes() -> None:
    opts = parse(["--paused", "--seed", "7", "--size", "320x420", "--make-kwargs", '{"frameskip": 1}', "--fps", "30",
                  "--autoreset", "ALE/Breakout-v5"], environ={})
    assert (opts.paused, opts.seed, opts.size, opts.make_kwargs, opts.fps, opts.autoreset, opts.env_id) == \
        (True, 7, (320, 420), {"frameskip": 1}, 30.0, True, "ALE/Breakout-v5")
    doc = declaration(opts)
    assert doc["launch"]["argv"] == ["{python}", "-m", "game_bridge_mcp.game.gym", "--port", "{port}", "--seed", "7",
                                     "--size", "320x420", "--make-kwargs", '{"frameskip":1}', "--fps", "30",
                                     "--autoreset", "ALE/Breakout-v5"]
    assert parse(["gym_envs:GBTest/Corridor-v0"], environ={}).env_id == "gym_envs:GBTest/Corridor-v0"
    for argv, message in ((["--make-kwargs", "[1]", "X-v0"], "JSON object of keyword arguments"),
                          (["--make-kwargs", "{bad", "X-v0"], "expects a JSON object"),
                          (["--make-kwargs", '{"a b": 1}', "X-v0"], "is not a keyword argument name"),
                          (["--make-kwargs", '{"x": NaN}', "X-v0"], "expects a JSON object"),
                          (["--fps", "0", "X-v0"], "--fps expects"), (["--seed", "-1", "X-v0"], "whole number"),
                          (["a b"], "is not an environment id"), (["A-v0", "B-v0"], "name one environment id"),
                          (["--bogus", "A-v0"], "unknown option"), ([], "name the environment id")):
        with pytest.raises(UsageError, match=message):
            parse(argv, environ={})


def test_action_spaces_become_schemas_and_json_becomes_actions() -> None:
    require("gymnasium")
    import numpy as np
    from gymnasium import spaces

    from game_bridge_mcp.game.gym._spaces import schema, summary, to_action, to_json

    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert schema(box) == {"type": "array", "items": {"type": "number", "minimum": -1, "maximum": 1},
                           "minItems": 2, "maxItems": 2}
    assert to_action(box, [0.5, -1]).tolist() == [0.5, -1.0]
    nested = spaces.Dict({"move": box, "n": spaces.Discrete(3, start=1), "say": spaces.Text(4),
                          "pick": spaces.MultiDiscrete([2, 5]), "flags": spaces.MultiBinary(2),
                          "pair": spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2)))})
    made = schema(nested)
    assert made["required"] == ["flags", "move", "n", "pair", "pick", "say"] and made["additionalProperties"] is False
    assert made["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": 3}
    assert made["properties"]["say"] == {"type": "string", "minLength": 1, "maxLength": 4}
    assert made["properties"]["pair"]["prefixItems"] == [{"type": "integer", "minimum": 0, "maximum": 1}] * 2
    good = {"move": [0, 1], "n": 3, "say": "hi", "pick": [1, 4], "flags": [0, 1], "pair": [1, 0]}
    action = to_action(nested, good)
    assert nested.contains(action) and to_json(action) == {**good, "move": [0.0, 1.0]}
    for value, fragment in (
            ({**good, "move": [0, 2]}, "action.move [0, 2] is outside the action space"),
            ({**good, "move": [0]}, "action.move has shape [1]; the action space's is [2]"),
            ({**good, "move": [0, float("inf")]}, "not finite"),
            ({**good, "n": 0}, "action.n is 0, outside the action space: 1 to 3"),
            ({**good, "n": True}, "action.n must be a whole number"),
            ({**good, "say": "toolong"}, "is not in the text space"),
            ({**good, "pick": [1, 5]}, "action.pick [1, 5] is outside"),
            ({**good, "pick": [0.5, 1]}, "must hold whole numbers"),
            ({**good, "pair": [1]}, "action.pair must be an array of 2 values"),
            ({"move": [0, 0]}, "missing flags, n, pair, pick, say"),
            ({**good, "extra": 1}, "unknown extra"),
            ([1], "must be an object")):
        with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
            to_action(nested, value)
    assert summary(np.zeros((2, 2))) == [[0.0, 0.0], [0.0, 0.0]]
    assert summary(np.zeros((84, 84, 3), np.uint8)) == {"shape": [84, 84, 3], "dtype": "uint8"}
    assert summary({"a": np.int64(3), "b": "x" * 600})["b"].endswith("...")


def test_text_renderings_mark_where_the_player_is() -> None:
    from game_bridge_mcp.game.gym._families import plain_text

    assert plain_text("\n\x1b[41mS\x1b[0mFFF\nFHFH\n") == "\n@FFF\nFHFH\n"
    assert plain_text("| : :\x1b[43m \x1b[0m: : |\n|Y|\x1b[34;1mB\x1b[0m|") == "| : :@: : |\n|Y|B|"


@pytest.mark.slow
def test_each_family_names_its_actions_and_their_keys() -> None:
    require("gymnasium", "ale_py", "minigrid", "nle")
    import gymnasium as gym

    from game_bridge_mcp.game.gym._families import Ale, MiniGrid, Nle, ToyText, family_of
    from game_bridge_mcp.game.gym._make import make, resolve

    breakout = make(resolve("ALE/Breakout-v5"), {})
    try:
        family = family_of(breakout)
        assert isinstance(family, Ale) and family.action_names() == ["NOOP", "FIRE", "RIGHT", "LEFT"]
        keys = family.keys(family.action_names() or [])
        assert keys == {"left": "LEFT", "right": "RIGHT", "space": "FIRE"}
        names = ["NOOP", "FIRE", "UP", "RIGHT", "LEFT", "DOWN", "UPRIGHT", "UPLEFT", "DOWNRIGHT", "DOWNLEFT",
                 "UPFIRE", "RIGHTFIRE", "LEFTFIRE", "DOWNFIRE", "UPRIGHTFIRE", "UPLEFTFIRE", "DOWNRIGHTFIRE",
                 "DOWNLEFTFIRE"]
        full = family.keys(names)
        assert family.compose(["up", "right", "space"], full, names) == "UPRIGHTFIRE"
        assert family.compose(["left", "right"], full, names) == "RIGHT"  # the newest arrow of an axis wins
        # no LEFTFIRE here: fire goes first
        assert family.compose(["space", "left"], keys, ["NOOP", "FIRE", "RIGHT", "LEFT"]) == "LEFT"
        assert family.default_fps() == 15.0  # 60 Hz over a frame skip of 4
    finally:
        breakout.close()
    grid = gym.make("MiniGrid-Empty-5x5-v0")
    family = family_of(grid)
    assert isinstance(family, MiniGrid)
    assert family.keys(family.action_names() or [])["up"] == "forward"
    grid.close()
    hack = make(resolve("NetHackScore-v0"), {"fix_moon_phase": True})
    family = family_of(hack)
    assert isinstance(family, Nle)
    names = family.action_names() or []
    assert "MORE" in names and len(names) == len(set(names))
    assert family.keys(names)["k"] == "N" and family.keys(names)["up"] == "N" and family.keys(names)["return"] == "MORE"
    assert [names[i] for i in family.text_actions("ke", names) or []] == ["N", "EAT"]
    with pytest.raises(ValueError, match="'Z' is not one of this environment's actions"):
        family.text_actions("Z", names)
    hack.close()
    challenge = make(resolve("NetHackChallenge-v0"), {"fix_moon_phase": True})
    names = family_of(challenge).action_names() or []
    assert len(names) == 121 and len(set(names)) == 121 and "CompassDirectionLonger.N" in names
    challenge.close()
    lake = gym.make("FrozenLake-v1", render_mode="ansi")
    lake.reset(seed=0)
    family = family_of(lake)
    assert isinstance(family, ToyText) and family.action_names() == ["LEFT", "DOWN", "RIGHT", "UP"]
    assert (family.text(0) or "").startswith("\n@FFF") and "@ is you" in (family.text(0) or "")
    lake.close()


@pytest.mark.slow
@pytest.mark.parametrize("env_id, kwargs, fragment", [
    ("ALE/Brekout-v5", {}, "no environment 'ALE/Brekout-v5' is registered; close matches: ALE/Breakout-v5 (ale-py)"),
    ("breakout", {}, "close matches: "),
    ("CartPole-v9", {}, "CartPole-v1 (gymnasium)"),
    ("CartPole-v1", {"bogus": 1}, "CartPole-v1 could not be made with bogus=1: CartPoleEnv.__init__() got an "
                                  "unexpected keyword argument 'bogus'"),
    ("CartPole-v1", {"render_mode": "human"}, "render_mode 'human' draws in a window"),
    ("nosuchmodule_zz:Thing-v0", {}, "cannot import 'nosuchmodule_zz' to register Thing-v0"),
    ("MiniHack-Room-5x5-v0", {}, "MiniHack-Room-5x5-v0 comes from the package minihack, which is not installed here: "
                                 "pip install minihack"),
])
def test_an_environment_that_cannot_be_made_says_what_to_do(env_id: str, kwargs: dict[str, Any], fragment: str) -> None:
    require("gymnasium", "ale_py")
    from game_bridge_mcp.game.gym._make import MakeError, make, resolve

    with pytest.raises(MakeError) as caught:
        make(resolve(env_id), kwargs)
    assert fragment in str(caught.value), str(caught.value)


def test_json_arrays_become_the_tuples_a_constructor_declares() -> None:
    """JSON has no tuples: ALE's frame skip drawn per step, (2, 5), comes as [2, 5] from
    --make-kwargs; an array for a keyword declared a list, or undeclared, stays an array."""
    require("gymnasium", "ale_py")
    import gymnasium as gym

    from game_bridge_mcp.game.gym._make import make

    env = make("ALE/Breakout-v5", {"frameskip": [2, 5]})
    try:
        assert env.unwrapped._frameskip == (2, 5)
    finally:
        env.close()

    class Shaped(gym.Env):  # type: ignore[type-arg]
        def __init__(self, pair: tuple[int, int] = (0, 0), sizes: list[int] | None = None, **extra: Any) -> None:
            self.pair, self.sizes, self.extra = pair, sizes, extra
            self.action_space = gym.spaces.Discrete(2)
            self.observation_space = gym.spaces.Discrete(2)

    gym.register("GBTest/Shaped-v0", entry_point=Shaped)
    try:
        made = make("GBTest/Shaped-v0", {"pair": [1, 2], "sizes": [3, 4], "other": [5]}).unwrapped
        assert (made.pair, made.sizes, made.extra) == ((1, 2), [3, 4], {"other": [5]})
    finally:
        del gym.registry["GBTest/Shaped-v0"]


def test_a_missing_dependency_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    require("gymnasium")
    import gymnasium as gym

    from game_bridge_mcp.game.gym._make import MakeError, make

    def needs_box2d(**_kwargs: Any) -> Any:
        raise gym.error.DependencyNotInstalled('Box2D is not installed, you can install it by run `pip install swig` '
                                               'followed by `pip install "gymnasium[box2d]"`')

    gym.register("GBTest/NeedsBox2d-v0", entry_point=needs_box2d)
    try:
        with pytest.raises(MakeError, match=r"needs a package that is not installed here: Box2D is not installed"):
            make("GBTest/NeedsBox2d-v0", {})
    finally:
        del gym.registry["GBTest/NeedsBox2d-v0"]


def test_init_writes_a_declaration_that_names_no_path_of_this_machine(tmp_path: Path) -> None:
    from game_bridge_mcp.game.gym import main

    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["--init", "--seed", "3", "ALE/Pong-v5"]) == 0
        doc = json.loads((tmp_path / "gamebridge.json").read_text())
        assert doc["launch"]["argv"][-3:] == ["--seed", "3", "ALE/Pong-v5"] and str(tmp_path) not in json.dumps(doc)
        assert main(["--init", "ALE/Pong-v5"]) == 2  # exists: --force to replace
        assert main(["--init", "--force", "not an id"]) == 2
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("env_id", ["ALE/Breakout-v5", "FrozenLake-v1", "CartPole-v1", "Blackjack-v1",
                                    "GBTest/Corridor-v0"])
def test_the_digest_is_the_one_the_whole_state_gives_without_summarising_what_it_drops(env_id: str) -> None:
    """``/state?view=digest`` comes from ``digest_state``, which leaves out an observation
    that is no scalar and the info (the kit keeps only the scalars of ``game``): the digest's
    bytes are those the whole state gives, taken before the whole state after a step (the
    book holds half its summary then) and after it, and the whole state is unchanged by it."""
    require("gymnasium", "ale_py")
    import gymnasium
    import ale_py

    from game_bridge_mcp.game.gym._engine import Engine
    from game_bridge_mcp.game.gym._families import family_of, make_defaults
    from game_bridge_mcp.game.gym._make import make
    from game_bridge_mcp.game.kit.state import encode_state, state_document
    from game_bridge_mcp.game.wrapper.serve import assemble

    gymnasium.register_envs(ale_py)
    if env_id.startswith("GBTest/"):
        import peers.gym_envs  # noqa: F401 - registers GBTest/...
    kwargs = {**make_defaults(env_id), "render_mode": "ansi" if env_id in ("FrozenLake-v1", "GBTest/Corridor-v0")
              else "rgb_array"}
    env = make(env_id, kwargs)
    bridge = assemble(env_id, "test", description="", paused=True, input_help="", state=dict,
                      on_close=lambda: None, register=False)
    engine = Engine(env, family_of(env), bridge, env_id=env_id, seed_base=3, autoreset=True, journal=True)
    engine.reset(3, None)
    engine.space.seed(3)

    def digest(doc: dict[str, Any]) -> bytes:
        return encode_state(state_document(doc, digest=True, frame=1, sim_frame=1, completed=0, paused=True,
                                           events=[], results=[], kit_keys=frozenset()))

    for step in range(12):
        if step % 3 == 0:  # the whole state first, now and then
            whole = json.dumps(engine.state(), default=repr)
            assert digest(engine.digest_state()) == digest(engine.state())
        else:
            first = digest(engine.digest_state())
            whole = json.dumps(engine.state(), default=repr)
            assert first == digest(engine.state()) == digest(engine.digest_state())
        assert json.dumps(engine.state(), default=repr) == whole
        if engine.book.ended:
            engine.reset(None, None)
        else:
            engine.step(engine.space.sample())
    assert engine.book.steps >= 8
    env.close()
