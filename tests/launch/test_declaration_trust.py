"""The launch declaration is code: only the project's own is found, and one another user
could have written is refused, never run, never shown as a launch hint.

Real files and directories; ownership is changed for real when the test runs as root,
and otherwise the check is asked on behalf of another uid (which is what "owned by
someone else" means from where the bridge stands)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import BridgeUsageError, GameOffline
from game_bridge_mcp.launch import trust
from game_bridge_mcp.launch.declaration import apply_project_config, find_declaration, load_declaration

NOBODY = 65534


def plant(directory: Path, marker: Path | None = None) -> Path:
    """A declaration whose command, if it ever ran, would leave ``marker`` behind."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "gamebridge.json"
    command = f"touch {marker} && sleep 5" if marker else "true"
    path.write_text(json.dumps({"name": "Planted", "launch": {"command": command, "readyTimeoutMs": 2000}}))
    return path


def owned_by_someone_else(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``path`` another user's: really (root), or by asking as another uid."""
    if os.geteuid() == 0:
        os.chown(path, NOBODY, -1)
    else:
        real = os.geteuid()
        monkeypatch.setattr(trust, "my_uid", lambda: real + 1)


# --------------------------------------------------------------------------- the walk-up

@pytest.mark.parametrize("marker", [".git", ".hg", ".git-file"])
def test_the_walk_up_stops_at_the_repository_root(tmp_path: Path, marker: str) -> None:
    outer = tmp_path / "outer"
    plant(outer)  # above the repository: somebody else's, or nobody's
    repo = outer / "repo"
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    if marker == ".git-file":  # a worktree or submodule: .git is a file
        (repo / ".git").write_text("gitdir: /elsewhere\n")
    else:
        (repo / marker).mkdir()
    assert find_declaration(sub, home=tmp_path / "home") is None
    config = apply_project_config(Config(environ={"HOME": str(tmp_path / "home")}), cwd=sub, defer=True)
    assert config.declaration is None and config.declaration_error is None and config.declaration_hint is None
    own = plant(repo)  # the repository root's own file is the project's
    assert find_declaration(sub, home=tmp_path / "home") == own


def test_the_walk_up_stops_at_the_home_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "games" / "mine"
    project.mkdir(parents=True)
    plant(tmp_path)  # above home
    assert find_declaration(project, home=home) is None
    assert apply_project_config(Config(environ={"HOME": str(home)}), cwd=project).declaration is None
    own = plant(home)
    assert find_declaration(project, home=home) == own


# --------------------------------------------------------------------------- ownership

def test_a_declaration_owned_by_another_user_is_refused_naming_file_owner_and_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = plant(tmp_path / "project")
    owned_by_someone_else(path, monkeypatch)
    with pytest.raises(BridgeUsageError) as info:
        load_declaration(path)
    message = info.value.message
    assert str(path) in message and "owned by" in message and "Fix:" in message and "chown" in message
    if os.geteuid() == 0:
        assert f"uid {NOBODY}" in message
    assert info.value.fields["refused"] is True


def test_an_explicit_config_gets_the_same_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = plant(tmp_path / "project")
    owned_by_someone_else(path, monkeypatch)
    with pytest.raises(BridgeUsageError, match="owned by"):
        apply_project_config(Config(environ={}, config_file=path), defer=True)


def test_a_declaration_others_may_write_is_refused(tmp_path: Path) -> None:
    path = plant(tmp_path / "project")
    path.chmod(0o666)
    with pytest.raises(BridgeUsageError, match="other users may write to it"):
        load_declaration(path)
    path.chmod(0o644)
    assert load_declaration(path).name == "Planted"


def test_a_declaration_in_a_shared_directory_without_sticky_bit_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    path = plant(shared)
    shared.chmod(0o777)
    with pytest.raises(BridgeUsageError) as info:
        load_declaration(path)
    assert str(shared) in info.value.message and "sticky" in info.value.message and "chmod go-w" in info.value.message
    shared.chmod(0o1777)  # like /tmp: only a file's owner may replace it
    assert load_declaration(path).name == "Planted"
    if os.geteuid() == 0:  # a group with other members in it is "other users" too
        shared.chmod(0o775)
        os.chown(shared, -1, NOBODY)
        with pytest.raises(BridgeUsageError, match="sticky"):
            load_declaration(path)
    shared.chmod(0o755)
    assert load_declaration(path).name == "Planted"


def test_a_symlinked_declaration_is_checked_where_it_really_lives(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    real = plant(shared)
    shared.chmod(0o777)
    project = tmp_path / "project"
    project.mkdir()
    (project / "gamebridge.json").symlink_to(real)
    with pytest.raises(BridgeUsageError, match="sticky"):
        load_declaration(project / "gamebridge.json")
    shared.chmod(0o755)


def test_a_refused_declaration_is_neither_run_nor_a_launch_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = tmp_path / "planted-ran"
    project = tmp_path / "project"
    path = plant(project, marker=ran)
    owned_by_someone_else(path, monkeypatch)
    config = apply_project_config(Config(environ={"HOME": str(tmp_path)}, port=1), cwd=project, defer=True)
    assert config.declaration is None and config.declaration_hint is None
    assert config.declaration_error is not None and "owned by" in config.declaration_error.message
    bridge = Bridge(config)
    try:
        with pytest.raises(GameOffline) as offline:
            bridge.run_tool("call_tool", {"port": 1, "name": "get_state"})
        assert "touch" not in offline.value.message and str(ran) not in offline.value.message
        with pytest.raises(BridgeUsageError, match="owned by"):
            bridge.run_tool("launch_instance", {})
    finally:
        bridge.shutdown()
    assert not ran.exists()


def test_a_private_project_is_trusted(tmp_path: Path) -> None:
    path = plant(tmp_path / "project")
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o022 == 0
    trust.check_trusted(path)
    assert load_declaration(path).command == "true"


# --------------------------------------------------------------------------- the whole way to it

def test_a_link_chain_through_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    """project/gamebridge.json -> shared/hop.json -> mine/gamebridge.json: the file and both
    ends' folders are private, but whoever may write in shared/ chooses where hop.json points."""
    real = plant(tmp_path / "mine")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "hop.json").symlink_to(real)
    shared.chmod(0o777)
    project = tmp_path / "project"
    project.mkdir()
    (project / "gamebridge.json").symlink_to(shared / "hop.json")
    with pytest.raises(BridgeUsageError) as info:
        load_declaration(project / "gamebridge.json")
    assert str(shared / "hop.json") in info.value.message and "chmod go-w" in info.value.message
    shared.chmod(0o755)
    assert load_declaration(project / "gamebridge.json").name == "Planted"


def test_a_private_folder_inside_one_others_may_write_is_refused(tmp_path: Path) -> None:
    """shared/project/gamebridge.json with project/ private: shared/project itself can be
    renamed away and replaced by anyone who may write in shared/."""
    shared = tmp_path / "shared"
    path = plant(shared / "project")
    shared.chmod(0o777)
    with pytest.raises(BridgeUsageError) as info:
        load_declaration(path)
    assert f"reached through {shared / 'project'}, in {shared}" in info.value.message
    shared.chmod(0o1777)  # sticky: only the name's owner (you) may rename it
    assert load_declaration(path).name == "Planted"


def test_a_link_owned_by_another_user_on_the_way_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = plant(tmp_path / "mine")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "mine")
    if os.geteuid() == 0:
        os.chown(link, NOBODY, -1, follow_symlinks=False)
        with pytest.raises(BridgeUsageError, match=f"symbolic link {link}, owned by"):
            load_declaration(link / "gamebridge.json")
    else:  # every name is another uid's as far as the check knows: refused on the way too
        owned_by_someone_else(real, monkeypatch)
        with pytest.raises(BridgeUsageError, match="owned by"):
            load_declaration(link / "gamebridge.json")
        monkeypatch.undo()
    os.unlink(link)
    link.symlink_to(tmp_path / "mine")
    assert load_declaration(link / "gamebridge.json").name == "Planted"


