"""Never signal a foreign process: an inherited "ignore SIGCHLD", a leader reaped behind
Popen's back, exit statuses told truthfully, a stranger on a crashed game's port, the
subreaper and the processes a declaration spares (issue 11, item 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch import parent
from launch_helpers import (PYTHON, LauncherFactory, ProcessGuard, guard, launchers,  # noqa: F401
                            wait_until, write_declaration)

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[1]
#: Runs the rest of its argv with SIGCHLD ignored, the way some wrappers leave it.
IGNORING_WRAPPER = ("import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
                    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def run_cli_ignoring_sigchld(guard: ProcessGuard, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**guard.env, "GAME_BRIDGE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    return subprocess.run([PYTHON, "-c", IGNORING_WRAPPER, "-m", "game_bridge_mcp", *args],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=30)


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
                                           "readyTimeoutMs": 10000}}))
    launcher = launchers(decl)
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert "killed by SIGABRT" in info.value.message
    assert info.value.fields["signal"] == "SIGABRT" and info.value.fields["exitCode"] == -signal.SIGABRT
