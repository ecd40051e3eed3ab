"""Every resource bounded, on the launcher's side: a chatty game's log against its cap,
old logs pruned by age, count and size through the one pruning rule, the known
descendants of a busy tree, and the watcher link."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from game_bridge_mcp.launch.capture import is_log_name, prune_logs
from game_bridge_mcp.paths import LOG_KEEP, KeepRule, prune_files
from game_bridge_mcp.wire.client import GameClient
from launch_helpers import DRIVER, PYTHON, LauncherFactory, ProcessGuard, wait_until, write_declaration

pytestmark = pytest.mark.timeout(90)

CAP = 128 * 1024


# --------------------------------------------------------------------------- the log cap

def test_a_chatty_game_stays_within_the_log_cap_and_the_newest_output_is_kept(
        tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--lines", "60000"), log_cap_bytes=CAP)
    result = launcher.launch()  # the game prints ~600 KB before it listens
    inst = launcher._instances[result["port"]]
    assert wait_until(lambda: inst.capture.total >= 60000, 20)
    current = Path(result["logFile"])
    older = current.with_name(current.name + ".1")
    assert current.exists() and older.exists()
    on_disk = current.stat().st_size + older.stat().st_size
    assert on_disk <= CAP + 4096, on_disk  # (one line and a note of slack)
    assert "line 59999" in current.read_text() or "line 59999" in older.read_text()
    assert "line 0\n" not in current.read_text() + older.read_text()  # the oldest went
    newest = launcher.log(result["port"], lines=5)["lines"]
    assert "line 59999" in newest and any(line.startswith("listening on") for line in newest)
    assert os.stat(current).st_mode & 0o777 == 0o600 and os.stat(older).st_mode & 0o777 == 0o600
    launcher.stop(result["port"], grace_ms=1000)


# --------------------------------------------------------------------------- pruning

def make_logs(directory: Path, count: int, *, size: int = 10, age_s: float = 0.0) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    now = time.time()
    for index in range(count):
        path = directory / f"instance-{7000 + index}-{index}.log"
        with open(path, "wb") as handle:
            handle.truncate(size)  # sparse: the size counts, the disk is not used
        stamp = now - age_s - (count - index)  # later index = newer
        os.utime(path, (stamp, stamp))
        made.append(path)
    return made


def test_old_logs_are_pruned_by_count(tmp_path: Path) -> None:
    logs = make_logs(tmp_path, LOG_KEEP.max_files + 30)
    (tmp_path / "notes.txt").write_text("not a log")
    (tmp_path / "instance-1-1.log.lnk").symlink_to(logs[0])
    oldest_in_use = logs[0]
    prune_logs(tmp_path, keep=[oldest_in_use])
    left = sorted(p for p in tmp_path.iterdir() if is_log_name(p.name))
    assert len(left) == LOG_KEEP.max_files + 1  # the newest ones, and the one in use
    assert oldest_in_use.exists()  # in use: never deleted
    assert logs[-1].exists() and not logs[1].exists()  # the newest stay, the oldest go
    assert (tmp_path / "notes.txt").exists() and (tmp_path / "instance-1-1.log.lnk").is_symlink()


def test_old_logs_are_pruned_by_total_size_and_by_age(tmp_path: Path) -> None:
    big = make_logs(tmp_path / "big", 4, size=200 * 1024 * 1024)  # 800 MiB apparent, past the 512 MiB rule
    prune_logs(tmp_path / "big")
    assert [p.exists() for p in big] == [False, False, True, True]
    old = make_logs(tmp_path / "old", 3, age_s=LOG_KEEP.max_age_s + 60)
    fresh = make_logs(tmp_path / "old", 1)
    assert prune_files(tmp_path / "old", LOG_KEEP, match=is_log_name) == 2  # (fresh reused one name)
    assert fresh[0].exists() and not old[1].exists()


def test_the_one_rule_never_follows_links_or_deletes_what_does_not_match(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "instance-1-1.log"
    target.write_text("keep me")
    directory = tmp_path / "dir"
    directory.mkdir()
    (directory / "instance-2-2.log").symlink_to(target)
    (directory / "instance-3-3.log").mkdir()
    rule = KeepRule(max_files=0, max_bytes=0, max_age_s=0)
    assert prune_files(directory, rule, match=is_log_name) == 0
    assert target.read_text() == "keep me" and (directory / "instance-3-3.log").is_dir()


def test_a_launch_prunes_the_log_directory(tmp_path: Path, launchers: LauncherFactory) -> None:
    make_logs(launchers.log_dir, LOG_KEEP.max_files + 20)
    launcher = launchers(write_declaration(tmp_path))
    result = launcher.launch()
    logs = [p for p in launchers.log_dir.iterdir() if is_log_name(p.name)]
    assert len(logs) <= LOG_KEEP.max_files + 1 and Path(result["logFile"]) in logs
    launcher.stop(result["port"], grace_ms=1000)


# --------------------------------------------------------------------------- known descendants

@pytest.mark.slow
def test_the_known_descendants_of_a_busy_tree_drop_the_dead(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--helpers", "100000"))
    port = launcher.launch()["port"]
    inst = launcher._instances[port]
    seen: set[int] = set()
    deadline = time.monotonic() + 30
    while len(seen) < 60 and time.monotonic() < deadline:  # what a long-running monitor sees
        for ref in inst.tree.refresh():
            seen.add(ref.pid)
        launcher._note_descendants(inst)
        time.sleep(0.01)
    assert len(seen) >= 60  # many helpers came and went ...
    assert len(inst.tree.known) <= 5  # ... and only the live ones are still known
    assert wait_until(lambda: launcher._watcher.held_records() <= 8, 5)
    launcher.stop(port, grace_ms=1000)


# --------------------------------------------------------------------------- the watcher link

@pytest.mark.slow
def test_a_stopped_watcher_cannot_hang_stop_instance_and_is_replaced(tmp_path: Path, launchers: LauncherFactory,
                                                                   guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path))
    first_port = launcher.launch()["port"]
    second_port = launcher.launch()["port"]
    stalled = launcher.watcher_pid
    assert stalled is not None
    os.kill(stalled, signal.SIGSTOP)  # the watcher this test's launcher started
    try:
        for index in range(3000):  # far more than a pipe holds
            launcher._watcher.send({"op": "child", "id": launcher._instances[first_port].launch_id,
                                    "pid": 10_000_000 + index, "ctime": 1.0})
        done = threading.Event()
        result: dict = {}

        def stop() -> None:
            result.update(launcher.stop(first_port, grace_ms=500))
            done.set()

        threading.Thread(target=stop, daemon=True).start()
        assert done.wait(15), "stop_instance hung on a stopped watcher"
        assert result["stopped"] is True
        # The stalled watcher is killed (never hung up on: it would reap on waking) and a
        # new one, told everything in force, takes its place.
        assert wait_until(lambda: launcher.watcher_pid not in (None, stalled), 5)
        assert wait_until(lambda: not psutil.pid_exists(stalled), 5)
    finally:
        if psutil.pid_exists(stalled):
            os.kill(stalled, signal.SIGCONT)
    assert GameClient(second_port).health()["ok"] is True  # the other game was not reaped
    launcher.stop(second_port, grace_ms=1000)


def test_reaping_after_sigkill_holds_once_a_dead_watcher_was_replaced(tmp_path: Path, guard: ProcessGuard) -> None:
    declaration = write_declaration(tmp_path, "--ignore-close")
    driver = subprocess.Popen([PYTHON, str(DRIVER), "--config", str(declaration), "--registry-dir",
                               str(tmp_path / "home" / "instances")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=guard.env)
    try:
        assert driver.stdout is not None
        launched = json.loads(driver.stdout.readline())
        summary = json.loads(driver.stdout.readline())
        first = summary["watcherPid"]
        assert launched["port"] and first
        assert wait_until(lambda: len(guard.recorded()) == 1, 5)
        os.kill(first, signal.SIGKILL)  # the watcher of the bridge this test started

        def replacement() -> int | None:
            for child in psutil.Process(driver.pid).children():
                try:
                    if child.pid != first and any("watcher.py" in part for part in child.cmdline()):
                        return child.pid
                except psutil.Error:
                    continue
            return None

        assert wait_until(replacement, 3), "the dead watcher was not replaced"
        driver.kill()  # the bridge dies without any cleanup
        driver.wait(5)
        assert wait_until(lambda: not guard.recorded(), 8), "the game outlived a SIGKILLed bridge"
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()


def watchers_of(server: subprocess.Popen) -> list[psutil.Process]:
    """The watcher processes the server started (its children running watcher.py), not zombies."""
    found = []
    for child in psutil.Process(server.pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and any("watcher.py" in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_a_sigstopped_watcher_is_replaced_and_a_sigkilled_server_still_reaps(tmp_path: Path,
                                                                            guard: ProcessGuard) -> None:
    """A stopped watcher still has room in its pipe, so records alone never show it is gone:
    it must answer pings. The real server over stdio; two games; the watcher stopped."""
    decl = write_declaration(tmp_path / "game", "--ignore-close")
    env = {**guard.env, "GAME_BRIDGE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(Path(__file__).parents[2]),
           "GAME_BRIDGE_CONFIG": str(decl)}
    server = subprocess.Popen([PYTHON, "-m", "game_bridge_mcp", "--no-scan"], env=env, cwd=str(tmp_path),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    frozen: psutil.Process | None = None

    def call(ident: int, method: str, params: dict) -> dict:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}) + "\n")
        server.stdin.flush()
        while True:
            reply = json.loads(server.stdout.readline())
            if reply.get("id") == ident:
                return reply

    try:
        call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "0"}})
        assert server.stdin is not None
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        call(2, "tools/call", {"name": "launch_instance", "arguments": {}})
        assert wait_until(lambda: len(watchers_of(server)) == 1, 10)
        frozen = watchers_of(server)[0]
        frozen.suspend()  # SIGSTOP to the watcher this test's server started
        second = call(3, "tools/call", {"name": "launch_instance", "arguments": {}})
        assert not second["result"].get("isError"), second
        assert wait_until(lambda: len(guard.recorded()) == 2, 10)

        def replaced() -> bool:
            now = watchers_of(server)
            return bool(now) and all(w.pid != frozen.pid for w in now)

        assert wait_until(replaced, 15), "the stopped watcher was not replaced"
        # The server killed the stopped one (SIGKILL ends a stopped process; nothing else
        # would: woken later, a watcher hung up on would reap the server's live games).
        assert wait_until(lambda: not frozen.is_running() or frozen.status() == psutil.STATUS_ZOMBIE, 5)
        server.kill()  # the server dies without any cleanup
        server.wait(5)
        assert wait_until(lambda: not guard.recorded(), 10), "the games outlived a SIGKILLed server"
    finally:
        if frozen is not None and frozen.is_running():
            frozen.resume()
        if server.poll() is None:
            server.kill()
        server.wait()
