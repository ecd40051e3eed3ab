"""``game-bridge-mcp call`` in a subprocess against a fake game: stdout, stderr, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from peers.fakegame import FakeGame

ROOT = Path(__file__).resolve().parents[2]


def call(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    env.pop("GAME_BRIDGE_PORT", None)
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)


def test_list(tmp_path: Path) -> None:
    out = call(tmp_path, "--list")
    assert out.returncode == 0
    for name in ("launch_instance", "list_instances", "call_tool", "get_state", "wait_for"):
        assert name in out.stdout


@pytest.mark.slow
def test_tools_game_tools_and_bridge_tools(tmp_path: Path) -> None:
    with FakeGame() as game:
        port = str(game.port)
        out = call(tmp_path, "list_toolsets", "--port", port)
        assert out.returncode == 0 and out.stderr == ""
        assert json.loads(out.stdout)["game"] == "Fake Game"
        out = call(tmp_path, "drop", '{"x": 1.5}', "--port", port)
        body = json.loads(out.stdout)
        assert out.returncode == 0 and body["applied"] is True and body["game"]["score"] == 10
        out = call(tmp_path, "call_tool", json.dumps({"name": "get_state", "port": game.port, "arguments": {"summary": True}}))
        assert json.loads(out.stdout)["game"]["score"] == 10
        out = call(tmp_path, "wait_for", json.dumps({"port": game.port, "path": "game.score", "equals": 10}))
        assert json.loads(out.stdout)["matched"] is True


@pytest.mark.slow
@pytest.mark.parametrize("case,code,prefix", [
    ("offline", 3, "GameOffline:"),
    ("impostor", 4, "NotAGameSurface:"),
    ("frozen", 5, "CommandTimeout:"),
    ("bad-json", 2, "BridgeUsageError:"),
    ("launch-without-keep", 2, "BridgeUsageError:"),
    ("unknown-arg", 2, "BridgeUsageError:"),
])
def test_errors_go_to_stderr_with_their_exit_code(tmp_path: Path, case: str, code: int, prefix: str) -> None:
    with FakeGame(apply=False) as frozen:
        args = {
            "offline": ["get_health", "--port", "1"],
            "frozen": ["drop", '{"x": 1}', "--port", str(frozen.port), "--timeout", "300"],
            "bad-json": ["drop", "{x:1}", "--port", str(frozen.port)],
            "launch-without-keep": ["launch_instance"],
            "unknown-arg": ["list_toolsets", '{"bogus": 1}', "--port", str(frozen.port)],
        }.get(case)
        if case == "impostor":
            frozen.overrides["/health"] = lambda h: h.send_json(404, {})
            frozen.manifest = None
            args = ["list_toolsets", "--port", str(frozen.port)]
        out = call(tmp_path, *args)
    assert out.returncode == code, out.stderr
    assert out.stdout == ""
    assert out.stderr.startswith(prefix)
    if case == "launch-without-keep":
        assert "--keep" in out.stderr


@pytest.mark.slow
def test_launch_with_keep_outlives_the_command_and_closes_cleanly(tmp_path: Path) -> None:
    import psutil

    from launch_helpers import gone
    from peers.fakegame import wait_until
    from ports import free_port

    decl = tmp_path / "gamebridge.json"
    port = free_port()
    decl.write_text(json.dumps({"name": "Kept Game", "launch": {
        "argv": [sys.executable, str(ROOT / "tests" / "peers" / "games" / "game.py"), "--port", "{port}", "--lines", "3"],
        "portRange": f"{port}-{port}", "readyTimeoutMs": 20000}}))
    out = call(tmp_path, "launch_instance", "--keep", "--config", str(decl))
    assert out.returncode == 0, out.stderr
    launched = json.loads(out.stdout)
    pid, port = launched["pid"], launched["port"]
    try:
        assert psutil.pid_exists(pid)  # the command has returned; the game is still there
        health = call(tmp_path, "get_health", "--port", str(port))
        assert health.returncode == 0 and json.loads(health.stdout)["ok"] is True
        wait_until(lambda: Path(launched["logFile"]).read_text().count("\n") >= 3)
        closed = call(tmp_path, "close", "--port", str(port))
        assert json.loads(closed.stdout)["closed"] is True
        wait_until(lambda: gone(pid), timeout=10)
    finally:
        if psutil.pid_exists(pid):
            try:
                proc = psutil.Process(pid)
                if proc.environ().get("GAME_BRIDGE_LAUNCH_ID"):
                    proc.kill()
            except psutil.Error:
                pass
