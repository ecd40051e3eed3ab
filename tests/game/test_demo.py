"""The demo game: its rules (pure, in-process) and the real program (a child process
driven over HTTP)."""

from __future__ import annotations

import json
import os
import sys
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.wire.client import GameClient
from game_bridge_mcp.cli.demo import choose_x
from game_bridge_mcp.cli.demo import main as demo_main
from game_bridge_mcp.game.demo import (COLUMNS, PIECES, POINTS, ROWS, SCREENSHOT_FRAMES,
                                       FruitMerge, RuleError, build, padding_json)
from game_bridge_mcp.manifest.reader import normalise_manifest
from game_bridge_mcp.registry import read_registry
from game_bridge_mcp.wire.transport import loopback_opener

from launch_helpers import gone
from peers.kitfakes import demo_process

pytestmark = pytest.mark.timeout(60)

MOVES = [0, -3, 3, 1, 1, -1, 0, 2, -2, 0, 0, 3, -3, 1, 2]


def settle(game: FruitMerge, limit: int = 10_000) -> int:
    frames = 0
    while game.moving:
        game.tick()
        frames += 1
        assert frames < limit, "the board never settled"
    return frames


def play(seed: int, moves: list[float]) -> tuple[dict[str, Any], list[str]]:
    events: list[str] = []
    game = FruitMerge(seed, emit=lambda m, **_f: events.append(m))
    game.new_round()
    for x in moves:
        if game.state != "RUNNING":
            break
        game.drop(x)
        settle(game)
    return game.to_state(), events


def test_same_seed_same_moves_same_game() -> None:
    first, first_events = play(11, MOVES)
    second, second_events = play(11, MOVES)
    assert first == second and first_events == second_events
    assert first["game"]["score"] > 0 and first["game"]["merges"] > 0
    other, _ = play(12, MOVES)
    assert other["game"] != first["game"]


def test_drops_sent_while_moving_wait_their_turn_so_timing_does_not_matter() -> None:
    rushed = FruitMerge(11)
    rushed.new_round()
    for x in MOVES:
        if rushed.state == "RUNNING":
            rushed.drop(x)  # all at once, no waiting
    settle(rushed)
    assert rushed.to_state()["game"] == play(11, MOVES)[0]["game"]


