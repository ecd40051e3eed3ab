"""The official TypeScript MCP clients in the tests: ``@modelcontextprotocol/sdk`` (1.x, what
most TypeScript clients and the MCP Inspector are built on) and ``@modelcontextprotocol/client``
(2.x, which speaks 2026-07-28), installed from the npm registry by the test set-up itself
(``npm install``, once, into a cache folder, as the published web games are), and driven by
``ts_client.mjs`` with Node. Without Node, npm or the registry these tests fail, saying so,
rather than skip. The cache is ``~/.cache/game-bridge-tests/npm`` (or
``$GAME_BRIDGE_TEST_CACHE/npm``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

DRIVER = Path(__file__).resolve().parent / "ts_client.mjs"
CACHE = Path(os.environ.get("GAME_BRIDGE_TEST_CACHE") or Path.home() / ".cache" / "game-bridge-tests") / "npm"
#: The client packages, pinned: flavor -> (package, version).
PACKAGES = {"sdk": ("@modelcontextprotocol/sdk", "1.32.2"), "client": ("@modelcontextprotocol/client", "2.4.0")}
#: What the newer client package needs (its package.json's engines).
NODE_FOR_CLIENT = 20


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("these tests drive the bridge with the TypeScript MCP clients and need Node.js: "
                    "apt-get install -y nodejs npm")
    return found


def installed(flavor: str) -> Path:
    """The npm folder holding the flavor's package, installed once into the cache."""
    name, version = PACKAGES[flavor]
    root = CACHE / f"{name.replace('/', '+')}-{version}"
    marker = root / "node_modules" / name / "package.json"
    if marker.is_file():
        return root
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"these tests install {name} from the npm registry and need npm: apt-get install -y npm")
    scratch = CACHE / f".{root.name}-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    (scratch / "package.json").write_text('{"private": true}\n')
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", f"{name}@{version}"],
                          capture_output=True, text=True, timeout=300, cwd=scratch)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        pytest.fail(f"npm install {name}@{version} failed (the npm registry must be reachable): {done.stderr[-800:]}")
    if root.exists() and not marker.is_file():
        shutil.rmtree(root, ignore_errors=True)  # a run that stopped half-way
    try:
        os.replace(scratch, root)
    except OSError:  # another run installed it meanwhile
        shutil.rmtree(scratch, ignore_errors=True)
        if not marker.is_file():
            raise
    return root


def node_major() -> int:
    done = subprocess.run([node(), "--version"], capture_output=True, text=True, timeout=30)
    return int(done.stdout.strip().lstrip("v").split(".")[0] or 0)


def run_client(flavor: str, transport: dict[str, Any], steps: list[dict[str, Any]], *,
               negotiation: str = "legacy", timeout_s: float = 240, fatal_ok: bool = False) -> dict[str, Any]:
    """Connect the flavor's client over ``transport``, list the tools, run ``steps``; its
    report (see ts_client.mjs). A fatal error (no connection) fails the test, unless
    ``fatal_ok``."""
    if flavor == "client" and node_major() < NODE_FOR_CLIENT:
        pytest.fail(f"@modelcontextprotocol/client needs Node.js {NODE_FOR_CLIENT} or newer")
    plan = {"root": str(installed(flavor)), "flavor": flavor, "negotiation": negotiation,
            "transport": transport, "steps": steps}
    done = subprocess.run([node(), str(DRIVER)], input=json.dumps(plan), capture_output=True, text=True,
                          timeout=timeout_s)
    assert done.returncode == 0, f"the TypeScript client failed: {done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    assert fatal_ok or "fatal" not in report, f"the TypeScript client could not connect: {report['fatal']}\n{done.stderr[-3000:]}"
    report["stderr"] = done.stderr
    return report


def text_of(step: dict[str, Any]) -> str:
    """A step's first text block (its head when it was long)."""
    assert step["ok"], f"the client threw: {step.get('error')}"
    block = step["result"]["content"][0]
    return str(block.get("text", block.get("head", "")))


def answer_of(step: dict[str, Any]) -> Any:
    """A successful step's answer, from its text."""
    assert step["ok"], f"the client threw: {step.get('error')}"
    assert not step["result"]["isError"], text_of(step)
    return json.loads(text_of(step))
