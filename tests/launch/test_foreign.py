"""Never signal a foreign process: an inherited "ignore SIGCHLD", a leader reaped behind
Popen's back, exit statuses told truthfully, a stranger on a crashed game's port, the
subreaper and the processes a declaration spares."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.core.tools.instances import list_instances
from game_bridge_mcp.discovery.report import discover
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch import parent, procs
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.launch.launcher import Launcher
from game_bridge_mcp.wire.client import GameClient
from peers.fakegame import FakeGame
from launch_helpers import (DRIVER, GAME, PYTHON, LauncherFactory, ProcessGuard, free_port, wait_until,
                            write_declaration)

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
#: Runs the rest of its argv with SIGCHLD ignored, the way some wrappers leave it.
IGNORING_WRAPPER = ("import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
                    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def run_cli_ignoring_sigchld(guard: ProcessGuard, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**guard.env, "GAME_BRIDGE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    return subprocess.run([PYTHON, "-c", IGNORING_WRAPPER, "-m", "game_bridge_mcp", *args],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=30)


@pytest.mark.slow
def test_a_parent_ignoring_sigchld_does_not_hide_a_boot_crash_code(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path / "game", "--crash", "3")
    done = run_cli_ignoring_sigchld(guard, tmp_path, "call", "launch_instance", "--keep", "--config", str(decl))
    assert done.returncode == 2, done.stderr
    assert "the process exited with code 3" in done.stderr, done.stderr
    assert "code 0" not in done.stderr


def test_check_launch_under_an_ignoring_parent_reports_the_real_code(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path / "game", "--crash", "3")
    done = run_cli_ignoring_sigchld(guard, tmp_path, "check", "--launch", "--config", str(decl))
    assert "exited with code 3" in done.stdout + done.stderr, done.stdout + done.stderr


def test_restore_sigchld_puts_the_default_back() -> None:
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert parent.sigchld_ignored()
        assert parent.restore_sigchld() is True
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL and not parent.sigchld_ignored()
    finally:
        signal.signal(signal.SIGCHLD, previous)


def test_a_leader_reaped_behind_popen_is_never_trusted_for_a_group_signal(
        tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    # The shell stays as the leader (something follows the game), the game is its child.
    launcher = launchers(write_declaration(tmp_path, shell=True, suffix="; echo after"))
    port = launcher.launch()["port"]
    inst = launcher._instances[port]
    assert inst.leader_unreaped()  # our child, unreaped: a group signal is safe
    # What the kernel does under an ignored SIGCHLD: the leader dies and is collected at
    # once; Popen never hears of it, so its returncode is still None.
    os.kill(inst.proc.pid, signal.SIGKILL)
    os.waitpid(inst.proc.pid, 0)
    assert inst.proc.returncode is None
    assert inst.leader_unreaped() is False  # its pid (and group id) may belong to anyone now
    assert inst.leader_exited() and inst.exit_code is None and inst.reaped_elsewhere
    stopped = launcher.stop(port, grace_ms=2000)
    # The game itself (still ours, verified one by one) is gone; the lost status is not "0".
    assert stopped["stopped"] is True and stopped["exitCode"] is None
    assert "could not read" in stopped["exitUnknown"]
    assert wait_until(lambda: not guard.recorded(), 5)


def test_a_signal_death_names_the_signal(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--ignore-close"))
    port = launcher.launch()["port"]
    stopped = launcher.stop(port, grace_ms=100)
    assert stopped["how"] == "terminated"
    assert stopped["exitCode"] == -signal.SIGTERM and stopped["signal"] == "SIGTERM"


def test_a_boot_death_by_signal_says_which(tmp_path: Path, launchers: LauncherFactory) -> None:
    decl = tmp_path / "gamebridge.json"
    decl.write_text(json.dumps({"launch": {"argv": [PYTHON, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"],
                                           "portRange": "{0}-{0}".format(free_port()), "readyTimeoutMs": 10000}}))
    launcher = launchers(decl)
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert "killed by SIGABRT" in info.value.message
    assert info.value.fields["signal"] == "SIGABRT" and info.value.fields["exitCode"] == -signal.SIGABRT


# --------------------------------------------------------------------------- a stranger on the port

def kill_the_game_leave_the_shell(launcher: Launcher, port: int) -> None:
    """The game (the shell's child) dies; the shell it ran in lives on, so the launched
    tree is still there while the port is free for anyone."""
    inst = launcher._instances[port]
    game = inst.listener_pid()
    assert game is not None and game != inst.proc.pid
    os.kill(game, signal.SIGKILL)  # a process this test started (through the launcher)
    assert wait_until(lambda: GameClient(port).port_is_quiet(timeout_ms=200), 5)


def test_stop_leaves_a_stranger_on_a_crashed_games_port_alone(tmp_path: Path, launchers: LauncherFactory,
                                                             guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path, shell=True, suffix="; sleep 600"))
    port = launcher.launch()["port"]
    kill_the_game_leave_the_shell(launcher, port)
    with FakeGame(port=port) as stranger:
        stopped = launcher.stop(port, grace_ms=1000)
        assert "command" not in " ".join(stranger.requests) and "/command" not in stranger.requests
        assert "left alone" in stopped["note"] and stopped["stopped"] is True
        assert GameClient(port).health()["ok"] is True  # the newcomer still serves
    assert wait_until(lambda: not guard.recorded(), 5)


def test_list_instances_never_calls_a_strangers_listener_launched(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, shell=True, suffix="; sleep 600"))
    port = launcher.launch()["port"]
    bridge = Bridge(launcher.config, launcher=launcher)
    (mine,) = [r for r in list_instances(bridge, range=str(port))["live"] if r["port"] == port]
    assert mine["launchedByThisBridge"] is True
    kill_the_game_leave_the_shell(launcher, port)
    with FakeGame(port=port):
        (record,) = [r for r in list_instances(bridge, range=str(port))["live"] if r["port"] == port]
        assert record["launchedByThisBridge"] is False
        assert "not part of it" in record["launchNote"]
        assert record.get("pid") != launcher.info(port)["pid"]  # type: ignore[index]


def test_a_stranger_answering_during_boot_fails_the_launch(tmp_path: Path, launchers: LauncherFactory) -> None:
    """On the port the caller asked for (a port the launcher picked is left for another:
    tests/launch/test_port_lost.py)."""
    launcher = launchers(write_declaration(tmp_path, "--boot-delay", "30"))
    outcome: dict[str, BaseException | dict] = {}
    port = free_port()

    def launch() -> None:
        try:
            outcome["result"] = launcher.launch(port=port)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome["error"] = exc

    thread = threading.Thread(target=launch)
    thread.start()
    assert wait_until(lambda: launcher.launched_ports(), 5)
    assert launcher.launched_ports() == [port]
    with FakeGame(port=port) as stranger:  # binds before the booting game does
        thread.join(20)
        assert "/command" not in stranger.requests
    assert isinstance(outcome.get("error"), BridgeUsageError), outcome
    assert "outside the launched tree" in outcome["error"].message  # type: ignore[union-attr]
    assert outcome["error"].fields["portTaken"] is True  # type: ignore[union-attr]


def test_a_registry_entry_never_overrides_what_the_launcher_knows(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path / "project", shell=True, suffix="; echo after"))
    launched = launcher.launch()
    port = launched["port"]
    registry = launcher.config.registry_dir
    registry.mkdir(parents=True, exist_ok=True)
    # A live pid (this test's), a planted working directory and start time, the same port.
    (registry / f"{os.getpid()}.json").write_text(json.dumps({
        "name": "Planted", "port": port, "pid": os.getpid(), "host": "127.0.0.1",
        "cwd": "/planted", "started": "2001-01-01T00:00:00Z", "protocol": 1}))
    bridge = Bridge(launcher.config, launcher=launcher)
    (record,) = [r for r in list_instances(bridge, range=str(port))["live"] if r["port"] == port]
    assert record["pid"] == launched["pid"] and record["cwd"] == launched["cwd"]
    assert record["started"] != "2001-01-01T00:00:00Z" and record["launchedByThisBridge"] is True


@contextmanager
def listener_of_another_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A port listened on by another user: as root, a real server run as nobody; as
    anyone else (who cannot start one), this process's own server while discovery is
    told this process has another uid."""
    system_python = "/usr/bin/python3"  # one that user nobody can run (this venv may be private)
    if os.getuid() == 0 and os.access(system_python, os.X_OK):
        script = ("import http.server as h, sys\n"
                  "class H(h.BaseHTTPRequestHandler):\n"
                  "    def do_GET(self):\n"
                  "        body = b'{\"ok\": true, \"frame\": 1}'\n"
                  "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)\n"
                  "    def log_message(self, *a): pass\n"
                  "s = h.HTTPServer(('127.0.0.1', 0), H); print(s.server_address[1], flush=True); s.serve_forever()\n")
        proc = subprocess.Popen([system_python, "-c", script], stdout=subprocess.PIPE, text=True, user=65534,
                                cwd="/", env={"PATH": "/usr/bin:/bin"})
        try:
            assert proc.stdout is not None
            yield int(proc.stdout.readline())
        finally:
            proc.kill()
            proc.wait()
        return
    from game_bridge_mcp.discovery import report
    with FakeGame() as game:
        real = os.getuid()
        monkeypatch.setattr(report.os, "getuid", lambda: real + 1)
        yield game.port


def test_a_listener_owned_by_another_user_is_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with listener_of_another_user(tmp_path, monkeypatch) as port:
        report = discover(Config(environ={}, registry_dir=tmp_path / "reg"), range_spec=str(port))
    (record,) = report["live"]
    assert record["otherUser"] is True and isinstance(record["listenerUid"], int)
    with FakeGame() as mine:
        (own,) = discover(Config(environ={}, registry_dir=tmp_path / "reg"), range_spec=str(mine.port))["live"]
    assert "otherUser" not in own


# --------------------------------------------------------------------------- the subreaper

def start_driver(tmp_path: Path, guard: ProcessGuard, declaration: Path) -> subprocess.Popen:
    """A bridge whose launched trees are held by nothing but itself (no cgroup, no keeper),
    so what it adopts as the subreaper is what these tests look at."""
    driver = subprocess.Popen([PYTHON, str(DRIVER), "--config", str(declaration), "--registry-dir",
                               str(tmp_path / "home" / "instances"), "--containment", "none"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=guard.env)
    assert driver.stdout is not None
    launched = json.loads(driver.stdout.readline())
    assert "port" in launched, launched
    json.loads(driver.stdout.readline())  # the summary
    return driver


def end_driver(driver: subprocess.Popen) -> None:
    if driver.stdin is not None and not driver.stdin.closed:
        driver.stdin.close()
    try:
        driver.wait(10)
    except subprocess.TimeoutExpired:
        driver.kill()
        driver.wait()


@pytest.mark.slow
def test_a_descendant_that_double_forks_away_is_adopted_and_reaped(tmp_path: Path, guard: ProcessGuard) -> None:
    # The escapee leaves the group, the session and the marker: only adoption finds it.
    driver = start_driver(tmp_path, guard, write_declaration(tmp_path, "--child", "escape"))
    try:
        assert wait_until(lambda: len(guard.recorded()) == 2, 10)
        escapee = next(p for p in guard.recorded() if "--escaped" in p.cmdline())
        assert escapee.ppid() == driver.pid  # adopted by the bridge, not by init
        assert "GAME_BRIDGE_LAUNCH_ID" not in escapee.environ()
        assert driver.stdin is not None
        driver.stdin.close()  # the bridge shuts down
        assert wait_until(lambda: not guard.recorded(), 10), guard.recorded()
    finally:
        end_driver(driver)


@pytest.mark.slow
def test_adopted_processes_that_exit_are_reaped_not_left_as_zombies(tmp_path: Path, guard: ProcessGuard) -> None:
    driver = start_driver(tmp_path, guard, write_declaration(tmp_path, "--child", "escape-brief"))
    try:
        pids = tmp_path / "pids.txt"
        assert wait_until(lambda: pids.exists() and len(pids.read_text().split("\n")) >= 3, 10)
        escaped = int(pids.read_text().split("\n")[1].split()[0])

        def zombie_children() -> list[int]:
            found = []
            for child in psutil.Process(driver.pid).children():
                try:
                    if child.status() == psutil.STATUS_ZOMBIE:
                        found.append(child.pid)
                except psutil.Error:
                    continue
            return found

        # It was adopted (while alive), ended on its own, and its zombie was collected.
        assert wait_until(lambda: not psutil.pid_exists(escaped), 6), zombie_children()
        assert not zombie_children()
    finally:
        end_driver(driver)


# --------------------------------------------------------------------------- processes to spare

@pytest.mark.slow
def test_a_declared_process_to_spare_survives_the_stop(tmp_path: Path, launchers: LauncherFactory,
                                                      guard: ProcessGuard) -> None:
    daemon = "import time; time.sleep(600)"
    decl = tmp_path / "gamebridge.json"
    decl.write_text(json.dumps({"launch": {
        "command": f"{PYTHON} -c {shlex.quote(daemon)} fake-gradle-daemon & exec {PYTHON} {GAME} --port {{port}}",
        "spare": ["fake-gradle-daemon"], "portRange": "{0}-{0}".format(free_port()), "readyTimeoutMs": 10000}}))

    def daemons() -> list[psutil.Process]:
        return [p for p in guard.tagged() if "fake-gradle-daemon" in " ".join(p.cmdline())]

    launcher = launchers(decl)
    port = launcher.launch()["port"]
    try:
        assert wait_until(daemons, 5)
        (spared,) = daemons()
        assert spared.environ().get("GAME_BRIDGE_LAUNCH_ID")  # marked, in the group: still spared
        stopped = launcher.stop(port, grace_ms=1000)
        assert stopped["stopped"] is True and not guard.recorded()  # the game went
        assert spared.is_running() and spared.status() != psutil.STATUS_ZOMBIE
    finally:
        for proc in daemons():  # the test's own process (started through its launcher)
            proc.kill()
            proc.wait(5)


def test_the_watcher_spares_them_too(guard: ProcessGuard) -> None:
    env = {**guard.env, "GAME_BRIDGE_LAUNCH_ID": "launch-s"}
    leader = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True)
    spared = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)", "keep-this-daemon"], env=env,
                              start_new_session=True)
    script = Path(parent.__file__).with_name("watcher.py")
    watcher = subprocess.Popen([PYTHON, str(script)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        ref = procs.ref_for(leader.pid)
        assert ref is not None and watcher.stdin is not None
        watcher.stdin.write(json.dumps({"op": "launch", "id": "s", "pid": ref.pid, "ctime": ref.create_time,
                                        "pgid": ref.pid, "marker": "launch-s",
                                        "spare": ["keep-this-daemon"]}).encode() + b"\n")
        watcher.stdin.close()
        assert watcher.wait(10) == 0
        assert leader.wait(5) == -signal.SIGTERM
        assert spared.poll() is None
    finally:
        for proc in (leader, spared, watcher):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_spare_is_checked_in_the_declaration(tmp_path: Path) -> None:
    decl = tmp_path / "gamebridge.json"
    decl.write_text(json.dumps({"launch": {"command": "x", "spare": ["ab"]}}))
    with pytest.raises(BridgeUsageError, match="launch.spare"):
        load_declaration(decl)
    decl.write_text(json.dumps({"launch": {"command": "x", "spare": ["GradleDaemon"]}}))
    assert load_declaration(decl).spare == ("GradleDaemon",)


@pytest.mark.slow
def test_the_real_server_adopts_and_reaps_a_double_forked_descendant(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path / "game", "--child", "escape")
    env = {**guard.env, "GAME_BRIDGE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO),
           "GAME_BRIDGE_CONFIG": str(decl)}
    server = subprocess.Popen([PYTHON, "-m", "game_bridge_mcp", "--no-scan"], env=env, cwd=str(tmp_path),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdin is not None and server.stdout is not None
        for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                            "protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "0"}}},
                        {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "launch_instance", "arguments": {}}}):
            server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()
        while json.loads(server.stdout.readline()).get("id") != 2:
            pass
        assert wait_until(lambda: len(guard.recorded()) == 2, 10)
        escapee = next(p for p in guard.recorded() if "--escaped" in p.cmdline())
        # The server adopted it, or (where no cgroup can be had) the launch's keeper, its child, did.
        assert server.pid in (escapee.ppid(), psutil.Process(escapee.ppid()).ppid())
        server.stdin.close()
        assert server.wait(15) == 0
        assert wait_until(lambda: not guard.recorded(), 10), guard.recorded()
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
