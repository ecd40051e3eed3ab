"""Every launched tree ends with the bridge, also when a descendant leaves everything the
bridge could know it by (issue 38, item 15): a daemon that calls ``setsid``, double-forks and
drops its whole environment (the launch marker too), started just before the bridge is
SIGKILLed, or from the game's SIGTERM handler when the watcher ends it, or every 0.2 s.

Both holdings are driven on this machine: the launch's own cgroup (where this user may make
one: root here and in CI) and the keeper, its subreaper ancestor (everywhere on Linux);
without either (``none``, the rest of the world) the repro still leaves its daemon behind,
as docs/launching.md says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from game_bridge_mcp.launch.hold import cgroups, contain
from launch_helpers import DRIVER, PYTHON, LauncherFactory, ProcessGuard, wait_until, write_declaration
from ports import free_port

pytestmark = pytest.mark.timeout(90)

BASE = cgroups.own_cgroup()
HOLDINGS = [pytest.param("cgroup", marks=pytest.mark.skipif(BASE is None, reason="no cgroup of this user's here")),
            "keeper"]


#: The bridges this test started (the drivers; the test process is one too).
BRIDGES: set[int] = set()


@pytest.fixture(autouse=True)
def no_cgroup_left() -> Iterator[None]:
    """Every cgroup this test's bridges make is gone at the end (a system change must not
    stay). Only theirs: other bridges of this machine (other test runs) make theirs too."""
    BRIDGES.clear()
    BRIDGES.add(os.getpid())
    yield
    if BASE is None:
        return

    def ours() -> list[str]:
        return [os.path.join(BASE, name) for name in os.listdir(BASE) if name.startswith(cgroups.PREFIX)
                and name[len(cgroups.PREFIX):].split("-", 1)[0] in {str(pid) for pid in BRIDGES}]

    if wait_until(lambda: not ours(), 5):
        return
    left = ours()
    for path in left:  # what this test's bridges made: ended and removed, then the test fails
        cgroups.kill(path)
        cgroups.remove(path)
    pytest.fail(f"cgroups left behind: {left}")


def start_driver(tmp_path: Path, guard: ProcessGuard, declaration: Path, holding: str) -> subprocess.Popen:
    driver = subprocess.Popen(
        [PYTHON, str(DRIVER), "--config", str(declaration), "--registry-dir", str(tmp_path / "home" / "instances"),
         "--containment", holding, "--watcher-log", str(tmp_path / "watcher.log")],
        env=guard.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    BRIDGES.add(driver.pid)
    return driver


def launched(driver: subprocess.Popen) -> dict[str, Any]:
    assert driver.stdout is not None
    result = json.loads(driver.stdout.readline())
    assert "port" in result, result
    assert "launched" in json.loads(driver.stdout.readline())
    return result


def daemons(guard: ProcessGuard) -> list[psutil.Process]:
    """Recorded processes that left the session and the environment (see game.py)."""
    found = []
    for proc in guard.recorded():
        try:
            if "daemon" in proc.cmdline() and proc.environ() == {}:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def finish(driver: subprocess.Popen) -> None:
    for stream in (driver.stdin, driver.stdout):
        if stream is not None and not stream.closed:
            stream.close()
    if driver.poll() is None:
        driver.kill()
    driver.wait()


@pytest.mark.parametrize("holding", HOLDINGS)
def test_a_daemon_started_just_before_the_bridge_is_killed_goes_with_it(
        tmp_path: Path, guard: ProcessGuard, holding: str) -> None:
    driver = start_driver(tmp_path, guard, write_declaration(tmp_path), holding)
    try:
        port = launched(driver)["port"]
        # The game answers once its daemon has recorded itself (new session, double fork, env {}).
        urllib.request.urlopen(f"http://127.0.0.1:{port}/command?cmd=daemon", timeout=10).read()
        assert len(daemons(guard)) == 1
        driver.send_signal(signal.SIGKILL)  # before the bridge's once-a-second look could adopt it
        assert driver.wait(5) == -signal.SIGKILL
        assert wait_until(lambda: not guard.recorded(), 8), [p.cmdline() for p in guard.recorded()]
    finally:
        finish(driver)


@pytest.mark.parametrize("holding", HOLDINGS)
def test_a_daemon_started_on_the_watchers_sigterm_goes_too(tmp_path: Path, guard: ProcessGuard,
                                                            holding: str) -> None:
    driver = start_driver(tmp_path, guard, write_declaration(tmp_path, "--daemon-on-term"), holding)
    try:
        launched(driver)
        driver.send_signal(signal.SIGKILL)  # the watcher (or keeper) sends SIGTERM: a daemon is born
        assert driver.wait(5) == -signal.SIGKILL
        assert wait_until(lambda: not guard.recorded(), 8), [p.cmdline() for p in guard.recorded()]
    finally:
        finish(driver)


@pytest.mark.parametrize("holding", HOLDINGS)
def test_a_game_spawning_daemons_every_fifth_of_a_second_leaves_none(tmp_path: Path, guard: ProcessGuard,
                                                                     holding: str) -> None:
    driver = start_driver(tmp_path, guard, write_declaration(tmp_path, "--daemon-every", "0.2"), holding)
    try:
        launched(driver)
        assert wait_until(lambda: len(daemons(guard)) >= 3, 10)
        driver.send_signal(signal.SIGKILL)
        assert driver.wait(5) == -signal.SIGKILL
        assert wait_until(lambda: not guard.recorded(), 8), [p.cmdline() for p in guard.recorded()]
    finally:
        finish(driver)


def test_without_a_holding_such_a_daemon_outlives_a_killed_bridge(tmp_path: Path, guard: ProcessGuard) -> None:
    """What the two holdings are for (and what a platform with neither can promise): the
    process group, the recorded descendants and the marker cannot find it."""
    driver = start_driver(tmp_path, guard, write_declaration(tmp_path, "--daemon-on-term"), "none")
    try:
        launched(driver)
        driver.send_signal(signal.SIGKILL)
        driver.wait(5)
        # The game went (the watcher ended it); the daemon its SIGTERM handler started did not.
        assert wait_until(lambda: len(guard.recorded()) == 1 and len(daemons(guard)) == 1, 8), guard.recorded()
    finally:
        for proc in daemons(guard):  # this test's own
            proc.kill()
        finish(driver)


@pytest.mark.parametrize("holding", HOLDINGS)
def test_stop_and_shutdown_end_the_daemons_too(tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard,
                                               holding: str) -> None:
    launcher = launchers(write_declaration(tmp_path, "--daemon-at-boot", "--daemon-on-term"), containment=holding)
    first = launcher.launch()["port"]
    launcher.launch()
    assert wait_until(lambda: len(daemons(guard)) == 2, 5)
    stopped = launcher.stop(first, grace_ms=500)
    assert stopped["stopped"] is True
    assert wait_until(lambda: len(daemons(guard)) == 1, 5), [p.cmdline() for p in daemons(guard)]
    launcher.shutdown(grace_ms=200)
    assert wait_until(lambda: not guard.recorded(), 5), [p.cmdline() for p in guard.recorded()]


# --------------------------------------------------------------------------- the cgroup

@pytest.mark.skipif(BASE is None, reason="no cgroup of this user's here")
def test_the_whole_tree_starts_inside_its_cgroup_and_the_cgroup_goes_with_it(
        tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path, "--child", "plain", shell=True, suffix="; echo after"),
                         containment="cgroup")
    port = launcher.launch()["port"]
    inst = launcher._instances[port]
    path = inst.tree.cgroup
    assert path is not None and os.path.dirname(path) == BASE
    assert os.path.basename(path) == cgroups.PREFIX + inst.launch_id
    assert wait_until(lambda: len(guard.recorded()) == 2, 5)
    for proc in [psutil.Process(inst.proc.pid), *guard.recorded()]:  # the shell, the game, its child
        assert cgroups.cgroup_of(proc.pid) == path, proc.cmdline()
    assert sorted(cgroups.pids(path)) == sorted([inst.proc.pid, *(p.pid for p in guard.recorded())])
    launcher.stop(port, grace_ms=500)
    assert not os.path.exists(path) and not guard.recorded()


@pytest.mark.skipif(BASE is None, reason="no cgroup of this user's here")
def test_a_spared_process_leaves_the_cgroup_alive(tmp_path: Path, launchers: LauncherFactory,
                                                 guard: ProcessGuard) -> None:
    decl = tmp_path / "gamebridge.json"
    write_declaration(tmp_path)
    doc = json.loads(decl.read_text())
    game = " ".join(doc["launch"].pop("argv"))
    doc["launch"]["command"] = f"{PYTHON} -c 'import time; time.sleep(600)' kept-daemon & exec {game}"
    doc["launch"]["spare"] = ["kept-daemon"]
    decl.write_text(json.dumps(doc))
    launcher = launchers(decl, containment="cgroup")
    port = launcher.launch()["port"]
    path = launcher._instances[port].tree.cgroup
    kept = [p for p in guard.tagged() if "kept-daemon" in " ".join(p.cmdline())]
    try:
        assert len(kept) == 1
        assert launcher.stop(port, grace_ms=500)["stopped"] is True
        assert kept[0].is_running() and cgroups.cgroup_of(kept[0].pid) == BASE
        assert path is not None and not os.path.exists(path)
    finally:
        for proc in kept:
            proc.kill()
            proc.wait(5)


@pytest.mark.skipif(BASE is None, reason="no cgroup of this user's here")
def test_a_stale_empty_cgroup_of_a_dead_bridge_is_pruned_at_the_next_start(tmp_path: Path) -> None:
    dead = subprocess.Popen([PYTHON, "-c", "pass"])
    dead.wait()
    assert BASE is not None
    stale = os.path.join(BASE, f"{cgroups.PREFIX}{dead.pid}-0123456789abcdef")
    alive = os.path.join(BASE, f"{cgroups.PREFIX}{os.getpid()}-0123456789abcdef")
    os.mkdir(stale)
    os.mkdir(alive)
    try:
        assert cgroups.prune(BASE) >= 1
        assert not os.path.exists(stale) and os.path.exists(alive)  # a live bridge's is left alone
    finally:
        for path in (stale, alive):
            if os.path.exists(path):
                os.rmdir(path)


@pytest.mark.skipif(BASE is None, reason="no cgroup of this user's here")
def test_a_cgroup_that_will_not_take_the_process_falls_back_to_a_keeper_having_run_nothing(
        tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = tmp_path / "ran"
    write_declaration(tmp_path)
    decl = tmp_path / "gamebridge.json"
    doc = json.loads(decl.read_text())
    doc["launch"]["command"] = f"echo x >> {ran}; exec " + " ".join(doc["launch"].pop("argv"))
    decl.write_text(json.dumps(doc))
    monkeypatch.setattr(cgroups, "move", lambda path, pid: False)
    launcher = launchers(decl, containment="auto")
    port = launcher.launch()["port"]
    inst = launcher._instances[port]
    assert inst.plan.mode == contain.KEEPER and inst.tree.cgroup is None
    assert ran.read_text() == "x\n"  # once: the gated first start ran nothing
    launcher.launch()  # and every later launch goes straight to a keeper
    assert ran.read_text() == "x\nx\n"
    assert [inst.plan.mode for inst in launcher._instances.values()] == [contain.KEEPER] * 2


def test_without_a_cgroup_the_keeper_holds_the_tree(tmp_path: Path, launchers: LauncherFactory,
                                                    guard: ProcessGuard, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroups, "own_cgroup", lambda: None)
    launcher = launchers(write_declaration(tmp_path, "--child", "escape"))
    port = launcher.launch()["port"]
    inst = launcher._instances[port]
    assert inst.plan.mode == contain.KEEPER
    keeper = psutil.Process(inst.proc.pid)
    assert "keeper.py" in " ".join(keeper.cmdline()) and "--port" not in keeper.cmdline()
    assert wait_until(lambda: len(guard.recorded()) == 2, 5)
    escapee = next(p for p in guard.recorded() if "--escaped" in p.cmdline())
    assert escapee.ppid() == keeper.pid  # orphaned to its keeper, not to the bridge or init
    assert inst.listener_pid() == next(p.pid for p in guard.recorded() if "--escaped" not in p.cmdline())
    assert launcher.stop(port, grace_ms=500)["how"] == "terminated"  # the game closed, its escapee did not
    assert wait_until(lambda: not guard.recorded(), 5)


@pytest.mark.parametrize("code", [0, 3])
def test_the_keeper_reports_the_commands_own_status(tmp_path: Path, launchers: LauncherFactory,
                                                    guard: ProcessGuard, code: int) -> None:
    decl = tmp_path / "gamebridge.json"
    decl.write_text(json.dumps({"launch": {"argv": [PYTHON, "-c", f"import sys; sys.exit({code})"],
                                           "portRange": "{0}-{0}".format(free_port()), "readyTimeoutMs": 3000}}))
    launcher = launchers(decl, containment="keeper")
    with pytest.raises(Exception) as info:
        launcher.launch()
    assert f"exited with code {code}" in str(info.value)


def test_the_keeper_reports_a_signal_as_the_signal(tmp_path: Path, launchers: LauncherFactory,
                                                   guard: ProcessGuard) -> None:
    decl = tmp_path / "gamebridge.json"
    decl.write_text(json.dumps({"launch": {"argv": [PYTHON, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"],
                                           "portRange": "{0}-{0}".format(free_port()), "readyTimeoutMs": 3000}}))
    launcher = launchers(decl, containment="keeper")
    with pytest.raises(Exception) as info:
        launcher.launch()
    assert "killed by SIGABRT" in str(info.value)
    assert getattr(info.value, "fields", {}).get("exitCode") == -signal.SIGABRT


@pytest.mark.parametrize("holding", [*HOLDINGS, "none"])
def test_a_start_script_that_exits_leaving_its_game_is_judged_by_its_own_code(
        tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard, holding: str) -> None:
    """Under a keeper too (which the game left behind keeps alive), the command's own exit is
    what counts: 0 with the game running is a start script, anything else a failed launch."""
    write_declaration(tmp_path, "--boot-delay", "0.5")
    decl = tmp_path / "gamebridge.json"
    doc = json.loads(decl.read_text())
    game = " ".join(doc["launch"].pop("argv"))
    for code in (3, 0):
        doc["launch"]["command"] = f"{game} & exit {code}"
        decl.write_text(json.dumps(doc))
        launcher = launchers(decl, containment=holding)
        if code:
            with pytest.raises(Exception) as info:
                launcher.launch()
            assert "exited with code 3" in str(info.value), info.value
            assert wait_until(lambda: not guard.recorded(), 5)
        else:
            port = launcher.launch()["port"]
            info_now = launcher.info(port)
            assert info_now is not None and info_now["running"] is True
            assert launcher.stop(port, grace_ms=1000)["stopped"] is True


@pytest.mark.skipif(BASE is None, reason="no cgroup of this user's here")
def test_without_psutil_a_launchs_cgroup_still_ends_what_left_its_group(
        tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy vendored without psutil finds only the launched process and its group (as
    guarantees.py says); its cgroup still holds the grandchild that called setsid."""
    from game_bridge_mcp.launch import procs

    monkeypatch.setattr(procs, "psutil", None)
    launcher = launchers(write_declaration(tmp_path, "--child", "setsid", "--ignore-close", shell=True,
                                           suffix="; echo after"), containment="cgroup")
    port = launcher.launch()["port"]
    assert wait_until(lambda: len(guard.recorded()) == 2, 5)
    stopped = launcher.stop(port, grace_ms=300)
    assert stopped["stopped"] is True, stopped
    assert wait_until(lambda: not guard.recorded(), 5), [p.cmdline() for p in guard.recorded()]
