"""What a declaration's command runs is held to the declaration's own rule (issue 38, item 14):
a world-writable ``./run.sh``, a link to another user's script, an interpreter's script that
others may write, or a folder others may write on the ``PATH`` searched for the program, is
refused before anything starts, naming the file and the fix.

Another user is simulated the way root can: files chowned to ``nobody`` (as root), or made
writable by everyone (any user)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.errors import BridgeUsageError
from launch_helpers import GAME, LauncherFactory, free_range

NOBODY = 65534


def project(tmp_path: Path, launch: dict[str, Any]) -> Path:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    low, high = free_range(4)
    path = folder / "gamebridge.json"
    path.write_text(json.dumps({"launch": {**launch, "portRange": f"{low}-{high}", "readyTimeoutMs": 8000}}))
    return path


def script(path: Path, marker: Path, mode: int = 0o755) -> Path:
    """A start script that, if it ever runs, leaves ``marker`` and then runs the test game."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch {marker}\nexec {sys.executable} {GAME} \"$@\"\n")
    os.chmod(path, mode)
    return path


def refused(launchers: LauncherFactory, declaration: Path) -> BridgeUsageError:
    launcher = launchers(declaration)
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert launcher.launched_ports() == []
    return info.value


@pytest.mark.parametrize("form", ["command", "argv"])
def test_a_world_writable_start_script_is_refused_and_never_run(tmp_path: Path, launchers: LauncherFactory,
                                                                 form: str) -> None:
    ran = tmp_path / "ran"
    run = script(tmp_path / "project" / "run.sh", ran, mode=0o777)
    os.chmod(run, 0o777)  # whatever the umask
    launch = {"command": "./run.sh --port {port}"} if form == "command" else {"argv": ["./run.sh", "--port", "{port}"]}
    error = refused(launchers, project(tmp_path, launch))
    assert not ran.exists()
    assert f"the program its command runs, {run}, is refused: other users may write to it" in error.message, error.message
    assert f"chmod go-w {run}" in error.message and "Nothing was started" in error.message
    assert error.fields["field"] == f"launch.{form}" and error.fields["path"] == str(run)
    os.chmod(run, 0o755)  # fixed as told: it runs
    launcher = launchers(project(tmp_path, launch))
    assert launcher.launch()["port"] and ran.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a file of another user (chown)")
def test_a_link_to_another_users_script_is_refused(tmp_path: Path, launchers: LauncherFactory) -> None:
    ran = tmp_path / "ran"
    theirs = tmp_path / "other-user"
    theirs.mkdir()
    target = script(theirs / "run.sh", ran)
    os.chown(target, NOBODY, -1)
    os.chown(theirs, NOBODY, -1)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "run.sh").symlink_to(target)
    error = refused(launchers, project(tmp_path, {"argv": ["./run.sh", "--port", "{port}"]}))
    assert not ran.exists()
    assert "the program its command runs" in error.message and "nobody (uid 65534)" in error.message, error.message


def test_an_interpreters_script_others_may_write_is_refused(tmp_path: Path, launchers: LauncherFactory) -> None:
    game = tmp_path / "project" / "game.py"
    game.parent.mkdir()
    game.write_text(GAME.read_text())
    os.chmod(game, 0o666)
    error = refused(launchers, project(tmp_path, {"argv": ["{python}", "-u", "game.py", "--port", "{port}"]}))
    assert f"the script {Path(sys.executable).name} runs, {game}, is refused" in error.message, error.message
    error = refused(launchers, project(tmp_path, {"command": "cd . && exec {python} game.py --port {port} 2>&1"}))
    assert str(game) in error.message


def test_a_script_in_a_folder_others_may_write_is_refused(tmp_path: Path, launchers: LauncherFactory) -> None:
    ran = tmp_path / "ran"
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    run = script(shared / "run.sh", ran)
    error = refused(launchers, project(tmp_path, {"command": f"sh {run} --port {{port}}"}))
    assert not ran.exists()
    assert f"in {shared}, which other users may write to" in error.message, error.message


def test_a_path_folder_others_may_write_before_the_program_is_refused(tmp_path: Path,
                                                                       launchers: LauncherFactory) -> None:
    """Anyone could plant a ``python3`` there that would run instead."""
    shared = tmp_path / "bin"
    shared.mkdir()
    os.chmod(shared, 0o777)
    os.symlink(sys.executable, tmp_path / "python-for-test")
    launch = {"command": "python-for-test " + str(GAME) + " --port {port}",
              "env": {"PATH": f"{shared}{os.pathsep}{tmp_path}"}}
    error = refused(launchers, project(tmp_path, launch))
    assert f"the folder on PATH searched for 'python-for-test', {shared}, is refused" in error.message, error.message
