"""docs/clients.md's examples run as a reader would run them, in a directory with the demo's
declaration (its range one port the OS gives): ``examples/connect.py`` with this environment's
MCP SDK (CI runs the suite once per SDK major, so both run it), and ``examples/connect.mjs``
with the official TypeScript SDK (installed from npm by ts_helpers, as the TypeScript client
tests do). Each must launch the game, play, and stop it."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from launch_helpers import ProcessGuard
from ports import free_port
from ts_helpers import installed, node

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def project(tmp_path: Path, guard: ProcessGuard) -> tuple[Path, dict[str, str], int]:
    env = {k: v for k, v in guard.env.items() if not k.startswith("GAME_BRIDGE_")}
    env["GAME_BRIDGE_HOME"] = str(tmp_path / "home")
    where = tmp_path / "game"
    where.mkdir()
    done = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "demo", "--init"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads((where / "gamebridge.json").read_text())
    port = free_port()
    doc["launch"]["portRange"] = f"{port}-{port}"
    (where / "gamebridge.json").write_text(json.dumps(doc))
    return where, env, port


def check_session(out: str, port: int) -> None:
    lines = out.strip().splitlines()
    assert lines[0] == f"Fruit Merge is up on port {port}", out
    drops = [line for line in lines if line.startswith("drop at x=1: ")]
    assert len(drops) == 2 and all('"framesToSettle"' in d or "'framesToSettle'" in d for d in drops), out
    assert re.fullmatch(r"score: \d+", lines[-2]) and lines[-1] == "stopped: closed cleanly", out


def test_the_pages_python_is_the_example_files() -> None:
    page = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    shown = page.split("```python\n", 1)[1].split("```", 1)[0]
    assert shown in (EXAMPLES / "connect.py").read_text(encoding="utf-8")


def test_the_python_example_runs_on_this_sdk_major(tmp_path: Path, guard: ProcessGuard) -> None:
    where, env, port = project(tmp_path, guard)
    done = subprocess.run([sys.executable, str(EXAMPLES / "connect.py")], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)
    sdk = importlib.metadata.version("mcp")
    assert done.returncode == 0, f"mcp {sdk}: {done.stdout}{done.stderr}"
    check_session(done.stdout, port)


def test_the_typescript_example_runs_with_the_official_sdk(tmp_path: Path, guard: ProcessGuard) -> None:
    where, env, port = project(tmp_path, guard)
    script = where / "connect.mjs"  # beside the SDK's node_modules, as in a reader's project
    script.write_text((EXAMPLES / "connect.mjs").read_text(encoding="utf-8"))
    os.symlink(installed("sdk") / "node_modules", where / "node_modules")
    env["GAME_BRIDGE_COMMAND"] = str(Path(sys.executable).parent / "game-bridge-mcp")
    done = subprocess.run([node(), str(script)], cwd=where, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    check_session(done.stdout, port)
