"""What a newcomer sees first: one usage block for --help, call's list and per-tool help
(a game's tool read from its manifest), and a server started on a terminal that says what
it is on stderr while stdout stays the protocol's."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from game_bridge_mcp.errors import ERROR_TYPES
from game_bridge_mcp.core.tools.table import BRIDGE_TOOLS, TOOLS
from peers.fakegame import FakeGame

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    env.pop("GAME_BRIDGE_PORT", None)
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)


def test_help_prints_one_usage_block_with_every_option_and_exit_code(tmp_path: Path) -> None:
    out = run(tmp_path, "--help")
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.count("usage:") == 1
    for word in ("call TOOL", "check", "demo", "replay", "--scan-range", "--eager", "GAME_BRIDGE_RECORD"):
        assert word in out.stdout, word
    for error in ERROR_TYPES:
        assert f"{error.exit_code} {error.__name__}" in out.stdout


def test_call_list_gives_each_tool_a_one_line_purpose(tmp_path: Path) -> None:
    out = run(tmp_path, "call", "--list")
    assert out.returncode == 0
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("  ")}
    for tool in TOOLS + BRIDGE_TOOLS:
        assert tool.name in lines, tool.name
        purpose = lines[tool.name][len(tool.name) + 2:].strip()
        assert purpose and purpose != tool.title and tool.description.startswith(purpose.rstrip(" .")[:30])
        assert len(lines[tool.name]) <= 120


def test_call_list_verbose_and_tool_help_give_the_description_and_arguments(tmp_path: Path) -> None:
    verbose = run(tmp_path, "call", "--list", "--verbose")
    assert verbose.returncode == 0
    assert "arguments:" in verbose.stdout and "timeoutMs (integer; 1..600000)" in verbose.stdout
    one = run(tmp_path, "call", "stop_instance", "--help")
    assert one.returncode == 0 and one.stdout.startswith("stop_instance: Stop an instance this bridge launched")
    assert "graceMs (integer; 0..600000)" in one.stdout and "usage:" not in one.stdout


@pytest.mark.slow
def test_v_and_version_mean_the_version_for_every_command(tmp_path: Path) -> None:
    """-v is --version everywhere (the spec's server option), never verbose; --verbose is verbose."""
    from game_bridge_mcp import __version__
    from game_bridge_mcp.cli.main import asks_version

    for args in (["-v"], ["--version"], ["call", "--list", "-v"], ["call", "get_state", "-v"], ["check", "-v"],
                 ["demo", "--version"], ["replay", "-v"], ["pygame", "-v"], ["pygame", "--port", "7820", "--version"]):
        out = run(tmp_path, *args)
        assert (out.returncode, out.stdout, out.stderr) == (0, f"game-bridge-mcp {__version__}\n", ""), args
    verbose = run(tmp_path, "call", "--list", "--verbose")
    assert verbose.returncode == 0 and "arguments:" in verbose.stdout
    # After the game's name, -v is the game's own option.
    assert not asks_version("pygame", ["game.py", "-v"]) and not asks_version("pygame", ["-m", "mygame", "--version"])
    assert asks_version("pygame", ["--window", "-v", "game.py"])


@pytest.mark.slow
def test_call_help_for_a_game_tool_reads_the_games_manifest(tmp_path: Path) -> None:
    with FakeGame() as game:
        out = run(tmp_path, "call", "drop", "--help", "--port", str(game.port))
        assert out.returncode == 0, out.stderr
        assert "drop: a tool of the game on port" in out.stdout and "toolset play" in out.stdout
        assert "Drop a piece at x." in out.stdout and "x (number; required): World x" in out.stdout
        missing = run(tmp_path, "call", "teleport", "--help", "--port", str(game.port))
        assert missing.returncode == 2 and "neither a bridge tool nor in the manifest" in missing.stderr


def test_a_server_on_a_terminal_says_what_it_is_on_stderr_only(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp", "--no-scan", "--no-registry"],
                            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    os.close(terminal)
    try:
        assert proc.stderr is not None
        seen = b""
        deadline = time.monotonic() + 30
        while b"waiting" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                seen += chunk
        text = seen.decode()
        assert "MCP server" in text and "waiting for a client" in text
        # started as a module, as a vendored copy is, it names the module, not a command it may not have
        assert f"'{Path(sys.executable).name} -m game_bridge_mcp demo'" in text and "'game-bridge-mcp demo'" not in text
        assert text.count("\n") == 1  # one line
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        os.close(controller)
    assert out == b""  # nothing but the protocol on stdout, and no client spoke


@pytest.mark.slow
def test_no_hint_when_stdin_is_not_a_terminal(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "--no-scan", "--no-registry"],
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, cwd=tmp_path, timeout=60)
    assert b"waiting for a client" not in proc.stderr and proc.stdout == b""


@pytest.mark.slow
def test_a_long_wait_shows_on_a_terminal_and_nothing_when_piped(tmp_path: Path) -> None:
    """``call`` draws a long wait's progress on a terminal's stderr, redrawn in place and
    cleared before the answer; piped, stderr stays empty and stdout is the answer alone."""
    wait = json.dumps({"name": "wait_for", "arguments": {"path": "game.score", "equals": 99, "timeoutMs": 1200}})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    with FakeGame() as game:
        args = [sys.executable, "-m", "game_bridge_mcp", "call", "call_tool", wait, "--port", str(game.port)]
        controller, terminal = pty.openpty()
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal,
                                env=env, cwd=tmp_path)
        os.close(terminal)
        seen = b""
        try:
            while True:
                ready, _, _ = select.select([controller], [], [], 30)
                if not ready:
                    break
                try:
                    chunk = os.read(controller, 4096)
                except OSError:  # the terminal's other end closed: the command ended
                    break
                if not chunk:
                    break
                seen += chunk
            out, _ = proc.communicate(timeout=30)
        finally:
            os.close(controller)
        piped = run(tmp_path, "call", "call_tool", wait, "--port", str(game.port))
    drawn = seen.decode()
    assert proc.returncode == 0 and json.loads(out)["matched"] is False
    assert "\r\x1b[Kgame-bridge-mcp call call_tool (" in drawn and "waiting for game.score equals 99" in drawn
    assert drawn.endswith("\r\x1b[K")  # cleared before the answer
    assert piped.returncode == 0 and piped.stderr == "" and json.loads(piped.stdout)["matched"] is False


