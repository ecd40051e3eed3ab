"""A declaration for a Python game names no path of this machine ({python}), and a
launched Python game imports the bridge's own package whatever its own environment has:
rendering, the private PYTHONPATH directory, and real launches from an interpreter whose
environment lacks the package."""

from __future__ import annotations

import json
import os
import shlex
import sys
import venv
from pathlib import Path

import pytest

from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch import declaration as declaration_module
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.launch.instance import missing_module_advice
from game_bridge_mcp.paths import PACKAGE_DIR, package_path_dir

from launch_helpers import LauncherFactory, free_range


def declare(directory: Path, launch: dict[str, object]) -> Path:
    path = directory / "gamebridge.json"
    path.write_text(json.dumps({"name": "Py", "launch": launch}))
    return path


def test_python_placeholder_is_the_bridges_interpreter(tmp_path: Path) -> None:
    decl = load_declaration(declare(tmp_path, {"argv": ["{python}", "-m", "game", "--port", "{port}"],
                                               "extraArgs": ["--py={python}"], "env": {"GAME_PY": "{python}"}}))
    assert decl.render(7821) == ([sys.executable, "-m", "game", "--port", "7821", f"--py={sys.executable}"], False)
    assert decl.render_env(7821) == {"GAME_PY": sys.executable}
    assert decl.hint() == shlex.join([sys.executable, "-m", "game", "--port", "PORT", f"--py={sys.executable}"]
                                     ).replace("PORT", "{port}")


def test_python_placeholder_in_a_shell_line_is_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    odd = str(tmp_path / "my env" / "bin" / "python")
    monkeypatch.setattr(declaration_module.sys, "executable", odd)
    decl = load_declaration(declare(tmp_path, {"command": "{python} game.py --port {port}"}))
    line, shell = decl.render(7822)
    assert shell and line == f"{shlex.quote(odd)} game.py --port 7822"
    assert shlex.split(line)[0] == odd
    assert decl.hint() == f"{shlex.quote(odd)} game.py --port {{port}}"


def test_python_placeholder_without_a_known_interpreter_says_what_to_do(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(declaration_module.sys, "executable", "")
    decl = load_declaration(declare(tmp_path, {"argv": ["{python}", "game.py"]}))
    with pytest.raises(BridgeUsageError, match=r"sys.executable is empty.*launch.argv"):
        decl.render(7823)
    plain = load_declaration(declare(tmp_path, {"argv": ["python3", "game.py"]}))
    assert plain.render(7823) == (["python3", "game.py"], False)  # only a declaration that asks needs it


def test_package_path_dir_holds_only_a_link_to_the_package(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "GAME_BRIDGE_HOME": str(tmp_path / "gb")}
    directory = package_path_dir(environ)
    assert directory is not None and directory.parent == tmp_path / "gb" / "pythonpath"
    assert os.listdir(directory) == ["game_bridge_mcp"]
    assert os.readlink(directory / "game_bridge_mcp") == str(PACKAGE_DIR)
    assert (directory.stat().st_mode & 0o777) == 0o700
    assert package_path_dir(environ) == directory  # the same copy: the same directory, the link kept

    other = tmp_path / "elsewhere" / "game_bridge_mcp"
    other.mkdir(parents=True)
    second = package_path_dir(environ, package=other)
    assert second is not None and second != directory  # another install never repoints this one's link
    assert os.readlink(directory / "game_bridge_mcp") == str(PACKAGE_DIR)

    stale = second / "game_bridge_mcp"
    stale.unlink()
    stale.symlink_to(tmp_path)  # pointing somewhere else: repointed
    assert package_path_dir(environ, package=other) == second and os.readlink(stale) == str(other)
    stale.unlink()
    stale.mkdir()  # not a link at all: left alone, and no directory is offered
    assert package_path_dir(environ, package=other) is None and stale.is_dir()


@pytest.fixture
def bare_python(tmp_path: Path) -> str:
    """An interpreter whose environment lacks game_bridge_mcp (and everything else)."""
    target = tmp_path / "bare-venv"
    venv.create(target, with_pip=False)
    python = str(target / "bin" / "python")
    import subprocess

    probe = subprocess.run([python, "-c", "import game_bridge_mcp"], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, cwd=tmp_path)
    assert probe.returncode != 0 and "No module named 'game_bridge_mcp'" in probe.stderr
    return python


def _bare_launcher(launchers: LauncherFactory, tmp_path: Path, python: str, **launch: object):  # noqa: F811
    low, high = free_range(2)
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    decl = declare(project, {"argv": [python, "-m", "game_bridge_mcp.game.demo", "--port", "{port}", "--hz", "200"],
                             "portRange": f"{low}-{high}", "readyTimeoutMs": 30000, **launch})
    launchers.guard.env.pop("PYTHONPATH", None)
    return launchers(decl)


def test_a_game_whose_environment_lacks_the_package_imports_the_bridges(
        launchers: LauncherFactory, tmp_path: Path, bare_python: str) -> None:  # noqa: F811
    launcher = _bare_launcher(launchers, tmp_path, bare_python)
    started = launcher.launch()
    assert started["name"] == "Fruit Merge"
    stopped = launcher.stop(started["port"], grace_ms=3000)
    assert stopped["how"] == "closed cleanly"


def test_a_declared_pythonpath_is_the_projects_and_a_failed_import_says_what_to_install(
        launchers: LauncherFactory, tmp_path: Path, bare_python: str) -> None:  # noqa: F811
    launcher = _bare_launcher(launchers, tmp_path, bare_python, env={"PYTHONPATH": str(tmp_path / "nothing")})
    with pytest.raises(BridgeUsageError) as caught:
        launcher.launch()
    message = caught.value.render()
    assert "Launch failed on port" in message and "No module named 'game_bridge_mcp'" in message
    assert "What to do: the game's Python cannot import game_bridge_mcp" in message
    assert "{python}" in message and "pip install" in message
    assert caught.value.to_dict()["advice"].startswith("the game's Python cannot import game_bridge_mcp")


def test_missing_module_advice_names_pygame_ce_and_nothing_for_other_failures() -> None:
    advice = missing_module_advice(["Traceback (most recent call last):", "ModuleNotFoundError: No module named 'pygame'"])
    assert advice is not None and "pip install pygame-ce" in advice and "pipx inject game-bridge-mcp pygame-ce" in advice
    assert missing_module_advice(["ModuleNotFoundError: No module named 'pygame.locals'"]) == advice
    assert missing_module_advice(["ModuleNotFoundError: No module named 'numpy'"]) is None
    assert missing_module_advice(["Error: the level file is missing"]) is None
    assert missing_module_advice([]) is None
