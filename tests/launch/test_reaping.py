"""Stopping and reaping real process trees: clean close, escalation, grandchildren that
leave the group, shutdown, several bridges at once, a SIGKILLed bridge, and never a
process the bridge did not launch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import psutil
import pytest

from game_bridge_mcp.launch import procs
from game_bridge_mcp.wire.client import GameClient
from game_bridge_mcp.errors import BridgeUsageError
from launch_helpers import (DRIVER, GAME, PYTHON, LauncherFactory, ProcessGuard, free_range, wait_until,
                            write_declaration)

pytestmark = pytest.mark.timeout(60)


def game_processes(guard: ProcessGuard) -> list[psutil.Process]:
    return guard.recorded()


# --------------------------------------------------------------------------- stop

def test_clean_close(tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path))
    result = launcher.launch()
    stopped = launcher.stop(result["port"])
    assert stopped["how"] == "closed cleanly" and stopped["stopped"] is True
    assert stopped["port"] == result["port"] and stopped["exitCode"] == 0
    assert stopped["stoppedInMs"] < 10_000  # a hang guard: "closed cleanly" says how it ended
    assert not game_processes(guard)
    assert GameClient(result["port"]).port_is_quiet()
    with pytest.raises(BridgeUsageError, match="not an instance this bridge launched"):
        launcher.stop(result["port"])  # forgotten after stop


def test_ignores_close_is_terminated(tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path, "--ignore-close"))
    port = launcher.launch()["port"]
    started = time.monotonic()
    stopped = launcher.stop(port, grace_ms=300)
    assert stopped["how"] == "terminated"
    assert 0.3 <= time.monotonic() - started < 15  # the grace, then a hang guard
    assert not game_processes(guard)


@pytest.mark.slow
def test_ignores_sigterm_is_killed(tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path, "--ignore-close", "--ignore-term", "--child", "plain"))
    port = launcher.launch()["port"]
    assert wait_until(lambda: len(game_processes(guard)) == 2, 3)
    stopped = launcher.stop(port, grace_ms=200)
    assert stopped["how"] == "killed" and stopped["stopped"] is True
    assert stopped["exitCode"] == -signal.SIGKILL
    assert not game_processes(guard)


@pytest.mark.slow
@pytest.mark.parametrize("child", ["plain", "setsid"])
def test_process_tree_all_gone(tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard, child: str) -> None:
    """shell -> game -> grandchild (which, with setsid, leaves the process group)."""
    launcher = launchers(write_declaration(tmp_path, "--child", child, shell=True, suffix="; echo after"))
    result = launcher.launch()
    assert wait_until(lambda: len(game_processes(guard)) == 2, 3)
    grandchild = [p for p in game_processes(guard) if p.pid != result["pid"]][0]
    if child == "setsid":
        assert os.getpgid(grandchild.pid) != os.getpgid(result["pid"])
    shell = psutil.Process(result["pid"]).parent()
    assert shell.name() in ("sh", "dash", "bash")
    stopped = launcher.stop(result["port"], grace_ms=1000)
    # The game closed itself; the grandchild it left behind had to be terminated.
    assert stopped["how"] == "terminated"
    assert not game_processes(guard)
    assert not shell.is_running() or shell.status() == psutil.STATUS_ZOMBIE


def test_setsid_grandchild_found_by_marker_alone(tmp_path: Path, launchers: LauncherFactory,
                                                 guard: ProcessGuard) -> None:
    """A grandchild that left the group and was never seen as a descendant (its parent
    exited before any refresh) is still found through the environment marker."""
    launcher = launchers(write_declaration(tmp_path, "--child", "setsid", "--ignore-close"))
    result = launcher.launch()
    assert wait_until(lambda: len(game_processes(guard)) == 2, 3)
    inst = launcher._instances[result["port"]]
    with inst.tree._lock:
        inst.tree.known.clear()  # forget what the launcher saw; only the marker is left
    os.kill(result["pid"], signal.SIGKILL)  # the grandchild is now an orphan of init
    assert wait_until(lambda: len(game_processes(guard)) == 1, 3)
    stopped = launcher.stop(result["port"], grace_ms=100)
    assert stopped["how"] == "terminated"
    assert not game_processes(guard)


def test_stop_refuses_a_process_it_did_not_launch(tmp_path: Path, launchers: LauncherFactory,
                                                  guard: ProcessGuard) -> None:
    low, _ = free_range(1)
    stranger = subprocess.Popen([PYTHON, str(GAME), "--port", str(low)], env=guard.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_until(lambda: not GameClient(low).port_is_quiet(), 5)
        launcher = launchers(write_declaration(tmp_path))
        mine = launcher.launch()["port"]
        with pytest.raises(BridgeUsageError) as info:
            launcher.stop(low)
        assert 'call_tool {"port": %d, "name": "close"}' % low in info.value.message
        launcher.shutdown(grace_ms=200)
        assert not launcher.is_launched(mine)
        assert stranger.poll() is None and GameClient(low).health()["ok"] is True
    finally:
        stranger.kill()
        stranger.wait()


def test_stop_while_booting_cancels_the_launch(tmp_path: Path, launchers: LauncherFactory,
                                               guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path, "--boot-delay", "30"))
    errors: list[BaseException] = []

    def launch() -> None:
        try:
            launcher.launch()
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    thread = threading.Thread(target=launch)
    thread.start()
    assert wait_until(lambda: launcher.launched_ports(), 3)
    port = launcher.launched_ports()[0]
    stopped = launcher.stop(port, grace_ms=30_000)
    assert stopped["how"] == "terminated"  # nothing to close yet: no grace wasted
    assert stopped["stoppedInMs"] < 15_000  # waiting out the grace would take 30 s
    thread.join(5)
    assert errors and "cancelled" in str(errors[0])
    assert not game_processes(guard)


@pytest.mark.slow
def test_shutdown_stops_everything_at_once_within_a_bound(tmp_path: Path, launchers: LauncherFactory,
                                                          guard: ProcessGuard) -> None:
    """Three instances that ignore close and SIGTERM and left a setsid grandchild each:
    one after another that is over 12 s (grace + TERM wait each); at once, about 5 s."""
    launcher = launchers(write_declaration(tmp_path, "--ignore-close", "--ignore-term", "--child", "setsid",
                                           port_range=free_range(3)))
    ports = []
    for _ in range(3):
        ports.append(launcher.launch()["port"])
    assert len(set(ports)) == 3
    assert wait_until(lambda: len(game_processes(guard)) == 6, 3)
    watcher = launcher.watcher_pid
    assert watcher is not None
    started = time.monotonic()
    launcher.shutdown(grace_ms=4000)
    took = time.monotonic() - started
    assert took < 9, took  # halfway between at once (4.7 s) and one after another (over 12 s)
    assert launcher.launched_ports() == [] and not game_processes(guard)
    assert not psutil.pid_exists(watcher) or psutil.Process(watcher).status() == psutil.STATUS_ZOMBIE
    launcher.shutdown()  # idempotent: nothing left to wait for
    assert time.monotonic() - started - took < 4  # less than one grace


@pytest.mark.slow
def test_concurrent_launches_in_one_bridge_get_distinct_ports(tmp_path: Path, launchers: LauncherFactory) -> None:
    launcher = launchers(write_declaration(tmp_path, "--boot-delay", "0.2", port_range=free_range(3)))
    results: list[dict] = []
    threads = [threading.Thread(target=lambda: results.append(launcher.launch())) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len({r["port"] for r in results}) == 3 == len(results)
    assert launcher.launched_ports() == sorted(r["port"] for r in results)


# --------------------------------------------------------------------------- bridges in processes

def start_driver(tmp_path: Path, guard: ProcessGuard, declaration: Path, *extra: str,
                 registry: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, str(DRIVER), "--config", str(declaration),
         "--registry-dir", str(registry or tmp_path / "home" / "instances"), *extra],
        env=guard.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def read_driver(proc: subprocess.Popen) -> tuple[list[dict], dict]:
    assert proc.stdout is not None
    results = []
    while True:
        line = proc.stdout.readline()
        assert line, "the driver exited early"
        doc = json.loads(line)
        if "launched" in doc:
            return results, doc
        results.append(doc)


def close_driver(proc: subprocess.Popen) -> None:
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            stream.close()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_bridges_in_separate_processes_get_distinct_ports(tmp_path: Path, guard: ProcessGuard) -> None:
    low, high = free_range(6)
    declaration = write_declaration(tmp_path, "--boot-delay", "0.2", port_range=(low, high))
    go = tmp_path / "go"
    drivers = [start_driver(tmp_path, guard, declaration, "--go-file", str(go)) for _ in range(4)]
    try:
        for driver in drivers:  # all four at the starting line, then go at once
            assert driver.stdout is not None
            assert json.loads(driver.stdout.readline()) == {"waiting": True}
        go.write_text("go")
        outcomes = [read_driver(d) for d in drivers]
        ports = [results[0]["port"] for results, _ in outcomes]
        assert all("error" not in results[0] for results, _ in outcomes), outcomes
        assert len(set(ports)) == 4 and all(low <= p <= high for p in ports)
        for port in ports:
            assert GameClient(port).health()["ok"] is True
    finally:
        for driver in drivers:
            close_driver(driver)
    assert wait_until(lambda: not game_processes(guard), 5)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "stdin EOF", "SIGHUP"])
def test_bridge_death_reaps_every_launched_process(tmp_path: Path, guard: ProcessGuard, how: str) -> None:
    declaration = write_declaration(tmp_path, "--child", "setsid", "--ignore-close", shell=True,
                                    suffix="; echo after")
    driver = start_driver(tmp_path, guard, declaration, "--count", "2")
    try:
        results, summary = read_driver(driver)
        assert len(summary["launched"]) == 2
        watcher = summary["watcherPid"]
        assert wait_until(lambda: len(game_processes(guard)) == 4, 3)
        started = time.monotonic()
        if how == "stdin EOF":
            assert driver.stdin is not None
            driver.stdin.close()
        else:
            driver.send_signal(getattr(signal, how))
        gone = wait_until(lambda: not game_processes(guard), 5)
        took = time.monotonic() - started
        assert gone, f"still alive {took:.1f}s after {how}: {game_processes(guard)}"
        assert driver.wait(5) in ((-signal.SIGKILL,) if how == "SIGKILL" else
                                  (0,) if how == "stdin EOF" else (128 + getattr(signal, how),))
        # The watcher exits too, whichever way the bridge went.
        assert wait_until(lambda: not psutil.pid_exists(watcher), 5)
    finally:
        close_driver(driver)


# --------------------------------------------------------------------------- the watcher alone

def sleeper(guard: ProcessGuard, *, marker: str | None = None) -> subprocess.Popen:
    env = dict(guard.env)
    if marker:
        env[procs.MARKER_KEY] = marker
    return subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True)


def start_watcher() -> subprocess.Popen:
    script = Path(procs.__file__).with_name("watcher.py")
    return subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, start_new_session=True)


def send(pipe: IO[bytes], *records: dict) -> None:
    pipe.write(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    pipe.flush()


def test_the_watcher_run_by_file_path_answers_pings_on_stdout() -> None:
    """How the bridge starts it (so a vendored copy works): its imports resolve by path, and
    a ping is answered with its number, which is how the bridge knows it still reads."""
    script = Path(procs.__file__).with_name("watcher.py")
    watcher = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True, env={"PATH": os.environ["PATH"]})
    try:
        assert watcher.stdin is not None and watcher.stdout is not None
        send(watcher.stdin, {"op": "ping", "seq": 41}, {"op": "ping", "seq": "not a number"}, {"op": "ping", "seq": 42})
        assert watcher.stdout.readline() == b"41\n" and watcher.stdout.readline() == b"42\n"
        watcher.stdin.close()
        assert watcher.wait(10) == 0
        assert watcher.stdout.read() == b"" and watcher.stderr is not None and watcher.stderr.read() == b""
    finally:
        if watcher.poll() is None:
            watcher.kill()
        watcher.wait()


def test_watcher_reaps_only_what_it_was_told_about(guard: ProcessGuard) -> None:
    recorded = sleeper(guard)
    marked = sleeper(guard, marker="outer,launch-b")
    forgotten = sleeper(guard)
    reused = sleeper(guard)  # recorded with the wrong creation time: a stand-in for pid reuse
    watcher = start_watcher()
    try:
        assert watcher.stdin is not None
        ref = procs.ref_for(recorded.pid)
        assert ref is not None
        send(watcher.stdin,
             {"op": "launch", "id": "a", "pid": ref.pid, "ctime": ref.create_time, "pgid": ref.pid, "marker": "launch-a"},
             {"op": "expect", "id": "b", "marker": "launch-b"},
             {"op": "launch", "id": "c", "pid": forgotten.pid, "ctime": procs.ref_for(forgotten.pid).create_time,
              "pgid": forgotten.pid, "marker": "launch-c"},
             {"op": "forget", "id": "c"},
             {"op": "launch", "id": "d", "pid": reused.pid, "ctime": 12345.0, "pgid": -1, "marker": "launch-d"},
             {"not": "a record"})
        watcher.stdin.write(b"garbage line\n")
        watcher.stdin.close()
        assert watcher.wait(5) == 0
        assert recorded.wait(3) is not None and marked.wait(3) is not None
        assert forgotten.poll() is None and reused.poll() is None
    finally:
        for proc in (recorded, marked, forgotten, reused, watcher):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_watcher_runs_as_a_module_too(guard: ProcessGuard) -> None:
    target = sleeper(guard)
    watcher = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp.launch.watcher"], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, cwd=str(Path(procs.__file__).parents[1]),
                               start_new_session=True)
    try:
        ref = procs.ref_for(target.pid)
        assert watcher.stdin is not None and ref is not None
        send(watcher.stdin, {"op": "launch", "id": "x", "pid": ref.pid, "ctime": ref.create_time,
                             "pgid": ref.pid, "marker": "m"})
        watcher.stdin.close()
        assert watcher.wait(5) == 0 and target.wait(3) == -signal.SIGTERM
    finally:
        for proc in (target, watcher):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_dead_watcher_is_replaced(tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path))
    launcher.launch()
    first = launcher.watcher_pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    # Noticed and replaced within about a second, without waiting for another record.
    assert wait_until(lambda: launcher.watcher_pid not in (None, first), 3)
    second = launcher.watcher_pid
    launcher.launch()
    assert launcher.watcher_pid == second
    # The new one knows about both instances: kill -9 would still reap them. Shut down cleanly.
    launcher.shutdown(grace_ms=200)
    assert not game_processes(guard)


# --------------------------------------------------------------------------- pid-reuse guard

def test_signals_check_identity(guard: ProcessGuard) -> None:
    proc = sleeper(guard)
    try:
        ref = procs.ref_for(proc.pid)
        assert ref is not None and procs.is_alive(ref)
        impostor = procs.ProcRef(proc.pid, ref.create_time - 100)
        assert procs.send_signal(impostor, signal.SIGTERM) is False
        assert not procs.is_alive(impostor)
        time.sleep(0.05)
        assert proc.poll() is None
        assert procs.signal_group(proc.pid, signal.SIGTERM, [impostor]) is False
        assert proc.poll() is None
        assert procs.send_signal(ref, signal.SIGTERM) is True
        assert proc.wait(3) == -signal.SIGTERM
        assert procs.send_signal(ref, signal.SIGTERM) is False  # gone: nothing to hit
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
