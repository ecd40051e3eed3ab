"""End to end over stdio: the real server in a subprocess, JSON-RPC on its pipes.

stdout must carry only JSON-RPC from the first byte to the last, even when code inside
the server prints; stdin EOF and SIGINT/SIGTERM/SIGHUP end it promptly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from peers.fakegame import FakeGame

ROOT = Path(__file__).resolve().parents[2]


class Session:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.next_id = 0
        self.lines: list[str] = []

    def send(self, method: str, params: dict | None = None, *, notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        if notify:
            return None
        while True:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            assert line, f"server closed stdout; stderr: {self.proc.stderr.read() if self.proc.stderr else ''}"
            self.lines.append(line)
            reply = json.loads(line)  # every line must be JSON-RPC
            assert reply.get("jsonrpc") == "2.0"
            if reply.get("id") == self.next_id:
                return reply

    def initialize(self) -> dict:
        reply = self.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "test", "version": "0"}})
        self.send("notifications/initialized", notify=True)
        return reply["result"]


def start(args: list[str], tmp_path: Path, *, code: str | None = None) -> Session:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "game_bridge_mcp", *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    return Session(proc)


@pytest.fixture
def game() -> Iterator[FakeGame]:
    with FakeGame() as g:
        yield g


def _reap(session: Session) -> None:
    if session.proc.poll() is None:
        session.proc.kill()
    session.proc.wait(timeout=10)
    for stream in (session.proc.stdin, session.proc.stdout, session.proc.stderr):
        if stream:
            stream.close()


@pytest.mark.slow
def test_drive_a_game_over_stdio_and_exit_on_eof(game: FakeGame, tmp_path: Path) -> None:
    s = start(["--port", str(game.port), "--no-scan", "--registry-dir", str(tmp_path / "reg")], tmp_path)
    try:
        init = s.initialize()
        assert init["serverInfo"]["name"] == "game-bridge-mcp"
        assert "call_tool" in init["instructions"]
        tools = s.send("tools/list")["result"]["tools"]
        assert [t["name"] for t in tools][-1] == "call_tool" and len(tools) == 7
        reply = s.send("tools/call", {"name": "call_tool", "arguments": {"name": "drop", "arguments": {"x": 1}}})
        body = json.loads(reply["result"]["content"][0]["text"])
        assert body["applied"] is True and body["game"]["score"] == 10
        reply = s.send("tools/call", {"name": "call_tool", "arguments": {"name": "get_health", "port": 1}})
        assert reply["result"]["isError"] is True
        assert reply["result"]["content"][0]["text"].startswith("GameOffline:")
        s.proc.stdin.close()  # type: ignore[union-attr]
        assert s.proc.wait(timeout=5) == 0
        assert s.proc.stdout.read() == ""  # type: ignore[union-attr]
    finally:
        _reap(s)


STRAY = textwrap.dedent("""
    import subprocess, sys
    from game_bridge_mcp import Composite, start_stdio_server
    from game_bridge_mcp.config import parse_cli
    def noisy(ctx):
        print("stray print from a composite")
        sys.stdout.write("stray write\\n")
        subprocess.run(["echo", "stray child output"])
        return {"noisy": True}
    config = parse_cli(["--port", "PORT", "--no-scan", "--no-registry"]).config
    start_stdio_server(config, composites=[Composite(name="noisy", description="prints", run=noisy)])
""")


@pytest.mark.slow
def test_nothing_but_json_rpc_reaches_stdout(game: FakeGame, tmp_path: Path) -> None:
    s = start([], tmp_path, code=STRAY.replace("PORT", str(game.port)))
    try:
        s.initialize()
        reply = s.send("tools/call", {"name": "call_tool", "arguments": {"name": "noisy"}})
        assert json.loads(reply["result"]["content"][0]["text"])["noisy"] is True
        s.proc.stdin.close()  # type: ignore[union-attr]
        s.proc.wait(timeout=5)
        rest = s.proc.stdout.read()  # type: ignore[union-attr]
        for line in s.lines + rest.splitlines():
            assert json.loads(line)["jsonrpc"] == "2.0"
        stderr = s.proc.stderr.read()  # type: ignore[union-attr]
        assert "stray print from a composite" in stderr and "stray child output" in stderr
    finally:
        _reap(s)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_end_the_server(game: FakeGame, tmp_path: Path, sig: int) -> None:
    s = start(["--port", str(game.port), "--no-scan", "--no-registry"], tmp_path)
    try:
        s.initialize()
        s.proc.send_signal(sig)
        assert s.proc.wait(timeout=5) == 128 + sig
    finally:
        _reap(s)


def test_cli_help_version_and_bad_options(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "game_bridge_mcp", *a], capture_output=True, text=True, env=env, timeout=30)  # noqa: E731
    out = run("--help")
    assert out.returncode == 0
    for option in ("--port", "--scan-range", "--no-scan", "--no-registry", "--registry-dir", "--config",
                   "--launch-hint", "--manifest", "--eager", "--timeout", "GAME_BRIDGE_PORT", "GAME_BRIDGE_HOME"):
        assert option in out.stdout
    from game_bridge_mcp import __version__
    assert run("--version").stdout.strip() == f"game-bridge-mcp {__version__}"
    bad = run("--scan-range", "7000-oops")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("BridgeUsageError:") and "'7000-oops'" in bad.stderr
    assert run("--frobnicate").returncode == 2
