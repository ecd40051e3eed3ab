"""The README's client configurations, each read from the page and started as its client would
start it: the command, its arguments, environment and working directory, over stdio, with the
Python SDK's client. Each must answer MCP, launch the project's game and stop it.

The project is a scratch game directory with the demo's declaration (on a port the OS gives).
``/path/to/game-bridge-mcp`` is this checkout, ``/path/to/your/game`` and ``${workspaceFolder}``
the project, and ``uvx`` the one the test extra installs (uv, from PyPI); it builds the package
from the checkout, as a newcomer's first use would, the first time into uv's cache. The vendored
configuration runs a copy of ``game_bridge_mcp/`` in the project, and the test checks that it is
that copy which serves. Clients that start a server in the project directory (Claude Code,
Cursor, VS Code) are started there; Claude Desktop and the vendored copy are started somewhere
else, as their configurations must cope with.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from launch_helpers import ProcessGuard
from ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK = re.compile(r"<!-- client config: (?P<name>[a-z-]+) -->\n(?:<!--[^\n]*-->\n)?```(?P<lang>\w+)\n(?P<body>.*?)\n```",
                   re.S)
#: Each client, and whether it starts a server in the project's directory.
CLIENTS = {"claude-code": True, "cursor": True, "vscode": True, "claude-desktop": False, "vendored": False}


def configs() -> dict[str, tuple[str, str]]:
    found = {m["name"]: (m["lang"], m["body"]) for m in BLOCK.finditer(README.read_text(encoding="utf-8"))}
    assert set(found) == set(CLIENTS), f"the README's client configurations are {sorted(found)}"
    return found


def server_entry(name: str, lang: str, body: str) -> dict[str, Any]:
    """The configuration's server, as ``{command, args, env, cwd}`` (what the client reads)."""
    if lang == "bash":  # claude mcp add NAME [options] -- COMMAND ARGS...
        words = shlex.split(body)
        assert words[:4] == ["claude", "mcp", "add", "game-bridge"] and "--" in words, body
        command, *args = words[words.index("--") + 1:]
        return {"command": command, "args": args}
    doc = json.loads(body)
    servers = doc["servers"] if name == "vscode" else doc["mcpServers"]
    assert list(servers) == ["game-bridge"], body
    entry = dict(servers["game-bridge"])
    if name == "vscode":
        assert entry.pop("type") == "stdio"
    return entry


def fill(value: Any, project: Path) -> Any:
    if isinstance(value, str):
        return (value.replace("/path/to/game-bridge-mcp", str(ROOT)).replace("/path/to/your/game", str(project))
                .replace("${workspaceFolder}", str(project)))
    if isinstance(value, list):
        return [fill(v, project) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, project) for k, v in value.items()}
    return value


def make_project(root: Path, env: dict[str, str]) -> Path:
    """A game directory with the demo's declaration, its range one port the OS gives."""
    project = root / "game"
    project.mkdir()
    done = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "demo", "--init"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads((project / "gamebridge.json").read_text())
    port = free_port()
    doc["launch"]["portRange"] = f"{port}-{port}"
    (project / "gamebridge.json").write_text(json.dumps(doc))
    return project


async def drive(params: StdioServerParameters) -> dict[str, Any]:
    """Connect, list the tools, launch the game, stop it: what each answered."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = sorted(t.name for t in (await session.list_tools()).tools)

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = (await session.call_tool(name, arguments)).model_dump(by_alias=True, exclude_none=True)
            assert not result.get("isError"), result["content"][0]["text"]
            answer: dict[str, Any] = result["structuredContent"]
            return answer

        launched = await call("launch_instance", {})
        stopped = await call("stop_instance", {"port": launched["port"]})
        return {"tools": tools, "launched": launched, "stopped": stopped}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_readmes_client_configuration_starts_a_working_server(client: str, tmp_path: Path,
                                                                  guard: ProcessGuard) -> None:
    lang, body = configs()[client]
    entry = server_entry(client, lang, body)
    venv_bin = str(Path(sys.executable).parent)
    base = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"),
                PATH=os.pathsep.join([venv_bin, guard.env.get("PATH", "")]))
    for key in [k for k in base if k.startswith("GAME_BRIDGE_") and k != "GAME_BRIDGE_HOME"] + ["PYTHONPATH"]:
        base.pop(key, None)
    project = make_project(tmp_path, base)
    entry = fill(entry, project)
    assert set(entry) <= {"command", "args", "env", "cwd"}, entry
    if client == "vendored":
        shutil.copytree(ROOT / "game_bridge_mcp", project / "game_bridge_mcp",
                        ignore=shutil.ignore_patterns("__pycache__"))
    elif entry["command"] == "uvx":
        assert shutil.which("uvx", path=base["PATH"]), "uv (the test extra's) is not installed"
        base["UV_NO_PROGRESS"] = "1"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cwd = entry.get("cwd") or str(project if CLIENTS[client] else elsewhere)
    env = {**base, **entry.get("env", {})}
    command = shutil.which(entry["command"], path=env["PATH"])
    assert command, f"{entry['command']} is not on PATH"
    params = StdioServerParameters(command=command, args=entry.get("args", []), env=env, cwd=cwd)
    answers = anyio.run(drive, params)
    assert {"launch_instance", "list_instances", "call_tool", "stop_instance"} <= set(answers["tools"])
    declared = json.loads((project / "gamebridge.json").read_text())["launch"]["portRange"]
    assert f"{answers['launched']['port']}-{answers['launched']['port']}" == declared
    assert answers["launched"]["name"] == "Fruit Merge"
    assert answers["stopped"]["how"] == "closed cleanly"
    if client == "vendored":  # it was the copy that served, and it kept what it wrote in the project
        assert (project / ".game-bridge" / "instances").is_dir() and (project / ".game-bridge" / "logs").is_dir()
        assert not (tmp_path / "home").exists()


def test_a_vendored_copys_hints_name_python_m_and_the_installed_ones_the_command(tmp_path: Path) -> None:
    """A vendored copy has no ``game-bridge-mcp`` command: what it tells its user to run next
    starts the module instead, with the interpreter that runs it."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "game_bridge_mcp", repo / "game_bridge_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GAME_BRIDGE_")}
    env["GAME_BRIDGE_HOME"] = str(tmp_path / "home")
    which = subprocess.run([sys.executable, "-c", "import game_bridge_mcp; print(game_bridge_mcp.__file__)"],
                           cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert which.stdout.strip() == str(repo / "game_bridge_mcp" / "__init__.py")  # the copy, not the install
    vendored = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "demo", "--init"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=60)
    assert vendored.returncode == 0, vendored.stderr
    module = f"{Path(sys.executable).name} -m game_bridge_mcp"
    assert f"  {module} call launch_instance --keep    (then: {module} call close --port <port>)" in vendored.stdout
    assert f"claude mcp add game-bridge -- {module})" in vendored.stdout
    assert "game-bridge-mcp call" not in vendored.stdout
    installed = subprocess.run([str(Path(sys.executable).parent / "game-bridge-mcp"), "demo", "--init", "--force"],
                               cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    assert "  game-bridge-mcp call launch_instance --keep" in installed.stdout
    assert "claude mcp add game-bridge -- game-bridge-mcp)" in installed.stdout
