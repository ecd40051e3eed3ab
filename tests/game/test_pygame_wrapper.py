"""The pygame wrapper on small games of our own, as real child processes: the clock's
fixed step, input delivery and its errors, the state hook, exit codes, boot failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.game.pygame._runner import UsageError, declaration, parse
from launch_helpers import PYTHON, LauncherFactory, free_range, wait_until
from pygame_helpers import CLOCKED, GAMES, Wrapped, game_env, wrapped

pytestmark = pytest.mark.timeout(90)
RANDOM = GAMES / "pygame_random.py"
@pytest.mark.slow
def test_stepping_gives_the_game_exactly_one_fixed_step_per_frame(tmp_path: Path) -> None:
    with wrapped(str(CLOCKED), env=game_env(tmp_path, paused=True)) as game:
        start = game.doc("/state")
        assert start["paused"] is True and start["simFrame"] == 1
        assert start["pygame"]["caption"] == "Clocked Box"
        assert start["game"]["frames"] == 1  # held at its first flip
        # held: ten frames of the loop later, the game has not moved on
        frame = start["frame"]
        while game.doc("/health")["frame"] < frame + 10:
            time.sleep(0.01)
        assert game.doc("/state")["game"]["frames"] == 1
        game.command("cmd=step&frames=12")
        stepped = game.doc("/state")
        assert stepped["simFrame"] == 13 and stepped["game"]["frames"] == 13
        assert stepped["game"]["dts"][1:] == [20] * 12  # tick(50): a 20 ms step, however long we took
        ticks = stepped["game"]["ticks"]
        assert [b - a for a, b in zip(ticks[1:], ticks[2:])] == [20] * 11
        game.command("cmd=resume")
        later = game.doc(f"/state?after={game.command('cmd=noop')['commandId']}")
        assert later["paused"] is False and later["simFrame"] > 13


@pytest.mark.slow
def test_input_is_delivered_and_errors_say_what_is_valid(tmp_path: Path) -> None:
    with wrapped(str(CLOCKED), env=game_env(tmp_path, paused=True)) as game:
        bad = game.command("cmd=key&key=nosuchkey", wait=False)
        outcome = game.outcome(bad["commandId"])
        assert outcome["ok"] is False and "unknown key name 'nosuchkey'" in outcome["error"]
        assert "valid names: a-z, 0-9, f1-f15" in outcome["error"] and "left shift" in outcome["error"]
        assert outcome["error"].endswith("^_`")  # the whole list fits the kit's error cap
        outside = game.outcome(game.command("cmd=mouse&x=500&y=10", wait=False)["commandId"])
        assert outside["ok"] is False and "outside the 160x120 window" in outside["error"]
        long_text = game.outcome(game.command("cmd=text&text=" + "a" * 1001, wait=False)["commandId"])
        assert long_text["ok"] is False and "at most 1000" in long_text["error"]
        refused = game.doc("/command?cmd=mouse&x=1&y=1&button=7")
        assert refused["accepted"] is False  # the manifest's enum is enforced at the door

        # a press on a paused game waits for frames: it completes only after they are stepped
        press = game.command("cmd=key&key=left&frames=3", wait=False)
        time.sleep(0.2)
        assert game.doc("/health")["completedCommandId"] < press["commandId"]
        assert game.doc("/state")["pygame"]["keysDown"] == ["left"]
        game.command("cmd=step&frames=4")
        outcome = game.outcome(press["commandId"])
        assert outcome["ok"] is True and outcome["result"] == {"key": "left", "action": "press", "frames": 3}
        events = [e["m"] for e in game.doc("/events?since=0")["events"]]
        assert events[-2:] == ["keydown:left", "keyup:left"]
        assert game.doc("/state")["pygame"]["keysDown"] == []

        # the pointer in a half-size picture's pixels (its scale), and the wheel as pygame's events
        click = game.command("cmd=mouse&x=40&y=30&scale=0.5", wait=False)
        wheel = game.command("cmd=mouse&x=40&y=30&scale=0.5&action=wheel&dy=300", wait=False)
        game.command("cmd=step&frames=3")
        assert game.outcome(click["commandId"])["result"]["window"] == {"x": 81, "y": 61}
        assert game.outcome(wheel["commandId"])["result"]["dy"] == 300
        assert game.doc("/state")["game"]["mice"] == [["down", 1, [81, 61]], ["wheel", 0, -3, -3.0],
                                                         ["down", 5, [81, 61]], ["down", 5, [81, 61]],
                                                         ["down", 5, [81, 61]]]


@pytest.mark.slow
def test_close_posts_quit_and_the_games_exit_code_is_kept(tmp_path: Path) -> None:
    with wrapped(str(CLOCKED), env=game_env(tmp_path)) as game:
        game.doc("/command?cmd=close")
        assert game.proc.wait(15) == 3


@pytest.mark.slow
@pytest.mark.parametrize("signame, args, code", [
    ("SIGTERM", (), 3),                  # SDL's handler: a QUIT, which the game reads and exits 3 on
    ("SIGINT", ("--sdl-sigint",), 3),    # Ctrl-C left to SDL: a QUIT too
    ("SIGINT", (), 130),                 # Python's own: KeyboardInterrupt out of the hold
])
def test_a_paused_game_honours_sigterm_and_sigint(tmp_path: Path, signame: str, args: tuple[str, ...],
                                                  code: int) -> None:
    with wrapped(str(CLOCKED), *args, env=game_env(tmp_path, paused=True)) as game:
        assert game.doc("/state")["paused"] is True
        game.proc.send_signal(getattr(signal, signame))  # the wrapper this test started
        try:
            assert game.proc.wait(15) == code
        except subprocess.TimeoutExpired:
            raise AssertionError(f"a paused wrapped game ignored {signame}") from None


@pytest.mark.slow
def test_a_crash_prints_its_traceback_and_exits_1(tmp_path: Path) -> None:
    done = subprocess.run([PYTHON, "-m", "game_bridge_mcp.game.pygame", str(CLOCKED), "--crash"],
                          capture_output=True, text=True, timeout=60, env=game_env(tmp_path))
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: the game crashed in its first frame" in done.stderr
    assert "ended (exit code 1)" in done.stderr


@pytest.mark.slow
def test_usage_errors() -> None:
    done = subprocess.run([PYTHON, "-m", "game_bridge_mcp.game.pygame", "no/such/game.py"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "no such script: no/such/game.py" in done.stderr
    with pytest.raises(UsageError, match="name the game"):
        parse(["--paused"])
    with pytest.raises(UsageError, match="port number"):
        parse(["--port", "x", "-m", "m"])
    opts = parse(["--port", "7830", "--paused", "-m", "pygame.examples.aliens", "--not-ours", "-m", "x"])
    assert (opts.port, opts.paused, opts.module, opts.args) == (7830, True, "pygame.examples.aliens",
                                                               ["--not-ours", "-m", "x"])
    argv = declaration(opts)["launch"]["argv"]
    assert argv[1:] == ["-m", "game_bridge_mcp.game.pygame", "--port", "{port}", "-m", "pygame.examples.aliens",
                        "--not-ours", "-m", "x"]


def test_the_seed_comes_from_seed_then_the_environment_then_zero() -> None:
    from game_bridge_mcp.game.pygame._runner import game_seed

    assert game_seed(parse(["-m", "g"]), {}) == 0
    assert game_seed(parse(["-m", "g"]), {"GAME_BRIDGE_SEED": "42"}) == 42
    opts = parse(["--seed", "7", "-m", "g"])
    assert game_seed(opts, {"GAME_BRIDGE_SEED": "42"}) == 7
    assert declaration(opts)["launch"]["argv"][4:8] == ["{port}", "--seed", "7", "-m"]
    with pytest.raises(UsageError, match="GAME_BRIDGE_SEED expects a whole number"):
        game_seed(parse(["-m", "g"]), {"GAME_BRIDGE_SEED": "-1"})
    with pytest.raises(UsageError, match="--seed expects a whole number"):
        parse(["--seed", "x", "-m", "g"])


@pytest.mark.slow
def test_another_seed_is_another_game_and_the_version_says_which(tmp_path: Path) -> None:
    from game_bridge_mcp.core.bridge import Bridge
    from game_bridge_mcp.config import Config
    from game_bridge_mcp.launch.declaration import load_declaration

    seen = []
    for seed in ("0", "0", "5"):
        folder = tmp_path / f"seed{len(seen)}"
        folder.mkdir()
        config = Config(environ={**os.environ, "GAME_BRIDGE_HOME": str(folder / "home")}, scan_range=(1,),
                        registry_dir=folder / "home" / "instances",
                        declaration=load_declaration(declare(folder, RANDOM, timeout_ms=30000, seed=seed)))
        bridge = Bridge(config)
        try:
            port = bridge.run_tool("launch_instance", {"paused": True})["port"]
            bridge.run_tool("call_tool", {"port": port, "name": "advance", "arguments": {"frames": 40}})
            state = bridge.run_tool("call_tool", {"port": port, "name": "get_state", "arguments": {}})
            version = bridge.run_tool("list_toolsets", {"port": port})["version"]
            seen.append((state["game"]["first"], state["game"]["stars"], version))
        finally:
            bridge.shutdown()
    assert seen[0] == seen[1] and seen[0][:2] != seen[2][:2]
    assert seen[0][2].endswith(", seed 0") and seen[2][2].endswith(", seed 5")


def declare(directory: Path, script: Path, *args: str, timeout_ms: int = 20000, seed: str | None = None) -> Path:
    low, high = free_range(4)
    doc: dict[str, Any] = {"launch": {"argv": [PYTHON, "-m", "game_bridge_mcp.game.pygame", "--port", "{port}",
                                              str(script), *args],
                                      "portRange": f"{low}-{high}", "readyTimeoutMs": timeout_ms}}
    if seed is not None:
        doc["launch"]["env"] = {"GAME_BRIDGE_SEED": seed}
    path = directory / "gamebridge.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
def test_a_game_broken_at_import_fails_the_launch_with_its_traceback(tmp_path: Path,
                                                                      launchers: LauncherFactory) -> None:
    from game_bridge_mcp.errors import BridgeError

    launcher = launchers(declare(tmp_path, GAMES / "pygame_broken.py"))
    with pytest.raises(BridgeError) as info:
        launcher.launch()
    assert "ZeroDivisionError: the game is broken at import" in str(info.value.render())


@pytest.mark.slow
def test_a_game_that_never_flips_is_reported_by_readiness(tmp_path: Path, launchers: LauncherFactory) -> None:
    from game_bridge_mcp.errors import BridgeError

    launcher = launchers(declare(tmp_path, GAMES / "pygame_noflip.py", timeout_ms=5000))
    with pytest.raises(BridgeError) as info:
        launcher.launch()
    assert "has not flipped its display" in str(info.value.render())


@pytest.mark.slow
def test_a_wrapped_game_passes_the_conformance_check(tmp_path: Path) -> None:
    """``game-bridge-mcp pygame --init`` then ``game-bridge-mcp check --launch``: every
    advertised extension (results, after, view, events, screenshot, clock with a paused
    start, input) as docs/contract.md describes it, on an unmodified game."""
    init = subprocess.run([PYTHON, "-m", "game_bridge_mcp", "pygame", "--init", str(CLOCKED)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert init.returncode == 0, init.stderr
    doc = json.loads((tmp_path / "gamebridge.json").read_text())
    assert doc["launch"]["argv"][0] == "{python}" and "env" not in doc["launch"]  # no interpreter path: committable
    low, high = free_range(4)
    doc["launch"]["portRange"] = f"{low}-{high}"
    (tmp_path / "gamebridge.json").write_text(json.dumps(doc))
    done = subprocess.run([PYTHON, "-m", "game_bridge_mcp", "check", "--launch",
                           "--registry-dir", str(tmp_path / "instances")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=game_env(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "The game conforms." in done.stdout
    for feature in ("input: key", "screenshot: GET /screenshot", "clock: step", "GAME_BRIDGE_START_PAUSED"):
        assert any(line.startswith("PASS") and feature in line for line in done.stdout.splitlines()), feature


@pytest.mark.slow
def test_a_game_blocked_in_its_own_loop_keeps_answering_and_is_stopped(tmp_path: Path,
                                                                     launchers: LauncherFactory) -> None:
    launcher = launchers(declare(tmp_path, GAMES / "pygame_noflip.py", "--flip-once"))
    port = launcher.launch()["port"]
    game = Wrapped(subprocess.Popen(["true"]), port)  # only its HTTP helpers; the launcher owns the game
    game.proc.wait(5)
    assert wait_until(lambda: game.doc("/health")["frame"] >= 1, 10)
    noop = game.doc("/command?cmd=noop")["commandId"]
    held = game.doc(f"/state?after={noop}&waitMs=1000")  # answered within its wait, not applied
    assert held["completedCommandId"] < noop and held["frame"] == 1
    stopped = launcher.stop(port, grace_ms=500)
    assert stopped["stopped"] is True and stopped["how"] in ("terminated", "killed")


@pytest.mark.slow
def test_a_pause_during_a_long_step_ends_it_there_and_lets_go_of_held_keys(tmp_path: Path) -> None:
    """What a cancelled advance sends (issue 38, item 7): pause while step {frames: 10000}
    runs ends the step at the frame it reached, says so, and releases the key held."""
    with wrapped(str(CLOCKED), env=game_env(tmp_path, paused=True)) as game:
        game.command("cmd=key&key=right&action=down")
        step = game.command("cmd=step&frames=10000", wait=False)
        assert wait_until(lambda: game.doc("/state")["simFrame"] > 5, 10)
        game.command("cmd=pause", wait=False)
        result = game.outcome(step["commandId"])["result"]
        assert result["interrupted"] is True and result["asked"] == 10000 and 5 <= result["frames"] < 10000, result
        state = game.doc("/state")
        assert state["paused"] is True and state["pygame"]["keysDown"] == []
        assert state["simFrame"] == result["simFrame"]  # nothing ran on
        right = state["game"]["right"]
        game.command("cmd=step&frames=3")
        assert game.doc("/state")["game"]["right"] == right  # the key is up: the box stays
        events = game.doc("/events?since=0")["events"]
        assert [e["simFrame"] for e in events if e["m"] == "step:interrupted"] == [result["simFrame"]]
        assert "keyup:right" in [e["m"] for e in events]
