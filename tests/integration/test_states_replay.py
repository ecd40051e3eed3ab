"""Replay from a state: an agent keeps a state mid-game, a later session restores it (and
forks from it) under --record, and the project's CI replays that recording (the state's
bytes travel beside the trace, the original file gone) and runs a test that starts from the
state through the pytest plugin's ``state=`` marker."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.testing import assert_replays
from game_bridge_mcp.trace.reader import read_trace
from launch_helpers import PYTHON, ProcessGuard
from mcp_harness import connect, data
from ports import free_range

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

MID_GAME_TEST = '''
import pytest


@pytest.mark.game_bridge(state="states/mid.gbstate")
def test_the_game_starts_mid_game(game):
    state = game.get_state(summary=True)
    assert state["paused"] is True and state["game"]["drops"] == 3 and state["simFrame"] == {frame}
    game.drop(x=2)
    assert game.advance(until={{"path": "game.moving", "equals": 0}})["game"]["drops"] == 4
'''


def project(root: Path) -> Path:
    low, high = free_range(6)
    root.mkdir(parents=True)
    (root / "gamebridge.json").write_text(json.dumps({"name": "Fruit Merge", "launch": {
        "argv": [PYTHON, "-m", "game_bridge_mcp.game.demo", "--port", "{port}", "--seed", "11", "--start",
                 "--no-register", "--hz", "120"], "portRange": f"{low}-{high}", "readyTimeoutMs": 20000}}))
    (root / "tests" / "recordings").mkdir(parents=True)
    (root / "tests" / "states").mkdir()
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return root


def session(root: Path, env: dict[str, str], body: Any, *, record: Path | None = None) -> Any:
    config = Config(environ=env, registry_dir=Path(env["GAME_BRIDGE_HOME"]) / "instances", scan_range=(1,),
                    declaration=load_declaration(root / "gamebridge.json"), record=record)
    bridge = Bridge(config)
    out: dict[str, Any] = {}

    async def main() -> None:
        async with connect(BridgeServer(bridge)) as client:
            async def call(name: str, port: int | None = None, **arguments: Any) -> Any:
                args: dict[str, Any] = {"name": name, "arguments": arguments}
                if port is not None:
                    args["port"] = port
                return data(await client.call_tool("call_tool", args))

            port = data(await client.call_tool("launch_instance", {"paused": True}))["port"]
            out.update(await body(call, port))
    try:
        anyio.run(main)
    finally:
        bridge.shutdown()
    return out


def test_a_recording_that_starts_from_a_state_replays_and_a_test_starts_mid_game(tmp_path: Path,
                                                                                   guard: ProcessGuard) -> None:
    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    env.pop("GAME_BRIDGE_CONFIG", None)
    env.pop("PYTEST_ADDOPTS", None)
    root = project(tmp_path / "fruit")

    async def keep_a_state(call: Any, port: int) -> dict[str, Any]:
        for x in (-3, 0, 3):
            await call("drop", port, x=x)
            await call("advance", port, until={"path": "game.moving", "equals": 0})
        kept = await call("save_state", port, label="three drops", keep=True)
        assert kept["kept"] is True and kept["exact"] is True
        return kept

    kept = session(root, env, keep_a_state)
    shutil.copy(kept["file"], root / "tests" / "states" / "mid.gbstate")

    trace = root / "tests" / "recordings" / "from-mid.trace"

    async def play_from_it(call: Any, port: int) -> dict[str, Any]:
        restored = await call("restore_state", port, file=kept["file"])
        assert restored["exact"] is True and restored["game"]["drops"] == 3
        await call("drop", port, x=1)
        await call("advance", port, until={"path": "game.moving", "equals": 0})
        saved = await call("save_state", port)
        forked = await call("fork_instance", state=saved["state"])
        await call("drop", forked["port"], x=-1)
        await call("advance", forked["port"], frames=40)
        return {"summary": await call("get_state", port, summary=True),
                "fork": await call("get_state", forked["port"], summary=True)}

    played = session(root, env, play_from_it, record=trace)
    assert played["summary"]["game"]["drops"] == 4 and played["fork"]["game"]["drops"] == 5
    recording = read_trace(trace)
    copies = [c.record.get("stateFile") for c in recording.calls if c.name == "restore_state"]
    assert copies and copies[0]["copy"].startswith("from-mid.trace.files/"), copies
    assert len(recording.ports()) == 1 and len(recording.forked) == 1  # the fork is made again, not launched
    Path(kept["file"]).unlink()  # the kept original is gone: the copy beside the trace is what replays

    config = Config(environ=env, registry_dir=Path(env["GAME_BRIDGE_HOME"]) / "instances", scan_range=(1,),
                    declaration=load_declaration(root / "gamebridge.json"))
    assert_replays(trace, config=config)

    (root / "tests" / "test_mid.py").write_text(MID_GAME_TEST.format(frame=kept["simFrame"]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "game_bridge_mcp.testing", "-q"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr
