"""``game-bridge-mcp check``: all PASS against the demo game, and each deliberately broken
game caught with the right line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from game_bridge_mcp.check.runner import main
from game_bridge_mcp.registry import read_registry
from game_bridge_mcp.wire.transport import TransportError, loopback_opener

from peers.fakegame import FakeGame, wait_until
from peers.kitfakes import REPO, BrokenGame, child_env, demo_process, free_port

pytestmark = pytest.mark.timeout(60)


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err
        self.lines = [line for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL", "SKIP")]

    def levels(self, level: str) -> list[str]:
        return [line[6:] for line in self.lines if line.startswith(level)]

    def has(self, level: str, fragment: str) -> bool:
        return any(fragment in line for line in self.levels(level))

    def __repr__(self) -> str:
        return f"exit {self.code}\n{self.out}\n{self.err}"


def check(*argv: str, environ: dict[str, str] | None = None) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, environ=environ or {})
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def registry(tmp_path: Path) -> dict[str, str]:
    return {"GAME_BRIDGE_INSTANCES": str(tmp_path / "instances"), "HOME": str(tmp_path)}


def port_is_quiet(port: int) -> bool:
    try:
        loopback_opener(f"http://127.0.0.1:{port}/health", timeout=1)
    except TransportError as exc:
        return exc.kind == "refused"
    return False


# --------------------------------------------------------------------------- the demo conforms

@pytest.mark.slow
def test_the_demo_game_passes_every_check(registry: dict[str, str]) -> None:
    with demo_process("--hz", "200", env=registry) as demo:
        for query in ("click&label=Start", "drop&x=0"):  # a round started and a move: events to check
            loopback_opener(f"http://127.0.0.1:{demo.port}/command?cmd={query}", timeout=5)
        wait_until(lambda: b'"seq"' in loopback_opener(f"http://127.0.0.1:{demo.port}/events?since=0",
                                                        timeout=5).body, 5)
        result = check("--port", str(demo.port), environ=registry)
        assert result.code == 0, result
        assert not result.levels("WARN") and not result.levels("FAIL"), result
        for fragment in ('GET /health answers {"ok": true', "frame increases", "GET /state answers",
                         "completedCommandId, simFrame, paused, ui.screen (GameScreen)", "GET /tools parses: 9 tools",
                         "an unknown command is refused", "/command?cmd=noop is queued at once",
                         "completedCommandId reached", f"port {demo.port}, pid {demo.proc.pid}",
                         "foreign Host header is refused", "Origin header is refused",
                         "close shuts the game down", "removed on close",
                         "features: results, after, view, events, screenshot, clock", "results: an entry for each",
                         "after: /state and /health hold", "view: /state?view=digest keeps only", "events: seq counts up",
                         "screenshot: GET /screenshot?maxWidth=320&maxHeight=240: PNG", "clock: pause holds simFrame",
                         "clock: step {frames: 5} advances simFrame by exactly 5", "clock: resume restarts",
                         # the kit's snapshot, which the demo has without code of its own
                         "snapshot: a load gives back the saved /state", "and POST /snapshot takes them back",
                         "refuses cut off, damaged, another game's, a pickle (code in disguise), empty bytes with 400",
                         "over snapshotMaxBytes", "snapshot: a load leaves the clock as it was", "snapshot: full at 16 kept"):
            assert result.has("PASS", fragment), (fragment, result)
        assert result.has("PASS", "bound to loopback only (listening on 127.0.0.1)")
        assert result.levels("SKIP") == ["registry entry written after bind: checked only with --launch",
                                         "clock: GAME_BRIDGE_START_PAUSED: checked only with --launch"]
        assert "Summary:" in result.out and "The game conforms." in result.out
        assert demo.wait(10) == 0
    assert read_registry(Path(registry["GAME_BRIDGE_INSTANCES"])).entries == []


def write_declaration(directory: Path, argv: list[str]) -> Path:
    path = directory / "gamebridge.json"
    port = free_port()
    path.write_text(json.dumps({"name": "Under Check", "launch": {
        "argv": argv, "cwd": ".", "portRange": f"{port}-{port}", "readyTimeoutMs": 20000,
        "env": {"PYTHONPATH": str(REPO)}}}))
    return path


@pytest.mark.slow
def test_launch_checks_the_entry_is_written_after_bind(tmp_path: Path) -> None:
    environ = {"GAME_BRIDGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    config = write_declaration(tmp_path, [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}",
                                          "--hz", "200"])
    result = check("--launch", "--config", str(config), environ=environ)
    assert result.code == 0, result
    assert result.has("PASS", "registry entry was written after the port was bound"), result
    assert result.has("PASS", f"cwd {tmp_path}"), result
    assert result.has("PASS", "clock: launched with GAME_BRIDGE_START_PAUSED=1 it starts paused"), result
    assert not result.levels("WARN") and not result.levels("FAIL"), result
    assert "Launched on port " in result.out


@pytest.mark.slow
def test_launch_catches_an_entry_written_before_bind(tmp_path: Path) -> None:
    environ = {"GAME_BRIDGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    config = write_declaration(tmp_path, [sys.executable, str(REPO / "tests" / "peers" / "kitfakes_game.py"),
                                          "--port", "{port}", "--register-early"])
    result = check("--launch", "--config", str(config), environ=environ)
    assert result.code == 1, result
    assert result.has("FAIL", "registry entry was written before the port was bound"), result


@pytest.mark.slow
def test_launch_catches_an_entry_left_behind_after_close(tmp_path: Path) -> None:
    environ = {"GAME_BRIDGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    config = write_declaration(tmp_path, [sys.executable, str(REPO / "tests" / "peers" / "kitfakes_game.py"),
                                          "--port", "{port}", "--leave-entry"])
    result = check("--launch", "--config", str(config), environ=environ)
    assert result.code == 1, result
    assert result.has("PASS", "registry entry was written after the port was bound"), result
    assert result.has("FAIL", "is left behind after a clean close"), result


def test_launch_of_a_game_that_does_not_start_fails_with_its_output(tmp_path: Path) -> None:
    environ = {"GAME_BRIDGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    config = write_declaration(tmp_path, [sys.executable, "-c", "import sys; print('no debug port here'); sys.exit(3)"])
    result = check("--launch", "--config", str(config), environ=environ)
    assert result.code == 1, result
    assert result.has("FAIL", "the game did not start")
    assert "no debug port here" in result.out


@pytest.mark.slow
def test_a_chosen_command_drives_the_cycle(registry: dict[str, str]) -> None:
    with demo_process("--hz", "200", env=registry) as demo:
        result = check("--port", str(demo.port), "--command", "set_seed", "--arg", "seed=4", "--no-close",
                       environ=registry)
        assert result.code == 0, result
        assert result.has("PASS", "/command?cmd=set_seed is queued at once")
        assert result.has("PASS", "completedCommandId reached 2 for 'set_seed'")
        assert result.has("SKIP", "close: not sent (--no-close)")
        assert not port_is_quiet(demo.port)  # left running


# --------------------------------------------------------------------------- broken games

def test_no_completed_command_id_is_a_warning(registry: dict[str, str]) -> None:
    with BrokenGame(completed_id=False) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 0, result
    assert result.has("WARN", "/state has no completedCommandId")
    assert result.has("WARN", "confirmed only by frames advancing (confirmation: frames-advanced)")


def test_a_top_level_screen_is_a_warning_that_names_ui_screen(registry: dict[str, str]) -> None:
    with BrokenGame(top_screen=True) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 0, result
    assert result.has("WARN", "/state has a top-level screen, which the bridge does not read")
    assert "Put it in ui.screen (docs/contract.md)" in str(result)
    with BrokenGame() as game:
        assert not check("--port", str(game.port), environ=registry).has("WARN", "top-level screen")


def test_health_without_ok_fails(registry: dict[str, str]) -> None:
    with BrokenGame(health_ok=False) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 1, result
    assert result.has("FAIL", 'GET /health does not say "ok": true')
    assert len(result.levels("FAIL")) == 1, result


def test_frame_going_backwards_fails(registry: dict[str, str]) -> None:
    with BrokenGame(frame_backwards=True) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 1, result
    assert result.has("FAIL", "frame went backwards")


def test_an_unknown_command_accepted_silently_is_caught(registry: dict[str, str]) -> None:
    with BrokenGame(accept_unknown=True) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.has("WARN", "was accepted silently"), result
    assert not result.has("PASS", "an unknown command is refused")


def test_every_dropped_tool_is_listed_with_its_reason(registry: dict[str, str]) -> None:
    manifest = {"game": {"name": "Bad Tools", "version": "1", "protocol": 1},
                "toolsets": [{"name": "play", "tools": [
                    {"description": "a tool with no name"},
                    {"name": "fine", "args": [{"name": "x", "type": "number"}]},
                    {"name": "get_state"},
                    {"name": "weird", "args": 7},
                    "just a string",
                ]}]}
    with BrokenGame(manifest=manifest) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.has("PASS", "GET /tools parses: 1 tool in play (1)"), result
    dropped = [line for line in result.levels("WARN") if "is dropped" in line]
    assert dropped == ["/tools: tool #0 in toolset 'play' is dropped",
                       "/tools: tool 'get_state' in toolset 'play' is dropped",
                       "/tools: tool 'weird' in toolset 'play' is dropped",
                       "/tools: tool #4 in toolset 'play' is dropped"], result
    assert "the tool has no name" in result.out and "reserved by the bridge toolset" in result.out


def test_no_tools_endpoint_is_a_warning(registry: dict[str, str]) -> None:
    with BrokenGame(manifest=None) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 0, result
    assert result.has("WARN", "GET /tools answers 404")


def test_nan_in_state_fails(registry: dict[str, str]) -> None:
    with BrokenGame(nan_state=True) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 1, result
    assert result.has("FAIL", "GET /state: the body contains NaN")


@pytest.mark.slow
def test_close_that_does_not_shut_down_fails(registry: dict[str, str]) -> None:
    with BrokenGame(close_works=False) as game:
        result = check("--port", str(game.port), "--grace", "300", environ=registry)
    assert result.code == 1, result
    assert result.has("FAIL", "close was accepted but port")


def test_an_unhardened_game_gets_advice_not_failure(registry: dict[str, str]) -> None:
    with FakeGame(hz=200) as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 0, result
    assert result.has("WARN", "Host: attacker.example is answered")
    assert result.has("WARN", "Origin header is answered")
    assert result.has("WARN", f"no registry entry for port {game.port}")
    assert result.has("PASS", "close shuts the game down")


def test_a_game_listening_beyond_loopback_fails(registry: dict[str, str]) -> None:
    """Caught from the listening socket itself: nothing is sent to a non-loopback address."""
    with BrokenGame(host="0.0.0.0") as game:
        result = check("--port", str(game.port), environ=registry)
    assert result.code == 1, result
    assert result.has("FAIL", f"port {game.port} listens on 0.0.0.0 (every interface)")


def test_nothing_listening_fails_at_once(registry: dict[str, str]) -> None:
    with BrokenGame() as game:
        port = game.port
    result = check("--port", str(port), environ=registry)
    assert result.code == 1 and result.has("FAIL", f"nothing is listening on port {port}")
    assert len(result.lines) == 1


# --------------------------------------------------------------------------- usage

@pytest.mark.parametrize("argv, fragment", [
    ([], "--port N"),
    (["--port", "7", "--launch"], "alternatives"),
    (["--port", "0"], "1-65535"),
    (["--port", "7", "--arg", "x=1"], "--arg needs --command"),
    (["--port", "7", "--command", "c", "--arg", "port=1"], "KEY=VALUE"),
    (["--port", "7", "--config", "x.json"], "only used with --launch"),
    (["--bogus"], "unrecognized"),
])
def test_usage_errors_exit_2(argv: list[str], fragment: str) -> None:
    result = check(*argv)
    assert result.code == 2 and fragment in result.err and "usage:" in result.err
    assert result.out == ""


def test_launch_without_a_declaration_is_a_usage_error(tmp_path: Path) -> None:
    result = check("--launch", "--config", str(tmp_path / "missing.json"), environ={"HOME": str(tmp_path)})
    assert result.code == 2 and "BridgeUsageError" in result.err and "missing.json" in result.err


def test_help() -> None:
    result = check("--help")
    assert result.code == 0 and "--launch" in result.out and "--no-close" in result.out


@pytest.mark.slow
def test_the_cli_subcommand_end_to_end(registry: dict[str, str]) -> None:
    with demo_process("--hz", "200", env=registry) as demo:
        out = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "check", "--port", str(demo.port)],
                             capture_output=True, text=True, timeout=60, env=child_env(registry), cwd=str(REPO))
        assert out.returncode == 0, out.stdout + out.stderr
        assert "Summary:" in out.stdout and "FAIL" not in out.stdout
        assert demo.wait(10) == 0

