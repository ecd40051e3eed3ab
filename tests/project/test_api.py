"""The public API: names importable from the package, the Bridge driven without a socket
through an injected opener, and docs/api.md's composite example run as a real server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

import game_bridge_mcp
from peers.fakegame import DEFAULT_MANIFEST, FakeGame
from game_bridge_mcp import (Bridge, BridgeUsageError, CommandTimeout, Composite, GameClient, GameOffline,
                             HttpResponse, NotAGameSurface, TransportError, apply_project_config,
                             normalise_manifest, parse_cli, read_registry)

ROOT = Path(__file__).resolve().parents[2]


def test_public_names() -> None:
    for name in ("Bridge", "GameClient", "Launcher", "read_registry", "normalise_manifest", "parse_cli",
                 "apply_project_config", "start_stdio_server", "Composite", "BridgeError", "BridgeUsageError",
                 "GameOffline", "NotAGameSurface", "CommandTimeout", "__version__"):
        assert getattr(game_bridge_mcp, name) is not None, name
    assert callable(read_registry) and callable(normalise_manifest) and callable(apply_project_config)


def test_every_error_type_is_importable_from_the_package_as_docs_api_says() -> None:
    import inspect

    from game_bridge_mcp import errors

    raised = {name for name, value in vars(errors).items()
              if inspect.isclass(value) and issubclass(value, errors.BridgeError)}
    assert {"CommandFailed", "CommandRejected", "GamePaused", "ScreenshotUnavailable", "ClockBroken"} <= raised
    for name in raised:
        assert getattr(game_bridge_mcp, name) is getattr(errors, name) and name in game_bridge_mcp.__all__, name
    assert "the error types" in (ROOT / "docs" / "api.md").read_text()


def test_the_lazy_names_are_declared_to_type_checkers_as_the_modules_they_come_from() -> None:
    """``from game_bridge_mcp import Bridge`` is ``Bridge`` to mypy and pyright, not ``Any``: each
    lazily imported name has its ``TYPE_CHECKING`` import, from the module it is loaded from."""
    import ast

    tree = ast.parse((ROOT / "game_bridge_mcp" / "__init__.py").read_text())
    declared: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.dump(stmt)
                for alias in stmt.names:
                    assert alias.asname == alias.name  # "X as X": an explicit re-export
                    declared[alias.name] = "." * stmt.level + (stmt.module or "")
    lazy = game_bridge_mcp._LAZY  # type: ignore[attr-defined]
    assert declared == lazy
    assert set(lazy) <= set(game_bridge_mcp.__all__)
    assert set(game_bridge_mcp.__all__) <= set(dir(game_bridge_mcp))
    for name in game_bridge_mcp.__all__:
        assert getattr(game_bridge_mcp, name) is not None, name


def test_import_does_not_need_the_sdk() -> None:
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mcp' or name.startswith('mcp.'): raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import game_bridge_mcp, game_bridge_mcp.core.bridge, game_bridge_mcp.cli.main, game_bridge_mcp.cli.call\n"
            "from game_bridge_mcp import Bridge, GameClient, Launcher, Composite\n"
            "print('ok', 'mcp' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "ok False", out.stderr


class SocketlessGame:
    """A game simulated inside the opener: no socket anywhere."""

    def __init__(self) -> None:
        self.frame = 100
        self.completed = 0
        self.next_id = 0
        self.queue: list[tuple[int, str, dict]] = []
        self.score = 0
        self.urls: list[str] = []

    def tick(self) -> None:
        self.frame += 1
        for cid, cmd, _args in self.queue:
            if cmd == "drop":
                self.score += 10
            self.completed = cid
        self.queue.clear()

    def __call__(self, url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        self.urls.append(url)
        parts = urllib.parse.urlsplit(url)
        if parts.port == 9:
            raise TransportError("refused", "nothing here")
        self.tick()  # the game loop runs between requests
        if parts.path == "/health":
            body: Any = {"ok": True, "frame": self.frame}
        elif parts.path == "/state":
            body = {"frame": self.frame, "completedCommandId": self.completed, "game": {"score": self.score}}
        elif parts.path == "/tools":
            body = DEFAULT_MANIFEST
        elif parts.path == "/command":
            query = dict(urllib.parse.parse_qsl(parts.query))
            self.next_id += 1
            self.queue.append((self.next_id, query.pop("cmd"), query))
            body = {"accepted": True, "commandId": self.next_id, "frame": self.frame}
        else:
            return HttpResponse(404, b"{}")
        return HttpResponse(200, json.dumps(body).encode())


def test_the_bridge_without_a_socket() -> None:
    game = SocketlessGame()
    config = parse_cli(["--port", "7999"], {}).config
    bridge = Bridge(config, opener=game)
    assert bridge.run_tool("list_toolsets", {})["game"] == "Fake Game"
    result = bridge.run_tool("call_tool", {"name": "drop", "arguments": {"x": 1}})
    assert result["confirmation"] == "completedCommandId" and result["game"]["score"] == 10
    assert all(u.startswith("http://127.0.0.1:7999/") for u in game.urls)
    with pytest.raises(GameOffline):
        bridge.run_tool("call_tool", {"name": "get_health", "port": 9})
    client = GameClient(7999, opener=game)
    assert client.command_and_sync("drop", {"x": 2})["state"]["game"]["score"] == 20


def _readme_example() -> str:
    text = (ROOT / "docs" / "api.md").read_text()
    match = re.search(r"<!-- example: drop_and_settle -->\s*```python\n(.*?)```", text, re.S)
    assert match, "docs/api.md's drop_and_settle example is missing"
    return match.group(1)


@pytest.mark.slow
def test_the_readme_composite_example_runs(tmp_path: Path) -> None:
    manifest = json.loads(json.dumps(DEFAULT_MANIFEST))
    manifest["game"]["name"] = "Orbital Freight"
    script = tmp_path / "my_bridge.py"
    script.write_text(_readme_example())
    with FakeGame(manifest=manifest) as game:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path)}
        proc = subprocess.Popen([sys.executable, str(script), "--port", str(game.port), "--no-scan"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, cwd=tmp_path)
        try:
            def rpc(i: int, method: str, params: dict) -> dict:
                proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
                proc.stdin.flush()
                return json.loads(proc.stdout.readline())
            rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
            reply = rpc(2, "tools/call", {"name": "call_tool", "arguments": {"name": "drop_and_settle", "arguments": {"x": 1.2}}})
            body = json.loads(reply["result"]["content"][0]["text"])
            assert body["via"] == "composite" and body["settled"] is True and body["scoreDelta"] == 10
            proc.stdin.close()
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            proc.stdout.close()
            proc.stderr.close()


def test_error_types_carry_fields() -> None:
    exc = CommandTimeout(7801, "restart", 5000)
    assert exc.render().startswith("CommandTimeout: Command 'restart' was queued on port 7801")
    assert exc.to_dict()["timeoutMs"] == 5000
    assert NotAGameSurface(7802, "GET /health returned HTTP 404").render().startswith("NotAGameSurface: Something is listening on http://127.0.0.1:7802")
    assert BridgeUsageError("x").exit_code == 2 and GameOffline(1).exit_code == 3
    assert Composite(name="a", description="", run=lambda c: 1, only=["A", "B"]).suits("B")


@pytest.mark.slow
def test_vendored_without_the_sdk(tmp_path: Path) -> None:
    """Copied into a repository with no MCP SDK: call works, serving says what to install."""
    import shutil

    shutil.copytree(ROOT / "game_bridge_mcp", tmp_path / "game_bridge_mcp",
                    ignore=shutil.ignore_patterns("__pycache__"))
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mcp', 'anyio'): raise ModuleNotFoundError(f\"No module named '{name}'\", name=name)\n"
        "sys.meta_path.insert(0, Block())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path)
    with FakeGame() as game:
        out = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", "drop", '{"x": 1}', "--port", str(game.port)],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["applied"] is True
    out = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "--no-scan", "--registry-dir", "./instances"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60, input="")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("BridgeUsageError: Serving MCP needs the MCP SDK") and "pip install" in out.stderr
