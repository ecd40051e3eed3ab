"""The home and the registry folder are walked like the launch declaration (issue 38, item 13):
a home or registry reached through a folder another user may write to, or owns, is refused
with the path named, before anything is made or run there; so another user cannot swap
``<home>/pythonpath`` while a game starts and run code as you.

Another user is simulated the way root can: a folder chowned to ``nobody`` (as root), or
made writable by everyone (any user)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from game_bridge_mcp import paths
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.registry import read_registry, register_instance
from launch_helpers import LauncherFactory, write_declaration

NOBODY = 65534


def shared_folder(tmp_path: Path, name: str = "shared") -> Path:
    """A folder every user may write to, without the sticky bit (and, as root, nobody's)."""
    folder = tmp_path / name
    folder.mkdir()
    os.chmod(folder, 0o777)
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, -1)
    return folder


def planted_package(where: Path, marker: Path) -> None:
    """A ``game_bridge_mcp`` package that leaves ``marker`` behind when imported."""
    package = where / "game_bridge_mcp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")


def python_game_declaration(directory: Path, marker: Path) -> Path:
    """A declaration whose Python 'game' imports the kit (through the bridge's PYTHONPATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "gamebridge.json"
    path.write_text(json.dumps({"launch": {"argv": [sys.executable, "-c", "import game_bridge_mcp; import time; time.sleep(5)"],
                                           "portRange": "29100-29110", "readyTimeoutMs": 1500,
                                           "env": {"RAN_MARKER": str(marker)}}}))
    return path


def test_another_user_swapping_pythonpath_while_a_game_starts_is_refused_up_front(
        tmp_path: Path, launchers: LauncherFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repro: the home is under a folder another user may write to; right after the
    bridge made its private pythonpath/, that user renames it away and puts their own in
    its place, and the game imports their code as you. Now the home is refused before
    anything is made in it, naming the folder and the fix."""
    shared = shared_folder(tmp_path)
    home = shared / "home"
    planted = tmp_path / "planted-ran"
    staged = tmp_path / "theirs"
    original = paths.package_path_dir

    def swapped(*args: object, **kwargs: object) -> Path | None:
        made = original(*args, **kwargs)  # type: ignore[arg-type]
        if made is not None:  # the other user's move, between the bridge's check and the game's import
            os.rename(made, made.with_name(made.name + ".mine"))
            planted_package(staged / made.name, planted)
            os.rename(staged / made.name, made)
        return made

    monkeypatch.setattr("game_bridge_mcp.launch.launcher.package_path_dir", swapped)
    launchers.registry_dir = home / "instances"
    launcher = launchers(python_game_declaration(tmp_path / "project", tmp_path / "unused"))
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert not planted.exists(), "the other user's code ran as the bridge's user"
    message = info.value.message
    assert f"home (the folder above --registry-dir) {home} is not used" in message, message
    assert f"reached through {shared}" in message and "Fix:" in message
    assert info.value.fields["refused"] is True and info.value.fields["home"] == str(home)
    assert not home.exists(), "something was made inside the refused home"
    assert launcher.launched_ports() == []


def test_a_home_of_another_user_is_refused(tmp_path: Path, launchers: LauncherFactory,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(home, NOBODY, -1)
    else:
        real = os.geteuid()
        monkeypatch.setattr("game_bridge_mcp.ownership.my_uid", lambda: real + 1)
    launcher = launchers(write_declaration(tmp_path / "project"))
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert f"{home} is not used: it is owned by" in info.value.message and "chown" in info.value.message


def test_a_home_others_may_write_is_refused_even_with_the_sticky_bit(tmp_path: Path) -> None:
    """Others could create its pythonpath/ or locks/ before the bridge does."""
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o1777)
    refusal = paths.home_refusal({"GAME_BRIDGE_HOME": str(home)})
    assert refusal is not None and "other users may write to it" in refusal and f"chmod go-w {home}" in refusal
    # Nor does anything under it get used for files.
    assert paths.package_path_dir({"GAME_BRIDGE_HOME": str(home)}) is None
    assert paths.http_dir({"GAME_BRIDGE_HOME": str(home)}) is None
    assert paths.screenshot_dir({"GAME_BRIDGE_HOME": str(home)}) is None
    assert os.listdir(home) == []


