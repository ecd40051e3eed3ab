"""The gym wrapper as a real child process over its HTTP surface: Atari (ALE Breakout)
paused, played with named actions and keys, seen in screenshots, its episode ended and
reset with a seed; environments of our own with Dict and Box actions, a text observation,
reset options and a step that raises; NetHack and MiniGrid as text; the conformance check
on each; and the environments that cannot be made, each said in one line."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import psutil
import pytest

from gym_helpers import Gym, gym_env, require, run_wrapper, served
from launch_helpers import PYTHON, wait_until
from png_helpers import read_png

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def q(value: Any) -> str:
    """An argument as the bridge puts it on the wire (JSON for arrays and objects)."""
    return urllib.parse.quote_plus(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))


def events(game: Gym, since: int = 0) -> list[dict[str, Any]]:
    return list(game.doc(f"/events?since={since}&limit=1000")["events"])


def check(game: Gym) -> str:
    run = subprocess.run([PYTHON, "-m", "game_bridge_mcp", "check", "-p", str(game.port), "--no-close"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "0 failed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    return run.stdout


def test_breakout_paused_is_played_by_name_and_by_key_and_seen(tmp_path: Path) -> None:
    require("ale_py")
    with served("--seed", "11", "--size", "320x420", "ALE/Breakout-v5", env=gym_env(tmp_path)) as game:
        health = game.doc("/health")
        assert {"clock", "screenshot", "results", "after", "events"} <= set(health["features"])
        assert "input" not in health["features"]  # keys, but no pointer: the input extension is not claimed
        start = game.doc("/state")
        assert start["paused"] is True and start["simFrame"] == 0
        assert {k: start["game"][k] for k in ("env", "episode", "step", "lives", "seed", "held", "ended")} == \
            {"env": "ALE/Breakout-v5", "episode": 1, "step": 0, "lives": 5, "seed": 11, "held": "NOOP", "ended": False}
        tools = {t["name"]: t for ts in game.doc("/tools")["toolsets"] for t in ts["tools"]}
        assert tools["act"]["inputSchema"]["properties"]["action"]["enum"] == ["NOOP", "FIRE", "RIGHT", "LEFT"]
        assert "left (LEFT), right (RIGHT), space (FIRE)" in tools["key"]["inputSchema"]["properties"]["key"]["description"]
        assert "mouse" not in tools and "text" not in tools and "type" not in tools

        # act on a paused game runs its steps at once and says what they gave
        fired = game.outcome(game.command("cmd=act&action=FIRE&frames=3", wait=False)["commandId"])
        assert fired["ok"] is True and fired["result"] | {"action": "FIRE", "frames": 3, "steps": 3, "episode": 1,
                                                          "step": 3, "lives": 5} == fired["result"]
        assert game.doc("/state")["simFrame"] == 3
        # a key waits for the clock; step delivers it, each step taking its action
        press = game.command("cmd=key&key=right&frames=4", wait=False)
        # (applied by the game's thread at its next turn, which an answer may come before)
        assert wait_until(lambda: game.doc("/state")["game"]["keysDown"] == ["right"], 10)
        assert game.doc("/state")["game"]["held"] == "RIGHT" and game.doc("/state")["simFrame"] == 3
        game.command("cmd=step&frames=5")
        assert game.outcome(press["commandId"])["ok"] is True
        after = game.doc("/state")
        assert after["simFrame"] == 8 and after["game"]["step"] == 8 and after["game"]["keysDown"] == []
        bad = game.outcome(game.command("cmd=key&key=up", wait=False)["commandId"])
        assert bad["ok"] is False and "no action has the key 'up' here; its keys: left (LEFT)" in bad["error"]
        refused = game.doc("/command?cmd=act&action=JUMP")
        assert refused["accepted"] is False and "must be one of 'NOOP', 'FIRE', 'RIGHT', 'LEFT'" in refused["error"]
        assert game.doc("/command?cmd=act&action=FIRE&frames=0")["accepted"] is False

        # the picture, at --size
        status, headers, body = game.get("/screenshot?maxWidth=1000&maxHeight=1000")
        assert status == 200 and headers["content-type"] == "image/png"
        width, height = read_png(body)[:2]
        assert (width, height) == (320, 420)

        # the episode played to its end: lives lost, its end, and act refused until reset
        ended = game.outcome(game.command("cmd=act&action=FIRE&frames=3000", wait=False)["commandId"])["result"]
        assert ended["terminated"] is True and ended["lives"] == 0 and ended["steps"] < 3000
        seen = [e["m"] for e in events(game)]
        assert seen.count("life:lost") == 5 and seen[-1] == "episode:end" and seen[0] == "episode:start"
        over = game.outcome(game.command("cmd=act&action=NOOP", wait=False)["commandId"])
        assert over["ok"] is False and "episode 1 terminated at step" in over["error"] and "reset" in over["error"]
        frame_before = game.doc("/state")["simFrame"]
        game.command("cmd=step&frames=2")  # frames pass; an ended episode takes no step
        assert game.doc("/state")["game"]["step"] == ended["step"] and game.doc("/state")["simFrame"] == frame_before + 2

        # a seeded reset gives the same episode for the same actions
        pictures = []
        for _ in range(2):
            reset = game.outcome(game.command("cmd=reset&seed=7", wait=False)["commandId"])
            assert reset["ok"] is True and reset["result"]["seed"] == 7
            game.command("cmd=act&action=FIRE&frames=2")
            game.command("cmd=act&action=LEFT&frames=20")
            pictures.append(game.get("/screenshot")[2])
            state = game.doc("/state")["game"]
            assert (state["episode"], state["step"], state["seed"]) in ((2, 22, 7), (3, 22, 7))
        assert pictures[0] == pictures[1]
        checked = check(game)
        assert "screenshot: GET /screenshot" in checked and "snapshot: a load leaves the clock as it was" in checked


def comparable(state: dict[str, Any]) -> dict[str, Any]:
    """/state less what a load does not give back (the snapshot extension's list)."""
    return {k: v for k, v in state.items() if k not in ("frame", "completedCommandId", "commandResults", "events")}


def test_atari_snapshots_over_http_load_exactly_here_and_in_another_instance(tmp_path: Path) -> None:
    require("ale_py")
    env = gym_env(tmp_path)
    with served("--seed", "2", "ALE/Pong-v5", env=env) as game, served("--seed", "8", "ALE/Pong-v5", env=env) as other:
        assert "snapshot" in game.doc("/health")["features"]
        game.command("cmd=act&action=RIGHTFIRE&frames=9")
        saved = game.outcome(game.command("cmd=snapshot_save", wait=False)["commandId"])["result"]
        assert saved["simFrame"] == 9 and saved["bytes"] > 1000
        at_save, picture = comparable(game.doc("/state")), game.get("/screenshot")[2]

        def future(target: Gym) -> list[Any]:
            seen = []
            for action in ("LEFT", "LEFTFIRE", "NOOP", "RIGHT") * 3:
                target.command(f"cmd=act&action={action}&frames=3")
                seen.append((comparable(target.doc("/state")), target.get("/screenshot")[2]))
            return seen

        ahead = future(game)
        loaded = game.outcome(game.command(f"cmd=snapshot_load&id={saved['id']}", wait=False)["commandId"])
        assert loaded["ok"] is True and loaded["result"]["simFrame"] == 9
        assert comparable(game.doc("/state")) == at_save and game.get("/screenshot")[2] == picture
        assert future(game) == ahead
        assert events(game)[-1]["m"] == "snapshot:loaded"
        # the bytes, into another instance of the same environment (another seed, another past)
        status, _headers, body = game.get(f"/snapshot?id={saved['id']}")
        assert status == 200
        other.command("cmd=act&action=LEFT&frames=20")
        conn = __import__("http.client").client.HTTPConnection("127.0.0.1", other.port, timeout=15)
        conn.request("POST", "/snapshot", body=body, headers={"Content-Type": "application/octet-stream"})
        posted = json.loads(conn.getresponse().read())
        conn.close()
        assert other.outcome(other.command(f"cmd=snapshot_load&id={posted['id']}", wait=False)["commandId"])["ok"]
        assert comparable(other.doc("/state")) == at_save and other.get("/screenshot")[2] == picture
        assert future(other) == ahead


def test_actions_shaped_by_the_space_text_observations_and_reset_options(tmp_path: Path) -> None:
    env = gym_env(tmp_path)
    with served("--seed", "1", "gym_envs:GBTest/Corridor-v0", env=env) as game:
        state = game.doc("/state")
        assert "@" in state["ui"]["text"] and state["game"]["info"] == {"start": state["ui"]["text"].index("@")}
        schema = {t["name"]: t for ts in game.doc("/tools")["toolsets"] for t in ts["tools"]}["act"]["inputSchema"]
        action = schema["properties"]["action"]
        assert action["type"] == "object" and set(action["required"]) == {"move", "run", "say"}
        assert "screenshot" not in game.doc("/health")["features"]
        assert "no picture: the environment renders ansi, not rgb_array (its render modes: ansi)" in game.stderr
        reset = game.outcome(game.command("cmd=reset&options=" + q({"start": 2}), wait=False)["commandId"])
        assert reset["ok"] is True and game.doc("/state")["ui"]["text"].startswith("..@")
        moved = game.outcome(game.command("cmd=act&frames=2&action=" + q({"move": [1], "run": 1, "say": "hi"}),
                                          wait=False)["commandId"])
        assert moved["ok"] is True and moved["result"]["action"] == {"move": [1.0], "run": 1, "say": "hi"}
        state = game.doc("/state")
        assert state["ui"]["text"].startswith("......@") and "(said hi)" in state["ui"]["text"]
        assert state["game"]["info"] == {"position": 6, "noise": None}  # NaN is no JSON: null
        for value, fragment in (({"move": [3], "run": 0, "say": "a"}, "action.move [3] is outside the action space"),
                                ({"move": [0], "run": 0}, "missing say"),
                                ({"move": [0], "run": 0, "say": "way too long"}, "is not in the text space")):
            refused = game.outcome(game.command("cmd=act&action=" + q(value), wait=False)["commandId"])
            assert refused["ok"] is False and fragment in refused["error"], refused
        assert game.doc("/command?cmd=act&action=" + q("[1]"))["accepted"] is False  # not an object: the door
        wrong = game.outcome(game.command("cmd=reset&options=" + q({"start": "x"}), wait=False)["commandId"])
        assert wrong["ok"] is False and "options start must be an int, got str" in wrong["error"]
        assert game.doc("/command?cmd=reset&seed=abc")["accepted"] is False
        assert game.doc("/command?cmd=reset&options=" + q([1]))["accepted"] is False
        again = game.outcome(game.command("cmd=reset&seed=3", wait=False)["commandId"])
        assert again["ok"] is True and "error" not in game.doc("/state")["game"]
        check(game)
    with served("--autoreset", "--seed", "5", "--make-kwargs", '{"space": "multi"}', "gym_envs:GBTest/Corridor-v0",
                env=env) as game:
        schema = {t["name"]: t for ts in game.doc("/tools")["toolsets"] for t in ts["tools"]}["act"]["inputSchema"]
        assert schema["properties"]["action"]["items"] == {"type": "integer", "minimum": 0}
        assert "element i is 0 to nvec[i] - 1, nvec [3, 2]" in schema["properties"]["action"]["description"]
        done = game.outcome(game.command("cmd=act&action=" + q([2, 1]), wait=False)["commandId"])
        assert done["ok"] is True and done["result"]["action"] == [2, 1]
        out = game.outcome(game.command("cmd=act&action=" + q([3, 0]), wait=False)["commandId"])
        assert out["ok"] is False and "outside the action space" in out["error"]
        # --autoreset: the frame after an episode ends starts the next (its seed drawn from --seed's)
        run = game.outcome(game.command("cmd=act&frames=12&action=" + q([2, 1]), wait=False)["commandId"])["result"]
        assert run["episode"] >= 2 and run["steps"] < 12, run
        starts = [e for e in events(game) if e["m"] == "episode:start"]
        assert starts[0]["seed"] == 5 and starts[1]["seed"] != 5 and len(starts) == run["episode"]


def test_a_running_clock_steps_with_the_held_action_and_waits_without_one(tmp_path: Path) -> None:
    with served("--fps", "100", "gym_envs:GBTest/Corridor-v0", env=gym_env(tmp_path, paused=False)) as game:
        assert wait_until(lambda: game.doc("/state")["simFrame"] >= 20, 20)
        state = game.doc("/state")
        assert state["paused"] is False and state["game"]["step"] == 0 and state["game"]["held"] is None  # no no-op
        held = game.outcome(game.command("cmd=act&frames=5&action=" + q({"move": [0], "run": 0, "say": "a"}),
                                         wait=False)["commandId"])
        assert held["ok"] is True and held["result"]["steps"] == 5  # held for the next five frames
        assert game.doc("/state")["game"]["step"] == 5
    with served("--fps", "100", "--make-kwargs", '{"space": "box"}', "gym_envs:GBTest/Corridor-v0",
                env=gym_env(tmp_path, paused=False)) as game:  # a Box space holding zero: its no-op
        assert wait_until(lambda: game.doc("/state")["game"]["step"] >= 10, 20)
        assert game.doc("/state")["game"]["held"] == [0.0, 0.0]


def test_an_environment_that_raises_in_step_is_reported_and_the_wrapper_stays(tmp_path: Path) -> None:
    with served("--make-kwargs", '{"space": "box", "raise_at": 3}', "gym_envs:GBTest/Corridor-v0",
                env=dict(gym_env(tmp_path), GAME_BRIDGE_SEED="12")) as game:
        assert game.doc("/state")["game"]["seed"] == 12  # the launch's seed, as for every wrapper
        failed = game.outcome(game.command("cmd=act&frames=5&action=" + q([0.1, 0.1]), wait=False)["commandId"])
        assert failed["ok"] is False and "step 3 of episode 1 raised RuntimeError: the corridor collapsed at step 3" \
            in failed["error"] and "reset" in failed["error"]
        assert [e for e in events(game) if e["m"] == "step:failed"][0]["step"] == 2
        state = game.doc("/state")["game"]
        assert state["ended"] is True and "collapsed" in state["error"] and state["step"] == 2
        refused = game.outcome(game.command("cmd=act&action=" + q([0, 0]), wait=False)["commandId"])
        assert refused["ok"] is False and "the environment failed" in refused["error"]
        assert game.outcome(game.command("cmd=reset", wait=False)["commandId"])["ok"] is True
        assert "error" not in game.doc("/state")["game"] and game.doc("/health")["ok"] is True


def test_nethack_and_minigrid_are_played_from_their_text(tmp_path: Path) -> None:
    require("nle", "minigrid")
    env = gym_env(tmp_path)
    with served("--seed", "5", "NetHackScore-v0", env=env) as game:
        state = game.doc("/state")
        text = state["ui"]["text"]
        assert "Dlvl:1" in text and "@" in text and state["game"]["hp"] > 0 and state["game"]["depth"] == 1
        tools = {t["name"]: t for ts in game.doc("/tools")["toolsets"] for t in ts["tools"]}
        assert {"act", "type", "reset", "key"} <= set(tools)
        typed = game.outcome(game.command("cmd=type&text=ss", wait=False)["commandId"])
        assert typed["ok"] is True and typed["result"]["steps"] == 2 and typed["result"]["action"] == "ss"
        assert game.doc("/state")["game"]["step"] == 2
        bad = game.outcome(game.command("cmd=type&text=Z", wait=False)["commandId"])
        assert bad["ok"] is False and "'Z' is not one of this environment's actions" in bad["error"]
        assert game.outcome(game.command("cmd=act&action=N", wait=False)["commandId"])["ok"] is True
        check(game)
    with served("--seed", "2", "MiniGrid-Empty-5x5-v0", env=env) as game:
        text = game.doc("/state")["ui"]["text"]
        assert "Mission: get to the green goal square" in text and ">>" in text
        game.outcome(game.command("cmd=act&action=forward", wait=False)["commandId"])
        assert game.doc("/state")["ui"]["text"] != text and game.doc("/state")["game"]["agentX"] == 2
        status, _headers, body = game.get("/screenshot")
        assert status == 200 and read_png(body)[:2] == (160, 160)


def test_vizdoom_is_played_by_its_buttons_and_keys_and_saved_by_re_execution(tmp_path: Path) -> None:
    """ViZDoom's Basic scenario (a monster across a room, one shot to kill it): actions named by
    the buttons they press, keys for them, its ammunition by name, a picture, and `check`
    (its snapshot by re-execution included)."""
    require("vizdoom")
    with served("--seed", "4", "VizdoomBasic-v1", env=gym_env(tmp_path), cwd=tmp_path) as game:
        start = game.doc("/state")
        assert start["game"]["variables"] == {"AMMO2": 50.0} and start["game"]["held"] == "NOOP"
        tools = {t["name"]: t for ts in game.doc("/tools")["toolsets"] for t in ts["tools"]}
        assert tools["act"]["inputSchema"]["properties"]["action"]["enum"] == ["NOOP", "ATTACK", "MOVE_RIGHT",
                                                                               "MOVE_LEFT"]
        assert "left (MOVE_LEFT), right (MOVE_RIGHT), space (ATTACK)" in \
            tools["key"]["inputSchema"]["properties"]["key"]["description"]
        fired = game.outcome(game.command("cmd=act&action=ATTACK&frames=8", wait=False)["commandId"])
        assert fired["ok"] is True and fired["result"]["steps"] == 8
        assert game.doc("/state")["game"]["variables"]["AMMO2"] < 50  # a shot spent
        # left and space held together: the scenario presses one button at a time, the newest key's
        game.command("cmd=key&key=left&frames=6", wait=False)
        game.command("cmd=key&key=space&frames=6", wait=False)
        # (the game's thread applies the keys at its next turn)
        assert wait_until(lambda: game.doc("/state")["game"]["held"] == "ATTACK", 10)
        game.command("cmd=step&frames=7")  # the keys' frames pass (a paused game: they wait for steps)
        assert game.doc("/state")["game"]["keysDown"] == [] and game.doc("/state")["game"]["step"] == 15
        status, _headers, body = game.get("/screenshot")
        assert status == 200 and read_png(body)[:2] == (320, 240)
        checked = check(game)
        assert "snapshot: a load gives back the saved /state" in checked
        # ViZDoom's engine is a process of its own, and check's load re-executed the episode in a
        # fresh environment: its engine ends when the game is closed
        engines = psutil.Process(game.proc.pid).children(recursive=True)
        assert engines and all("vizdoom" in p.name() for p in engines), engines
        game.command("cmd=close", wait=False)
        assert game.proc.wait(30) == 0
        assert wait_until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in engines),
                          10.0), [p.pid for p in engines if p.is_running()]


