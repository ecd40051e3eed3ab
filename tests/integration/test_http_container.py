"""The HTTP container recipe (examples/http-container/Dockerfile), tested as far as a machine
without a Docker engine allows (this one, and CI's, has none): what it copies exists and is what
the package needs, what it installs is the browser extra and the Chromium .ci/run installs, and
its command, run here as the container would run it (its environment, all interfaces, a strong
token), serves MCP to a client that reaches it by the names a published port is reached by."""

from __future__ import annotations

import http.client
import json
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from launch_helpers import ProcessGuard, wait_until
from ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "examples" / "http-container" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = RECIPE.read_text(encoding="utf-8").replace("\\\n", " ")
    return [(m[1].upper(), m[2].strip()) for m in re.finditer(r"^([A-Za-z]+)\s+(.*)$", text, re.M)
            if not m[0].startswith("#")]


def test_the_recipe_copies_and_installs_what_the_package_needs() -> None:
    steps = instructions()
    copied = [w for op, arg in steps if op == "COPY" for w in shlex.split(arg)[:-1]]
    assert set(copied) == {"pyproject.toml", "README.md", "LICENSE", "game_bridge_mcp"}
    assert all((ROOT / name).exists() for name in copied)
    runs = " ".join(arg for op, arg in steps if op == "RUN")
    assert "apt-get install -y --no-install-recommends chromium" in runs
    assert "chromium" in (ROOT / ".ci" / "run").read_text()  # the same Debian package CI's browser tests use
    assert "pip install --no-cache-dir '.[browser]'" in runs
    assert re.search(r'^browser = \["playwright', (ROOT / "pyproject.toml").read_text(), re.M)
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(arg for op, arg in steps if op == "ENV")))
    assert env == {"GAME_BRIDGE_HOME": "/var/lib/game-bridge", "GAME_BRIDGE_BROWSER": "/usr/bin/chromium"}


def post(port: int, host: str, token: str, body: dict[str, Any], session: str | None = None) -> tuple[int, Any, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    headers = {"Host": host, "Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    if session:
        headers["Mcp-Session-Id"] = session
    try:
        conn.request("POST", "/mcp", json.dumps(body), headers)
        answer = conn.getresponse()
        raw = answer.read().decode()
        data = raw.split("data: ", 1)[1] if raw.startswith("event:") or "data: " in raw[:20] else raw
        return answer.status, json.loads(data) if data.strip() else None, answer.getheader("Mcp-Session-Id") or ""
    finally:
        conn.close()


def test_the_recipes_command_serves_mcp_to_a_published_ports_names(tmp_path: Path, guard: ProcessGuard) -> None:
    [command] = [json.loads(arg) for op, arg in instructions() if op == "CMD"]
    assert command[:3] == ["game-bridge-mcp", "--http", "0.0.0.0:8765"]
    port = free_port()
    argv = [str(Path(sys.executable).parent / "game-bridge-mcp"), "--http", f"0.0.0.0:{port}", *command[3:],
            "--scan-range", "1"]  # (the scan kept off this machine's other games)
    token = secrets.token_urlsafe(32)
    env = {k: v for k, v in guard.env.items() if not k.startswith("GAME_BRIDGE_")}
    env.update(GAME_BRIDGE_TOKEN=token, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    server = subprocess.Popen(argv, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "ci-agent", "version": "1"}}}
            answered = wait_until(lambda: _try(post, port, host, token, init), 30)
            assert answered, server.stderr.read1(4000) if server.stderr else ""  # type: ignore[union-attr]
            status, body, session = answered
            assert status == 200 and body["result"]["serverInfo"]["name"] == "game-bridge-mcp", body
            post(port, host, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            status, body, _ = post(port, host, token, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
            assert status == 200 and "launch_instance" in {t["name"] for t in body["result"]["tools"]}, body
        status, _, _ = post(port, f"localhost:{port}", "not-the-token-at-all", {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert status == 401
    finally:
        server.terminate()
        server.wait(timeout=30)


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except (OSError, ValueError):
        return None
