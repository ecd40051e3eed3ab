"""Launching real child processes: readiness, boot failures, port choice, logs."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from peers.fakegame import FakeGame
from game_bridge_mcp.wire.client import GameClient
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch.launcher import PROGRESS_INTERVAL_S, Launcher
from launch_helpers import LauncherFactory, ProcessGuard, free_port, free_range, wait_until, write_declaration

pytestmark = pytest.mark.timeout(60)


@pytest.mark.slow
def test_boot_delay_waits_for_health_and_reports_progress(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--boot-delay", "0.8", "--version", "4.5.6"))
    reports: list[tuple[int, int, str]] = []
    result = launcher.launch(timeout_ms=8000, progress=lambda *a: reports.append(a))
    assert set(result) == {"port", "pid", "name", "version", "cwd", "readyInMs", "logFile"}
    assert result["readyInMs"] >= 800
    assert result["name"] == "Test Game" and result["version"] == "4.5.6"  # from the live /tools
    assert result["cwd"] == str(tmp_path)
    assert GameClient(result["port"]).health()["ok"] is True
    assert len(reports) >= 1  # booting takes 0.8 s, the first report is due at 0.3 s
    assert all(total == 8000 for _elapsed, total, _line in reports)
    elapsed = [e for e, _t, _l in reports]
    # Never before its interval, an interval apart, and inside the launch's deadline:
    # what the launcher guarantees however slow the machine is.
    interval = PROGRESS_INTERVAL_S * 1000 - 1  # int() of a float sum may lose a millisecond
    assert elapsed[0] >= interval and all(b - a >= interval for a, b in zip(elapsed, elapsed[1:]))
    assert elapsed[-1] < 8000
    assert any(line.startswith("booting step") for _e, _t, line in reports)
    assert launcher.is_launched(result["port"]) and launcher.launched_ports() == [result["port"]]
    assert launcher.stop(result["port"])["how"] == "closed cleanly"
    assert not launcher.is_launched(result["port"])


def test_name_falls_back_to_the_declaration_without_tools(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--no-tools", name="Declared"))
    result = launcher.launch()
    assert result["name"] == "Declared" and result["version"] is None


def test_pid_is_the_game_even_behind_a_shell(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, shell=True, suffix="; echo shell-after"))
    result = launcher.launch()
    cmd = psutil.Process(result["pid"]).cmdline()
    assert any(part.endswith("game.py") for part in cmd)
    assert psutil.Process(result["pid"]).ppid() != os.getpid()  # the shell is its parent


def test_crash_on_boot_fails_at_once_with_the_output(tmp_path: Path, launchers: LauncherFactory) -> None:
    decl = write_declaration(tmp_path, "--crash", "3", "--lines", "30", timeout_ms=30000)
    launcher = launchers(decl)
    started = time.monotonic()
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert time.monotonic() - started < 20  # a hang guard: readiness would wait 30 s
    message = info.value.message
    port = info.value.fields["port"]
    assert message.startswith(f"Launch failed on port {port}: the process exited with code 3.\nCommand: ")
    assert f"--port {port}" in message and "game.py" in message
    assert f"Working directory: {tmp_path}\n" in message
    log_file = info.value.fields["logFile"]
    assert f"Full log: {log_file}\n\nLast output:\n" in message
    assert message.rstrip().endswith("Error: the test game crashed on purpose")
    tail = message.split("Last output:\n", 1)[1].splitlines()
    assert len(tail) == 20 and "line 29" in tail  # the last 20 lines, not all 33
    assert "line 0" in Path(log_file).read_text()  # the full log has everything
    assert info.value.fields["exitCode"] == 3
    assert not launcher.is_launched(port)
    # The port lock was released: the same port can be claimed again at once.
    ok = launchers(write_declaration(tmp_path / "ok", port_range=(port, port)))
    assert ok.launch()["port"] == port


@pytest.mark.slow
def test_boot_timeout_reaps_the_child(tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path, "--boot-delay", "60", "--child", "plain"))
    started = time.monotonic()
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch(timeout_ms=1000)
    assert 1.0 <= time.monotonic() - started < 30  # the deadline, then a hang guard
    assert "did not answer GET /health within 1000ms" in info.value.message
    assert "Last output:\n" in info.value.message and "booting step" in info.value.message
    assert info.value.fields["timedOut"] is True
    assert wait_until(lambda: not guard.recorded(), 3.0), guard.recorded()
    assert launcher.launched_ports() == []


def test_command_that_cannot_start(tmp_path: Path, launchers: LauncherFactory) -> None:
    port = free_port()
    (tmp_path / "gamebridge.json").write_text(json.dumps({"launch": {"argv": ["./no-such-game", "{port}"],
                                                                     "portRange": f"{port}-{port}"}}))
    launcher = launchers(tmp_path / "gamebridge.json")
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert "could not be started" in info.value.message and "no-such-game" in info.value.message
    assert launcher.launched_ports() == []


def test_shell_command_not_found_is_a_boot_failure(tmp_path: Path, launchers: LauncherFactory) -> None:
    port = free_port()
    (tmp_path / "gamebridge.json").write_text(json.dumps({"launch": {"command": "./gradlew run -PdebugPort={port}",
                                                                     "portRange": f"{port}-{port}"}}))
    with pytest.raises(BridgeUsageError) as info:
        launchers(tmp_path / "gamebridge.json").launch()
    assert "the process exited with code 127" in info.value.message
    assert "gradlew" in info.value.message.split("Last output:\n", 1)[1]


def test_no_declaration_explains_what_to_write(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(None)
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert "gamebridge.json" in info.value.message and '"command"' in info.value.message
    assert launcher.watcher_pid is None  # nothing started for a user who never launches


def test_missing_cwd(tmp_path: Path, launchers: LauncherFactory) -> None:
    (tmp_path / "gamebridge.json").write_text('{"launch": {"command": "x", "cwd": "gone"}}')
    with pytest.raises(BridgeUsageError, match="launch.cwd"):
        launchers(tmp_path / "gamebridge.json").launch()


def test_child_environment_and_stdio(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, env={"GAME_FLAVOUR": "mint", "GAME_PORT": "{port}"}))
    result = launcher.launch()
    proc = psutil.Process(result["pid"])
    env = proc.environ()
    assert env["GAME_FLAVOUR"] == "mint" and env["GAME_PORT"] == str(result["port"])
    assert env["GAME_BRIDGE_LAUNCH_ID"].startswith(f"{os.getpid()}-")
    assert os.readlink(f"/proc/{proc.pid}/fd/0") == "/dev/null"  # never the bridge's stdin
    out = os.readlink(f"/proc/{proc.pid}/fd/1")
    assert out.startswith("pipe:") and out != os.readlink(f"/proc/{os.getpid()}/fd/1")
    assert os.readlink(f"/proc/{proc.pid}/fd/2") == out
    assert proc.pid != os.getpgid(0) and os.getpgid(proc.pid) == os.getsid(proc.pid)  # own session


def test_log_cursor_semantics(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--lines", "250"))
    port = launcher.launch()["port"]
    first = launcher.log(port, lines=5)
    total = first["next"]
    assert total >= 252  # "starting", 250 lines, "listening"
    assert first["lines"][-1] == f"listening on 127.0.0.1:{port}" and len(first["lines"]) == 5
    assert first["dropped"] is False and first["running"] is True and first["exitCode"] is None
    assert first["logFile"].endswith(".log")
    # From the start: lines 0..(total-201) fell out of the 200-line ring.
    page = launcher.log(port, lines=3, since=0)
    assert page["dropped"] is True and len(page["lines"]) == 3 and page["more"] is True
    assert page["next"] == total - 200 + 3
    again = launcher.log(port, lines=3, since=page["next"])
    assert again["dropped"] is False and again["next"] == page["next"] + 3
    # Nothing new yet.
    assert launcher.log(port, since=total)["lines"] == []
    assert launcher.log(port, since=float(total))["next"] == total  # JSON may say 252.0
    # New output arrives (the close command is echoed by the game), read only it.
    GameClient(port).command("close")
    assert wait_until(lambda: launcher.log(port)["running"] is False, 5)
    new = launcher.log(port, since=total)
    assert new["lines"] == ["command close", "closed cleanly"] and new["dropped"] is False
    assert new["next"] == total + 2 and new["more"] is False
    assert new["exitCode"] == 0  # works after the process exited, until stop
    # A cursor from the future (an earlier instance on this port) reads from the oldest.
    assert launcher.log(port, lines=1, since=10**9)["dropped"] is True
    with pytest.raises(BridgeUsageError):
        launcher.log(port, lines=-1)
    with pytest.raises(BridgeUsageError):
        launcher.log(port, since=-3)
    with pytest.raises(BridgeUsageError):
        launcher.log(port, since=True)
    assert launcher.stop(port)["how"] == "already exited"
    # stopped: its output is still read, said to have stopped, until the next launch on the port
    kept = launcher.log(port, lines=2)
    assert kept["lines"] == ["command close", "closed cleanly"] and kept["stopped"] is True
    assert kept["running"] is False and kept["exitCode"] == 0 and "has stopped" in kept["note"]
    assert launcher.has_output(port) and not launcher.is_launched(port)
    again = launcher.launch(port=port)["port"]
    assert again == port and "stopped" not in launcher.log(port) and launcher.log(port)["running"] is True
    launcher.stop(port)
    with pytest.raises(BridgeUsageError, match="launch_instance"):
        launcher.log(port + 1)


def test_log_file_is_private(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--lines", "3"))
    result = launcher.launch()
    path = Path(result["logFile"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.name.startswith(f"instance-{result['port']}-")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert wait_until(lambda: "line 2" in path.read_text(), 2)


def test_logs_go_to_a_private_dir_under_the_home_or_a_private_temp_dir(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from game_bridge_mcp.paths import log_dir, screenshot_dir

    home = tmp_path / "home"
    environ = {"GAME_BRIDGE_HOME": str(home)}
    directory = log_dir(environ)
    assert directory == home / "logs" and stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert screenshot_dir(environ) == home / "screenshots"
    assert screenshot_dir({**environ, "GAME_BRIDGE_SCREENSHOTS": str(tmp_path / "shots")}) == tmp_path / "shots"
    # A home that is not a directory of this user's: a private directory in the temp dir.
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the home should be")
    directory = log_dir({"GAME_BRIDGE_HOME": str(blocked)})
    assert directory.parent == tmp_path / "tmp" and directory.name.startswith("game-bridge-logs")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


# --------------------------------------------------------------------------- ports

@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """Something that is not a game: a socket that accepts and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def test_explicit_port_is_honoured(tmp_path: Path, launchers: LauncherFactory) -> None:
    low, high = free_range(2)
    launcher = launchers(write_declaration(tmp_path))
    assert launcher.launch(port=high)["port"] == high  # need not even be in the range
    with pytest.raises(BridgeUsageError, match="already runs an instance this bridge launched"):
        launcher.launch(port=high)