def test_crafter_is_played_by_its_names_and_keys_and_replays_from_its_seed(tmp_path: Path) -> None:
    require("crafter")
    with served("--seed", "4", "CrafterReward-v1", env=gym_env(tmp_path)) as game:
        tools = {t["name"]: t for ts in game.doc("/tools")["toolsets"] for t in ts["tools"]}
        assert "place_table" in tools["act"]["inputSchema"]["properties"]["action"]["enum"]
        assert "w (move_up)" in tools["key"]["inputSchema"]["properties"]["key"]["description"]
        pictures = []
        for _ in range(2):
            assert game.outcome(game.command("cmd=reset&seed=9", wait=False)["commandId"])["ok"] is True
            moved = game.outcome(game.command("cmd=act&action=move_left&frames=3", wait=False)["commandId"])
            assert moved["ok"] is True and moved["result"]["steps"] == 3
            game.command("cmd=key&key=space&frames=2", wait=False)
            game.command("cmd=step&frames=3")
            pictures.append(game.get("/screenshot")[2])
        state = game.doc("/state")["game"]
        assert state["step"] == 6 and state["info"]["health"] == 9 and "wood" in state["info"]
        assert read_png(pictures[0])[:2] == (64, 64) and pictures[0] == pictures[1]


@pytest.mark.parametrize("args, fragment", [
    (["ALE/Brekout-v5"], "close matches: ALE/Breakout-v5 (ale-py)"),
    (["MiniHack-Room-5x5-v0"], "comes from the package minihack, which is not installed here: pip install minihack"),
    (["--make-kwargs", '{"render_mode": "human"}', "CartPole-v1"], "render_mode 'human' draws in a window"),
    (["--make-kwargs", '{"nope": 1}', "CartPole-v1"], "unexpected keyword argument 'nope'; check --make-kwargs"),
])
def test_an_environment_that_cannot_be_made_ends_the_wrapper_with_one_line(tmp_path: Path, args: list[str],
                                                                            fragment: str) -> None:
    run = run_wrapper(*args, env=gym_env(tmp_path))
    assert run.returncode == 1 and fragment in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