def _read_terminal(controller: int) -> bytes:
    """Everything written to a pty's other end until the writer closes it."""
    seen = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            return seen
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the other end closed: the command ended
            return seen
        if not chunk:
            return seen
        seen += chunk


@pytest.mark.slow
def test_check_launch_draws_the_boot_on_a_terminal_and_nothing_when_piped(tmp_path: Path) -> None:
    """``check --launch`` shows a slow boot as it happens on a terminal's stderr (cleared
    before the results), and nothing of it when stderr is piped."""
    import shlex

    from launch_helpers import GAME, PYTHON, free_range

    low, high = free_range(4)
    command = f"sleep 1 && exec {shlex.quote(PYTHON)} {shlex.quote(str(GAME))} --port {{port}}"
    (tmp_path / "gamebridge.json").write_text(json.dumps(
        {"name": "Slow Boot", "launch": {"command": command, "portRange": f"{low}-{high}", "readyTimeoutMs": 20000}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    args = [sys.executable, "-m", "game_bridge_mcp", "check", "--launch"]
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal,
                            env=env, cwd=tmp_path)
    os.close(terminal)
    try:
        drawn = _read_terminal(controller).decode(errors="replace")
        out, _ = proc.communicate(timeout=60)
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Launched on port" in out
    assert "\r\x1b[Klaunching (" in drawn and drawn.endswith("\r\x1b[K")  # drawn, then cleared
    piped = run(tmp_path, "check", "--launch")
    assert "Launched on port" in piped.stdout and "launching (" not in piped.stderr