@pytest.mark.slow
def test_explicit_port_taken_says_what_holds_it(tmp_path: Path, launchers: LauncherFactory,
                                                listener: socket.socket) -> None:
    launcher = launchers(write_declaration(tmp_path))
    port = listener.getsockname()[1]
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch(port=port)
    assert f"Port {port} is taken: another process has bound 127.0.0.1:{port}" in info.value.message
    assert "Leave out 'port'" in info.value.message

    with FakeGame() as game:
        with pytest.raises(BridgeUsageError, match="a game is already running there"):
            launcher.launch(port=game.port)

    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(BridgeUsageError, match="something else is listening there, not a game"):
            launcher.launch(port=server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
    assert launcher.launched_ports() == []


@pytest.mark.slow
def test_port_locked_by_another_bridge(tmp_path: Path, launchers: LauncherFactory) -> None:
    low, high = free_range(1)
    first = launchers(write_declaration(tmp_path / "a", "--boot-delay", "1.5", port_range=(low, high)))
    second = launchers(write_declaration(tmp_path / "b", port_range=(low, high)))
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("r", first.launch()))
    thread.start()
    try:
        assert wait_until(lambda: first.launched_ports() == [low], 3)
        # The first game has not bound its port yet: only the lock protects it.
        with pytest.raises(BridgeUsageError) as info:
            second.launch(port=low)
        assert f"another game-bridge (pid {os.getpid()}) holds the lock" in info.value.message
        # Without an explicit port the range is full, so the OS picks one.
        result = second.launch()
        assert result["port"] != low and not (low <= result["port"] <= high)
    finally:
        thread.join(10)
    assert outcome["r"]["port"] == low


