"""File modes as docs/cli.md's "Where files go" states them: every directory the bridge
or the kit creates (the home and its parents too) is 0700 whatever the umask, a folder
that exists already is never chmodded (``GAME_BRIDGE_SCREENSHOTS`` may be a shared team
folder), pruning never deletes another user's file, and the demo game's temporary
screenshot folder goes with the game.

Through the real interfaces: the ``call`` CLI and the demo game as child processes, run
under umask 000."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from game_bridge_mcp.paths import KeepRule, prune_files
from launch_helpers import ProcessGuard, wait_until, write_declaration
from peers.handmade import HandmadeGame
from peers.kitfakes import REPO, child_env, demo_process

pytestmark = pytest.mark.timeout(90)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def call(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``game-bridge-mcp call ...`` under umask 000."""
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60, umask=0)


@pytest.mark.slow
def test_the_home_and_its_parents_are_created_0700_under_umask_000(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path / "game")
    home = tmp_path / "new" / "deeper" / "home"
    env = {**guard.env, "PYTHONPATH": str(REPO), "GAME_BRIDGE_HOME": str(home), "GAME_BRIDGE_CONFIG": str(decl)}
    env.pop("GAME_BRIDGE_PORT", None)
    out = call(tmp_path, env, "launch_instance", "--keep")
    assert out.returncode == 0, out.stderr
    closed = call(tmp_path, env, "close", "--port", str(json.loads(out.stdout)["port"]))
    assert closed.returncode == 0, closed.stderr
    assert wait_until(lambda: not guard.recorded(), 10)
    made = [tmp_path / "new", tmp_path / "new" / "deeper", home, home / "locks", home / "logs"]
    assert {str(path.relative_to(tmp_path)): oct(mode(path)) for path in made} == \
        {str(path.relative_to(tmp_path)): "0o700" for path in made}
    assert all(mode(log) == 0o600 for log in (home / "logs").iterdir())


def test_the_kit_creates_the_registry_home_0700_under_umask_000(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "0"], umask=0,
                            env=child_env({"GAME_BRIDGE_HOME": str(home)}), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=str(REPO))
    try:
        assert proc.stdout is not None and "serving on" in proc.stdout.readline()
        assert wait_until(lambda: list((home / "instances").glob("*.json")), 10)
        for path in (tmp_path / "fresh", home, home / "instances"):
            assert mode(path) == 0o700, (path, oct(mode(path)))
        assert all(mode(entry) == 0o600 for entry in (home / "instances").glob("*.json"))
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("folder_mode", [0o2775, 0o1777, 0o755])
def test_a_screenshots_folder_that_exists_keeps_its_mode(tmp_path: Path, folder_mode: int) -> None:
    shared = tmp_path / "team-shots"
    shared.mkdir()
    os.chmod(shared, folder_mode)  # a shared team folder (setgid, group-writable), a /tmp-like one
    env = {**os.environ, "PYTHONPATH": str(REPO), "GAME_BRIDGE_HOME": str(tmp_path / "home"),
           "GAME_BRIDGE_SCREENSHOTS": str(shared)}
    env.pop("GAME_BRIDGE_PORT", None)
    with HandmadeGame(hz=200) as game:
        out = call(tmp_path, env, "get_screenshot", "--port", str(game.port))
    assert out.returncode == 0, out.stderr
    saved = Path(json.loads(out.stdout)["file"])
    assert saved.parent == shared and mode(saved) == 0o600
    assert mode(shared) == folder_mode, oct(mode(shared))


def test_a_named_screenshots_folder_that_is_missing_is_created_0700(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GAME_BRIDGE_HOME": str(tmp_path / "home"),
           "GAME_BRIDGE_SCREENSHOTS": str(tmp_path / "a" / "shots")}
    env.pop("GAME_BRIDGE_PORT", None)
    with HandmadeGame(hz=200) as game:
        out = call(tmp_path, env, "get_screenshot", "--port", str(game.port))
    assert out.returncode == 0, out.stderr
    assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "shots") == 0o700


def test_pruning_never_deletes_another_users_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(4):
        (tmp_path / f"shot-{index}.png").write_bytes(b"x")
    rule = KeepRule(max_files=1, max_bytes=1 << 20, max_age_s=3600)
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 1)  # every file there is now someone else's
    assert prune_files(tmp_path, rule, match=lambda name: name.startswith("shot-")) == 0
    monkeypatch.setattr(os, "getuid", lambda: real)
    assert prune_files(tmp_path, rule, match=lambda name: name.startswith("shot-")) == 3


def get(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:  # noqa: S310
        return json.loads(answer.read())


@pytest.mark.parametrize("how", ["close", "SIGTERM"])
def test_the_demo_games_temporary_screenshot_folder_goes_with_it(how: str) -> None:
    with demo_process("--hz", "200", "--no-register") as demo:
        get(demo.port, "/command?cmd=screenshot&name=board")
        assert wait_until(lambda: get(demo.port, "/state")["screenshots"]["last"], 10)
        shot = Path(get(demo.port, "/state")["screenshots"]["last"])
        assert shot.exists() and mode(shot.parent) == 0o700
        if how == "close":
            get(demo.port, "/command?cmd=close")
        else:
            demo.proc.terminate()
        assert demo.wait(10) in (0, -15)
        deadline = time.monotonic() + 5
        while shot.parent.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not shot.parent.exists(), f"{shot.parent} was left behind"
