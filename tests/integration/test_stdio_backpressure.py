"""A client that stops reading, over real stdio: with its answers unread and stdin closed,
the server and the game it launched end within seconds; and requests are read with
back-pressure, so a client that floods requests without reading fills its own pipe, not
the server's memory."""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from launch_helpers import ProcessGuard, free_range, wait_until
from peers.fakegame import FakeGame

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def start(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    env = {**env, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    env.pop("GAME_BRIDGE_SDK_DISPATCH", None)
    return subprocess.Popen([sys.executable, "-m", "game_bridge_mcp", "--no-scan", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "stderr.txt", "wb"), env=env,
                            cwd=tmp_path)


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()


def request(proc: subprocess.Popen, ident: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line({"id": ident, "method": method, "params": params}))
    proc.stdin.flush()
    while True:
        reply = json.loads(proc.stdout.readline())
        if reply.get("id") == ident:
            return reply


def initialize(proc: subprocess.Popen) -> None:
    request(proc, 0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test", "version": "0"}})
    assert proc.stdin is not None
    proc.stdin.write(line({"method": "notifications/initialized"}))
    proc.stdin.flush()


def get_state(ident: int) -> bytes:
    return line({"id": ident, "method": "tools/call",
                 "params": {"name": "call_tool", "arguments": {"name": "get_state"}}})


def waiting_bytes(fd: int) -> int:
    """How many bytes are in the pipe behind ``fd``, unread."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


@pytest.mark.slow
def test_unread_answers_and_a_closed_stdin_end_the_server_and_its_game(tmp_path: Path, guard: ProcessGuard) -> None:
    low, high = free_range(4)
    handmade = ROOT / "tests" / "peers" / "handmade.py"
    (tmp_path / "gamebridge.json").write_text(json.dumps({"name": "Handmade", "launch": {
        "argv": [sys.executable, str(handmade), "--port", "{port}", "--ui-text", "board " * 500],
        "portRange": f"{low}-{high}", "readyTimeoutMs": 20000}}))
    proc = start(tmp_path, guard.env)
    try:
        initialize(proc)
        launched = request(proc, 1, "tools/call", {"name": "launch_instance", "arguments": {}})
        game = [psutil.Process(json.loads(launched["result"]["content"][0]["text"])["pid"])]
        assert proc.stdin is not None and proc.stdout is not None
        for ident in range(2, 202):  # 200 answers of 3 KB nobody reads (the SDK answers tools/list)
            proc.stdin.write(get_state(ident) if ident % 2 else line({"id": ident, "method": "tools/list"}))
        proc.stdin.flush()
        unread = proc.stdout.fileno()
        assert wait_until(lambda: waiting_bytes(unread) >= 50_000, 30.0, 0.05), "the answers fill the pipe"
        time.sleep(0.5)  # a moment for the server to be stuck writing: not a wait for a result
        proc.stdin.close()  # and the client goes quiet, its end of stdout still open
        assert wait_until(lambda: proc.poll() is not None, 30.0, 0.1), "the server is still running"
        assert proc.returncode == 0
        assert wait_until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in game),
                          10.0, 0.1), "its game is still running"
    finally:
        reap(proc)


@pytest.mark.slow
def test_a_flood_of_requests_meets_back_pressure(tmp_path: Path) -> None:
    with FakeGame() as game:
        proc = start(tmp_path, dict(os.environ), "--port", str(game.port))
        try:
            initialize(proc)
            assert proc.stdin is not None
            fd = proc.stdin.fileno()
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
            sent, pending, blocked_since = 0, b"", None
            limit = 200_000  # what an unbounded reader takes in without a pause
            deadline = time.monotonic() + 60
            while sent < limit and time.monotonic() < deadline:
                if not pending:
                    pending = b"".join(get_state(n) for n in range(sent + 1, sent + 101))
                try:
                    written = os.write(fd, pending)
                except BlockingIOError:
                    blocked_since = blocked_since or time.monotonic()
                    if time.monotonic() - blocked_since > 3.0:
                        break  # the server has stopped taking requests
                    time.sleep(0.01)
                    continue
                blocked_since = None
                lines_done = pending[:written].count(b"\n")
                sent += lines_done
                pending = pending[written:]
            rss = psutil.Process(proc.pid).memory_info().rss
            assert sent < 20_000, f"the server took in {sent} requests without answers being read"
            assert proc.poll() is None  # still serving
            proc.stdin.close()
            assert wait_until(lambda: proc.poll() is not None, 30.0, 0.1)
            assert rss < 400 * 1024 * 1024
        finally:
            reap(proc)