def test_two_equal_pieces_merge_into_the_next_kind_and_score() -> None:
    events: list[str] = []
    game = FruitMerge(1, emit=lambda m, **_f: events.append(m))
    game.new_round()
    for _ in range(2):
        game.current = 0  # a cherry
        game.drop(0)
        assert game.moving > 0
        settle(game)
    state = game.to_state()["game"]
    assert state["board"][ROWS - 1][COLUMNS // 2] == "strawberry"
    assert state["board"][ROWS - 2][COLUMNS // 2] is None
    assert state["score"] == POINTS[1] and state["merges"] == 1 and state["moving"] == 0
    assert "merge:cherry" in events  # the event carries its points (below, on the wire: test_demo_play)


def test_a_merge_that_completes_a_pair_chains() -> None:
    game = FruitMerge(1)
    game.new_round()
    for kind in (1, 0, 0):  # strawberry, then two cherries: cherry+cherry -> strawberry -> grape
        game.current = kind
        game.drop(-3)
        settle(game)
    board = game.to_state()["game"]["board"]
    assert board[ROWS - 1][0] == "grape" and game.merges == 2
    assert game.score == POINTS[1] + POINTS[2]


def test_a_full_column_ends_the_round() -> None:
    events: list[str] = []
    game = FruitMerge(1, emit=lambda m, **_f: events.append(m))
    game.new_round()
    for i in range(ROWS + 1):
        if game.state != "RUNNING":
            break
        game.current = i % 2 + 2  # alternate grape/orange: no merges
        game.drop(2)
        settle(game)
    assert game.state == "GAME_OVER" and game.screen == "GameOverScreen"
    assert "gameover" in events and "screen:GameOverScreen" in events
    with pytest.raises(RuleError, match="click Restart"):
        game.drop(0)
    labels = [e["label"] for e in game.elements() if e["visible"]]
    assert "Restart" in labels and "Menu" in labels


def test_screens_buttons_and_pause() -> None:
    game = FruitMerge(3)
    assert game.screen == "MenuScreen"
    with pytest.raises(RuleError, match="click Start"):
        game.drop(0)
    with pytest.raises(RuleError, match="visible buttons: Start"):
        game.click("Pause")
    assert game.click("Start") == {"screen": "GameScreen", "seed": 3, "current": PIECES[game.current],
                                   "next": PIECES[game.next]}
    assert game.screen == "GameScreen" and game.state == "RUNNING"
    # Pause and Resume ask the clock (the kit's in the real program, the game's own here).
    assert game.click("Pause") == {"screen": "GameScreen", "paused": True}
    assert game.paused and {"label": "Resume", "visible": True, "kind": "button"} in game.elements()
    with pytest.raises(RuleError, match="visible buttons: Resume, Restart, Menu"):
        game.click("Pause")
    game.drop(0)
    for _ in range(20):
        game.tick()  # paused: nothing moves
    assert game.moving == 1 and game.falling == []
    assert game.click("Resume") == {"screen": "GameScreen", "paused": False}
    settle(game)
    game.click("Pause")
    game.click("Menu")
    assert game.screen == "MenuScreen"
    with pytest.raises(RuleError, match="between -3 and 3"):
        FruitMerge.column_for(4)


def test_hold_swaps_pieces_once_per_drop() -> None:
    game = FruitMerge(5)
    game.new_round()
    current, following = game.current, game.next
    assert game.hold() == {"held": PIECES[current], "current": PIECES[following], "next": PIECES[game.next]}
    assert game.held == current and game.current == following
    with pytest.raises(RuleError, match="one hold per drop"):
        game.hold()
    game.drop(0)
    dropped_next = game.current
    game.hold()
    assert game.held == dropped_next and game.current == current


def test_screenshot_completes_some_frames_later(tmp_path: Path) -> None:
    game = FruitMerge(1, screenshot_dir=tmp_path)
    game.screenshot("../../etc/evil name")
    assert game.to_state()["screenshots"] == {"pending": 1, "taken": 0, "last": None}
    for _ in range(SCREENSHOT_FRAMES - 1):
        game.tick()
    assert game.to_state()["screenshots"]["pending"] == 1
    game.tick()
    shots = game.to_state()["screenshots"]
    assert shots["pending"] == 0 and shots["taken"] == 1
    assert Path(shots["last"]) == tmp_path / "etcevilname.txt"
    assert "Fruit Merge" in Path(shots["last"]).read_text()


def test_padding_is_about_the_requested_size_and_valid_json() -> None:
    raw = padding_json(64)
    assert raw is not None and 64 * 1024 <= len(raw.text) < 66 * 1024
    assert isinstance(json.loads(raw.text), list)
    assert padding_json(0) is None


def test_the_demo_manifest_is_clean_and_has_both_toolsets() -> None:
    bridge = build(FruitMerge(1), register=False)
    manifest = normalise_manifest(bridge.manifest())
    assert not manifest.dropped and not manifest.problems
    assert manifest.toolset_names() == ["play", "flow", "clock"]
    assert {t.name for t in manifest.tools()} == {"drop", "hold", "click", "restart", "set_seed",
                                                  "screenshot", "pause", "resume", "step"}
    # Confirmed when queued, so a wait_for on screenshots.pending that follows it cannot
    # match before the screenshot was even queued.
    assert manifest.find("screenshot").sync is True
    assert manifest.find("drop").input_schema["required"] == ["x"]
    assert PIECES[0] == "cherry"


# --------------------------------------------------------------------------- the real program

def wait_for(client: GameClient, predicate: Any, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = client.state()
        if predicate(state):
            return state
        assert time.monotonic() < deadline, f"not reached; last state game={state.get('game')}"
        time.sleep(0.005)


def drive(port: int, seed: int, moves: list[float]) -> dict:
    client = GameClient(port, timeout_ms=5000)
    assert client.command_and_sync("set_seed", {"seed": seed})["confirmation"] == "completedCommandId"
    for x in moves:
        client.command_and_sync("drop", {"x": x})
    return wait_for(client, lambda s: s["game"]["moving"] == 0)["game"]


@pytest.mark.slow
def test_the_demo_program_is_deterministic_across_processes_and_matches_the_rules(tmp_path: Path) -> None:
    env = {"GAME_BRIDGE_INSTANCES": str(tmp_path / "instances")}
    with demo_process("--hz", "1000", "--seed", "99", env=env) as one, \
            demo_process("--hz", "1000", env=env) as two:
        assert "seed 99" in one.banner
        first, second = drive(one.port, 11, MOVES), drive(two.port, 11, MOVES)
    expected = play(11, MOVES)[0]["game"]
    assert first == second == expected


def test_the_demo_program_serves_the_contract_and_closes_cleanly(tmp_path: Path) -> None:
    instances = tmp_path / "instances"
    shots = tmp_path / "shots"
    with demo_process("--hz", "500", "--screenshot-dir", str(shots), "--state-padding-kb", "32",
                      env={"GAME_BRIDGE_INSTANCES": str(instances)}) as demo:
        client = GameClient(demo.port, timeout_ms=5000)
        health = client.health()
        assert health["ok"] is True and "completedCommandId" in health
        entries = read_registry(instances).entries
        assert [(e.port, e.pid, e.name) for e in entries] == [(demo.port, demo.proc.pid, "Fruit Merge")]
        state = client.state()
        assert state["ui"]["screen"] == "MenuScreen" and len(state["padding"]) > 100
        assert client.command_and_sync("click", {"label": "Start"})["state"]["ui"]["screen"] == "GameScreen"
        answer = client.command_and_sync("screenshot", {"name": "first"})
        assert answer["state"]["screenshots"]["pending"] == 1  # applied, not finished
        done = wait_for(client, lambda s: s["screenshots"]["pending"] == 0)
        assert Path(done["screenshots"]["last"]) == shots / "first.txt"
        assert any(e["m"] == "screenshot:saved" for e in done["events"])
        with pytest.raises(Exception, match="between -3 and 3"):  # refused by the declared range
            client.command_and_sync("drop", {"x": 9})
        assert client.close_and_wait(5000) is True
        assert demo.wait(10) == 0
        assert read_registry(instances).entries == []


def test_sigterm_stops_the_demo_and_removes_its_entry(tmp_path: Path) -> None:
    instances = tmp_path / "instances"
    with demo_process(env={"GAME_BRIDGE_INSTANCES": str(instances)}) as demo:
        assert read_registry(instances).entries
        demo.proc.send_signal(signal.SIGTERM)
        assert demo.wait(10) == 0
        assert read_registry(instances).entries == []
        with pytest.raises(Exception):
            loopback_opener(f"http://127.0.0.1:{demo.port}/health", timeout=1)


def test_a_taken_port_fails_with_a_clear_message(tmp_path: Path) -> None:
    with demo_process("--no-register") as first:
        import subprocess
        import sys

        from peers.kitfakes import REPO, child_env

        out = subprocess.run([sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", str(first.port),
                              "--no-register"], capture_output=True, text=True, timeout=20,
                             env=child_env(), cwd=str(REPO))
        assert out.returncode == 1 and f"cannot serve on 127.0.0.1:{first.port}" in out.stderr


# --------------------------------------------------------------------------- the demo command

def test_choose_x_prefers_a_matching_top_then_the_lowest_column() -> None:
    board = [[None] * 7 for _ in range(10)]
    board[9][0], board[8][0] = "grape", "cherry"
    board[9][4] = "cherry"
    game = {"board": board, "columns": 7, "current": "cherry"}
    assert choose_x(game) == (1, "onto the cherry there")  # column 4 is lower than column 0
    game["current"] = "melon"
    assert choose_x(game) == (0, "the lowest column")  # empty middle column


@pytest.mark.slow
def test_the_demo_command_end_to_end(tmp_path: Path) -> None:
    import subprocess
    import sys


    from peers.kitfakes import child_env, free_port

    env = child_env({"HOME": str(tmp_path), "GAME_BRIDGE_HOME": str(tmp_path / "gb")})
    port = free_port()
    out = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "demo", "--hz", "500", "--drops", "4",
                          "--seed", "3", "--port", str(port)], capture_output=True, text=True, timeout=60, env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    for fragment in (f"> launch_instance {{\"port\": {port}}}", f"is up on port {port}", "> list_toolsets",
                     "Fruit Merge: drop fruit into a board of 7 columns", "play         drop, hold, click",
                     "> describe_toolset", "drop(x: number -3..3)", "> call_tool set_seed {\"seed\": 3}",
                     'until {"path": "game.moving", "equals": 0}', "one call, ", "characters: settled; landed in column",
                     "...C...", "CommandFailed: 'hold' was applied", "one hold per drop",
                     "written: ", "Fruit Merge  seed 3", "\"screen\": \"GameScreen\"",
                     "stopped: closed cleanly",
                     f"on port {port}; its log and port lock go under {tmp_path / 'gb'} (GAME_BRIDGE_HOME)"):
        assert fragment in text, (fragment, text)
    assert text.count("> call_tool drop") == 4 and text.count("characters: settled;") == 4  # one call a move
    pid = int(text.split("(pid ", 1)[1].split(")", 1)[0])
    assert gone(pid)
    assert read_registry(tmp_path / "gb" / "instances").entries == []
    workdir = Path(text.split("wrote ", 1)[1].split(" and launching", 1)[0]).parent
    assert workdir.name.startswith("game-bridge-demo-") and not workdir.exists()  # cleaned up


@pytest.mark.slow
def test_demo_init_writes_a_declaration_that_launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from game_bridge_mcp.check.runner import main as check_main
    from game_bridge_mcp.launch.declaration import load_declaration

    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert demo_main(["--init"], stdout=out, stderr=err) == 0
    path = tmp_path / "gamebridge.json"
    assert f"Wrote {path}" in out.getvalue()
    assert "call launch_instance --keep" in out.getvalue()  # call refuses to launch without --keep
    decl = load_declaration(path)
    assert decl.argv is not None and "game_bridge_mcp.game.demo" in decl.argv and decl.cwd == tmp_path
    assert demo_main(["--init"], stdout=io.StringIO(), stderr=err) == 2 and "--force" in err.getvalue()
    assert demo_main(["--init", "--force", "--hz", "200"], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    from peers.kitfakes import free_port

    doc = json.loads(path.read_text())
    port = free_port()
    doc["launch"]["portRange"] = f"{port}-{port}"  # not the shared default range: tests run in parallel
    path.write_text(json.dumps(doc))
    environ = {"HOME": str(tmp_path), "GAME_BRIDGE_HOME": str(tmp_path / "gb")}
    result = io.StringIO()
    assert check_main(["--launch"], stdout=result, stderr=io.StringIO(), environ=environ) == 0, result.getvalue()
    assert "FAIL" not in result.getvalue()


def test_demo_init_keeps_its_screenshots_in_the_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The game that --init's declaration launches writes its screenshots beside the
    declaration (./screenshots), not into a shared temporary directory."""
    import io

    from game_bridge_mcp.config import Config
    from game_bridge_mcp.core.bridge import Bridge
    from game_bridge_mcp.launch.declaration import apply_project_config
    from peers.kitfakes import child_env, free_port

    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert demo_main(["--init", "--hz", "500"], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    path = project / "gamebridge.json"
    doc = json.loads(path.read_text())
    assert "--screenshot-dir" in doc["launch"]["argv"]
    # Committable: no path of this machine (the interpreter is {python}; the launcher gives the game the package).
    assert doc["launch"]["argv"][0] == "{python}" and "env" not in doc["launch"]
    assert not any(os.path.isabs(arg) for arg in doc["launch"]["argv"]), doc
    assert sys.executable not in path.read_text() and str(tmp_path) not in path.read_text()
    port = free_port()
    doc["launch"]["portRange"] = f"{port}-{port}"
    path.write_text(json.dumps(doc))
    monkeypatch.chdir(tmp_path)  # the bridge runs elsewhere: the path is the declaration's, not the bridge's
    environ = {k: v for k, v in child_env({"HOME": str(tmp_path), "GAME_BRIDGE_HOME": str(tmp_path / "gb")}).items()
               if k != "PYTHONPATH"}  # the launcher, not the test, puts the package on the game's path
    config = Config(config_file=path, environ=environ)
    apply_project_config(config)
    bridge = Bridge(config)
    try:
        launched = bridge.run_tool("launch_instance", {})
        shot = bridge.run_tool("call_tool", {"port": launched["port"], "name": "screenshot", "arguments": {"name": "board"},
                                             "until": {"path": "screenshots.pending", "equals": 0, "timeoutMs": 10000}})
        assert shot.get("settled") is True, shot
        last = bridge.run_tool("call_tool", {"port": launched["port"], "name": "get_state"})["screenshots"]["last"]
        assert Path(last) == project / "screenshots" / "board.txt"
        assert "Fruit Merge  seed" in Path(last).read_text()
        assert bridge.run_tool("stop_instance", {"port": launched["port"]})["how"] == "closed cleanly"
    finally:
        bridge.shutdown()


def test_demo_usage_errors() -> None:
    import io

    err = io.StringIO()
    assert demo_main(["--drops", "-1"], stdout=io.StringIO(), stderr=err) == 2 and "usage:" in err.getvalue()
    assert demo_main(["--what"], stdout=io.StringIO(), stderr=io.StringIO()) == 2
    out = io.StringIO()
    assert demo_main(["--help"], stdout=out, stderr=io.StringIO()) == 0 and "--init" in out.getvalue()