def test_a_home_under_a_sticky_shared_folder_is_fine_when_the_name_is_yours(tmp_path: Path) -> None:
    """Like /tmp: others may write to the folder, but not replace a name of yours in it."""
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    env = {"GAME_BRIDGE_HOME": str(sticky / "home")}
    assert paths.home_refusal(env) is None
    made = paths.package_path_dir(env)
    assert made is not None and (made / "game_bridge_mcp").is_symlink()
    assert oct(os.stat(sticky / "home").st_mode & 0o777) == oct(0o700)
    if os.geteuid() == 0:  # someone else's name in the sticky folder: refused
        os.chown(sticky / "home", NOBODY, -1)
        refusal = paths.home_refusal(env)
        assert refusal is not None and "owned by nobody" in refusal


def test_the_home_default_and_variables_name_their_source(tmp_path: Path) -> None:
    shared = shared_folder(tmp_path)
    for env, source in (({"GAME_BRIDGE_HOME": str(shared / "h")}, "GAME_BRIDGE_HOME"),
                        ({"GAME_BRIDGE_INSTANCES": str(shared / "h" / "i")}, "the folder above GAME_BRIDGE_INSTANCES"),
                        ({"HOME": str(shared)}, "the default home")):
        refusal = paths.home_refusal(env)
        assert refusal is not None and f"({source})" in refusal and str(shared) in refusal, refusal
    assert paths.home_refusal({"GAME_BRIDGE_HOME": str(tmp_path / "mine")}) is None


def test_a_planted_link_at_pythonpath_is_not_followed(tmp_path: Path) -> None:
    """A link where the private folder goes is never written through: a private folder
    elsewhere is used, and the link's target is left as it was."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "pythonpath").symlink_to(elsewhere)
    made = paths.package_path_dir({"GAME_BRIDGE_HOME": str(home)})
    assert made is not None and not str(made).startswith(str(home / "pythonpath"))
    assert os.listdir(elsewhere) == []
    # (a private folder of the user's in the temporary directory; the test's own)
    assert paths.home_refusal({"GAME_BRIDGE_HOME": str(home)}) is None


# --------------------------------------------------------------------------- the registry folder

def test_a_registry_folder_another_user_controls_is_neither_read_nor_written(tmp_path: Path) -> None:
    shared = shared_folder(tmp_path)
    registry = shared / "instances"
    registry.mkdir()
    (registry / f"{os.getpid()}.json").write_text(json.dumps(
        {"port": 7777, "pid": os.getpid(), "name": "Planted", "host": "127.0.0.1"}))
    scan = read_registry(registry)
    assert scan.entries == [] and scan.note is not None and f"registry folder {registry} is not used" in scan.note
    assert [problem.path for problem in scan.problems] == [registry]
    assert register_instance(port=7778, name="Mine", version="1", directory=registry, remove_at_exit=False) is None
    assert sorted(os.listdir(registry)) == [f"{os.getpid()}.json"]


def test_the_kit_does_not_make_its_registry_inside_a_folder_others_control(tmp_path: Path) -> None:
    shared = shared_folder(tmp_path)
    assert register_instance(port=7778, name="Mine", version="1", directory=shared / "home" / "instances",
                             remove_at_exit=False) is None
    assert os.listdir(shared) == []
    mine = register_instance(port=7778, name="Mine", version="1", directory=tmp_path / "own" / "instances",
                             remove_at_exit=False)
    assert mine is not None and mine.path.is_file()
    mine.path.unlink()