def test_a_folder_of_another_user_on_the_way_is_refused(tmp_path: Path) -> None:
    """Its owner may swap what it holds, however private the file and its own folder are.
    (Giving a folder away takes root, as the suite runs in CI; as another user the file's
    own owner check refuses first, see the link test above.)"""
    theirs = tmp_path / "theirs"
    real = plant(theirs / "project")
    if os.geteuid() == 0:
        os.chown(theirs, NOBODY, -1)
        with pytest.raises(BridgeUsageError, match=f"reached through {theirs}, owned by"):
            load_declaration(real)
        os.chown(theirs, 0, -1)
    assert load_declaration(real).name == "Planted"


def test_the_cli_refuses_a_declaration_reached_through_a_shared_link_and_never_runs_it(tmp_path: Path) -> None:
    ran = tmp_path / "planted-ran"
    real = plant(tmp_path / "mine", marker=ran)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "hop.json").symlink_to(real)
    shared.chmod(0o777)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "gamebridge.json").symlink_to(shared / "hop.json")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", "launch_instance", "--keep",
                          "--config", str(tmp_path / "project" / "gamebridge.json")],
                         capture_output=True, text=True, env=env, cwd=tmp_path / "project", timeout=60)
    assert out.returncode == 2 and "is not used" in out.stderr and str(shared / "hop.json") in out.stderr, out.stderr
    assert not ran.exists()