def test_range_full_of_strangers_falls_back_to_os_port(tmp_path: Path, launchers: LauncherFactory,
                                                       listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    launcher = launchers(write_declaration(tmp_path, port_range=(port, port)))
    result = launcher.launch()
    assert result["port"] != port
    assert GameClient(result["port"]).health()["ok"] is True


def test_locks_live_in_the_registry_home(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path))
    port = launcher.launch()["port"]
    lock_file = launchers.registry_dir.parent / "locks" / f"port-{port}.lock"
    assert lock_file.read_text().strip() == str(os.getpid())
    assert launcher.locks_dir == lock_file.parent


def test_bad_arguments(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path))
    with pytest.raises(BridgeUsageError, match="timeoutMs"):
        launcher.launch(timeout_ms=0)
    with pytest.raises(BridgeUsageError, match="port"):
        launcher.launch(port=70000)
    with pytest.raises(BridgeUsageError, match="graceMs"):
        launcher.stop(1234, grace_ms=-1)
    assert launcher.watcher_pid is None


def test_launch_after_shutdown_is_refused(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path))
    launcher.shutdown()
    with pytest.raises(BridgeUsageError, match="shutting down"):
        launcher.launch()


def test_launcher_is_a_public_name() -> None:
    import game_bridge_mcp

    assert game_bridge_mcp.Launcher is Launcher
