"""A copy without psutil (vendored without it): the bridge says once, at start, on stderr,
what it cannot guarantee, and a stop says only what happened.

The subprocess tests block psutil the way a vendored copy lacks it, in every Python process
they start (the bridge, its reaper watcher, the game): a ``sitecustomize`` on PYTHONPATH
sets ``sys.modules['psutil'] = None`` before anything is imported. The in-process tests set
the launcher's ``procs.psutil`` to None, and, to stand for a system without pidfds or
``/proc``, take those away too. Every process is tagged and reaped (launch_helpers' guard).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from game_bridge_mcp.launch import guarantees, instance, procs

from launch_helpers import PYTHON, LauncherFactory, ProcessGuard, wait_until, write_declaration
from peers.kitfakes import free_port

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
WARNING = "psutil is not installed"


def blocked_env(tmp_path: Path, guard: ProcessGuard) -> dict[str, str]:
    site = tmp_path / "no-psutil"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['psutil'] = None\n")
    env = dict(guard.env)
    env.update({"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "HOME": str(tmp_path),
                "GAME_BRIDGE_HOME": str(tmp_path / "gb")})
    env.pop("GAME_BRIDGE_DEBUG_PORT", None)
    return env


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", *args], env=env, cwd=str(cwd),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def test_the_block_really_hides_psutil(tmp_path: Path, guard: ProcessGuard) -> None:
    out = subprocess.run([sys.executable, "-c", "import psutil"], env=blocked_env(tmp_path, guard),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "psutil" in out.stderr


def test_the_demo_warns_once_and_reports_the_clean_close_it_saw(tmp_path: Path, guard: ProcessGuard) -> None:
    """The issue's case: the game closed cleanly, and the stop used to say "processes
    survived SIGKILL, killed in 5115 ms" (a zombie counted as alive)."""
    out = run(["demo", "--hz", "500", "--drops", "2", "--port", str(free_port())], blocked_env(tmp_path, guard),
              tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr.count(WARNING) == 1, out.stderr
    assert "stop_instance" in out.stderr and "a stop says only what it did" in out.stderr
    assert "stopped: closed cleanly" in out.stdout, out.stdout
    assert "SIGKILL" not in out.stdout + out.stderr and "killed" not in out.stdout.split("> stop_instance", 1)[1]


@pytest.mark.slow
def test_the_server_call_and_check_say_the_same_once(tmp_path: Path, guard: ProcessGuard) -> None:
    env = blocked_env(tmp_path, guard)
    served = run(["--no-scan"], env, tmp_path)  # stdin at EOF: it serves nothing and exits
    assert served.returncode == 0 and served.stdout == "", served.stderr
    called = run(["call", "list_instances", "--no-scan"], env, tmp_path)
    assert called.returncode == 0, called.stderr
    assert run(["demo", "--init"], env, tmp_path).returncode == 0
    checked = run(["check", "--launch", "--timeout", "10000"], env, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SKIP  loopback-only binding" in checked.stdout
    for answer in (served, called, checked):
        assert answer.stderr.count(WARNING) == 1, answer.stderr
        assert answer.stderr.count("guarantees less") == 1
    helped = run(["call", "--help"], env, tmp_path)
    assert helped.returncode == 0 and WARNING not in helped.stderr  # help is not a start


def test_with_psutil_nothing_is_said() -> None:
    assert procs.psutil is not None
    assert guarantees.warning() is None and guarantees.limits() == []


# --------------------------------------------------------------------------- in process

@pytest.fixture
def no_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "psutil", None)


def test_an_unreaped_zombie_is_gone_without_psutil(no_psutil: None) -> None:
    child = subprocess.Popen([PYTHON, "-c", "pass"])
    try:
        ref = procs.ref_for(child.pid)
        assert ref is not None and ref.create_time > 0  # read from /proc, as psutil would
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
        assert not procs.is_alive(ref)
        assert procs.reap_tree(procs.Tree(leader=ref, pgid=-1, marker="", known=set()), term_s=0.1) == (None, [])
    finally:
        child.wait()


def test_a_reused_pid_is_not_the_recorded_process_without_psutil(no_psutil: None) -> None:
    child = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)"])
    try:
        ref = procs.ref_for(child.pid)
        assert ref is not None and procs.is_alive(ref)
        assert not procs.is_alive(procs.ProcRef(child.pid, ref.create_time - 5.0))  # another start time
        assert not procs.send_signal(procs.ProcRef(child.pid, ref.create_time - 5.0), signal.SIGTERM)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_launcher_stops_say_what_happened_without_psutil(tmp_path: Path, launchers: LauncherFactory,
                                                         guard: ProcessGuard, no_psutil: None) -> None:
    launcher = launchers(write_declaration(tmp_path))
    stopped = launcher.stop(launcher.launch()["port"])
    assert (stopped["how"], stopped["stopped"], stopped["exitCode"]) == ("closed cleanly", True, 0)
    assert "survivors" not in stopped
    stubborn = launchers(write_declaration(tmp_path / "stubborn", "--ignore-close", "--ignore-term"))
    stopped = stubborn.stop(stubborn.launch()["port"], grace_ms=200)
    assert (stopped["how"], stopped["stopped"]) == ("killed", True)  # SIGKILL was sent, and it sufficed
    assert stopped["exitCode"] in (None, -signal.SIGKILL)  # None: not yet collectable when the answer was made


@pytest.mark.slow
def test_no_pidfds_and_no_proc_a_stop_reports_not_signalled(tmp_path: Path, launchers: LauncherFactory,
                                                            guard: ProcessGuard, no_psutil: None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing can prove a pid is still the launched game: nothing is signalled, and the
    answer says so instead of "killed"."""
    monkeypatch.setattr(procs, "_HAS_PIDFD", False)
    monkeypatch.delattr(instance.os, "pidfd_open")  # the instance keeps no pidfd either
    monkeypatch.setattr(procs, "_proc_stat", lambda pid: None)
    assert not procs.identity_provable()
    assert "can signal no launched process" in (guarantees.warning() or "")
    # Held by nothing: a cgroup would prove what is the game's (and end it), and a keeper reads /proc.
    launcher = launchers(write_declaration(tmp_path, "--ignore-close"), containment="none")
    launched = launcher.launch()
    try:
        stopped = launcher.stop(launched["port"], grace_ms=200)
        assert (stopped["how"], stopped["stopped"]) == (procs.NOT_SIGNALLED, False), stopped
        assert stopped["survivors"] == [launched["pid"]]
        assert "no signal could reach them" in stopped["message"] and "SIGKILL" not in stopped["message"]
        assert os.waitid(os.P_PID, launched["pid"], os.WEXITED | os.WNOHANG | os.WNOWAIT) is None  # still runs
    finally:
        os.kill(launched["pid"], signal.SIGKILL)
        wait_until(lambda: os.waitpid(launched["pid"], os.WNOHANG)[0] != 0, 10)
