"""The pytest plugin as a game project uses it: a project directory with its gamebridge.json,
a test that drives the game through the ``game`` fixture, and a recording an agent made,
run by a real ``pytest`` child process the way the project's CI would run it."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.testing import TRACE_FORMAT, GameDriver, is_recording, recordings
from game_bridge_mcp.trace.format import FORMAT
from launch_helpers import PYTHON, ProcessGuard, free_range
from mcp_harness import connect, data

pytestmark = pytest.mark.timeout(180)

VARIANT = Path(__file__).resolve().parents[1] / "peers" / "demo_variant.py"

PLAY_TEST = '''
import pytest
from game_bridge_mcp.errors import BridgeUsageError


def test_two_cherries_merge(game):
    game.click(label="Start")
    for _ in range(2):
        game.drop(x=0, until={"path": "game.moving", "equals": 0, "timeoutMs": 10000})
    assert game.get_state(summary=True)["game"]["merges"] == 1
    assert game.port in game.bridge.launched_ports()


def test_the_driver_raises_the_bridges_errors(game):
    with pytest.raises(BridgeUsageError):
        game.wait_for(path="game.moving")  # wait_for needs equals, changes or event
'''


def write_project(root: Path, variant: str = "") -> Path:
    low, high = free_range(4)
    launch: dict = {"argv": [PYTHON, str(VARIANT), "--port", "{port}", "--seed", "7", "--hz", "60"],
                    "portRange": f"{low}-{high}", "readyTimeoutMs": 20000}
    if variant:
        launch["env"] = {"DEMO_VARIANT": variant}
    root.mkdir(parents=True, exist_ok=True)
    (root / "gamebridge.json").write_text(json.dumps({"name": "Fruit Merge", "launch": launch}))
    (root / "tests" / "recordings").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "test_play.py").write_text(PLAY_TEST)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return root


def record_bug(project: Path, env: dict, target: Path) -> None:
    """An agent's session over MCP: two cherries, then a drop that the agent found odd."""
    config = Config(environ=env, registry_dir=Path(env["GAME_BRIDGE_HOME"]) / "instances", scan_range=(1,),
                    declaration=load_declaration(project / "gamebridge.json"), record=target)
    bridge = Bridge(config)

    async def agent() -> None:
        async with connect(BridgeServer(bridge)) as client:
            port = data(await client.call_tool("launch_instance", {}))["port"]

            async def play(name: str, arguments: dict) -> None:
                data(await client.call_tool("call_tool", {"port": port, "name": name, "arguments": arguments}))

            await play("click", {"label": "Start"})
            for x in (0, 0, 1):
                await play("drop", {"x": x})
                await play("wait_for", {"path": "game.moving", "equals": 0, "timeoutMs": 10000})
            await play("get_state", {"summary": True})
            data(await client.call_tool("stop_instance", {"port": port}))
    try:
        anyio.run(agent)
    finally:
        bridge.shutdown()


def run_pytest(project: Path, env: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "game_bridge_mcp.testing", "-q", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=150)


def test_the_plugin_is_registered_for_pytest() -> None:
    names = {e.name: e.value for e in importlib.metadata.entry_points(group="pytest11")}
    assert names.get("game_bridge_mcp.testing") == "game_bridge_mcp.testing"


@pytest.mark.slow
def test_a_game_projects_ci_runs_its_tests_and_its_recordings(tmp_path: Path, guard: ProcessGuard) -> None:
    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    env.pop("GAME_BRIDGE_CONFIG", None)
    env.pop("PYTEST_ADDOPTS", None)
    project = write_project(tmp_path / "fruit")
    bug = project / "tests" / "recordings" / "bug-17.trace"
    record_bug(project, env, bug)
    assert is_recording(bug) and recordings(project / "tests") == [bug]
    (project / "tests" / "recordings" / "notes.trace").write_text("a perf trace, not ours\n")

    reports = tmp_path / "reports"
    done = run_pytest(project, env, "--game-bridge-reports", str(reports))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout  # two driver tests and the one recording (notes.trace is not collected)
    assert (reports / "bug-17.trace.html").is_file()

    # The game changes its rules: the recording catches it, and says where.
    write_project(project, variant="double-score")
    done = run_pytest(project, env, "tests/recordings")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    print(done.stdout)
    # caught at the move that scored differently: its result (docs/contract.md, results) says so
    assert 'DIVERGED at step 5 of 10: drop {"x": 0}' in done.stdout
    assert "result.scoreGained\n    recorded: 3\n    replayed: 6" in done.stdout
    assert "(add more with --game-bridge-ignore PATH, or game_bridge_ignore in the pytest configuration)" in done.stdout

    # What the failure text suggests: paths left out, from the command line and from the ini file.
    done = run_pytest(project, env, "tests/recordings", "--game-bridge-ignore", "result.scoreGained")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "result.scoreGained\n    recorded" not in done.stdout and "DIVERGED at step " in done.stdout
    ignored = next(line for line in done.stdout.splitlines() if line.startswith("Ignored paths: "))
    assert ignored.endswith(", result.scoreGained (add more with --game-bridge-ignore PATH, or game_bridge_ignore "
                            "in the pytest configuration).")
    (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\ngame_bridge_ignore =\n    **.score\n")
    done = run_pytest(project, env, "tests/recordings")
    assert done.returncode == 1 and "result.scoreGained\n    recorded: 3" in done.stdout, done.stdout + done.stderr
    done = run_pytest(project, env, "tests/recordings", "--game-bridge-ignore", "result.scoreGained")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr  # neither alone is enough

    # Turned off, nothing of it is collected.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:game_bridge_mcp.testing", "tests/recordings"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 5, done.stdout + done.stderr  # no tests collected


LIGHT_TEST = '''
import sys


def test_the_plugin_is_loaded_and_light(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("game_bridge_mcp.testing")
    assert pytestconfig.getoption("game_bridge_ignore") == []
    loaded = sorted(name for name in sys.modules if name.startswith("game_bridge_mcp"))
    assert loaded == ["game_bridge_mcp", "game_bridge_mcp._version", "game_bridge_mcp.errors",
                      "game_bridge_mcp.testing"], loaded
'''


def test_a_project_that_uses_neither_the_fixture_nor_recordings_pays_for_nothing(tmp_path: Path) -> None:
    """pytest loads the plugin in every run of the environment (the entry point): there it is
    four small modules, not the bridge, the launcher and the trace reader."""
    assert TRACE_FORMAT == FORMAT  # the plugin knows a recording without importing the trace package
    (tmp_path / "test_other.py").write_text(LIGHT_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_other.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


def test_the_driver_passes_calls_through_call_tool() -> None:
    calls: list[tuple] = []

    class FakeBridge:  # the driver comes in by the Bridge's one door, run_tool
        def run_tool(self, name: str, kwargs: dict) -> dict:
            assert name == "call_tool"
            calls.append(tuple(sorted(kwargs.items(), key=lambda kv: kv[0])))
            return {"ok": True}

    driver = GameDriver(FakeBridge(), 7820)
    assert driver.drop(x=1) == {"ok": True}
    driver.call("raw_command", {"command": "noop"}, sync=False)
    assert calls == [(("arguments", {"x": 1}), ("name", "drop"), ("port", 7820)),
                     (("arguments", {"command": "noop", "sync": False}), ("name", "raw_command"), ("port", 7820))]
    with pytest.raises(AttributeError):
        driver._private  # noqa: B018
