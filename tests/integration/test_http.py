"""MCP over streamable HTTP (``--http``) against a real server subprocess, with the SDK's
own HTTP client: the advertised tools, the token, Host and Origin, sessions that own what
they launch, a session's end (DELETE, idle), the server's end (SIGTERM, SIGKILL) and
the bad input of a shared server."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from game_bridge_mcp.mcp_server.http.remote import connect
from http_helpers import INITIALIZE, HttpServer, game_processes, answer_messages, until
from launch_helpers import ProcessGuard, gone, write_declaration
from mcp_harness import data, is_error, text

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def declaration(tmp_path: Path) -> Path:
    return write_declaration(tmp_path / "project", "--lines", "2")


@pytest.mark.slow
def test_the_seven_tools_over_http_with_progress(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path / "project", "--boot-delay", "0.6", "--lines", "3")
    server = HttpServer(tmp_path, guard, decl)
    progress: list[float] = []

    async def on_progress(done: float, total: Any, message: Any) -> None:
        progress.append(done)

    async def main() -> None:
        async with connect(server.url, server.token) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"launch_instance", "list_instances", "stop_instance", "instance_log",
                             "list_toolsets", "describe_toolset", "call_tool"}
            launched = data(await client.call_tool("launch_instance", {"timeoutMs": 10000},
                                                   progress_callback=on_progress))
            port = launched["port"]
            listed = data(await client.call_tool("list_instances", {"range": str(port)}))
            mine = [e for e in listed["live"] if e["port"] == port]
            assert mine[0]["launchedByThisBridge"] is True and mine[0]["launchedByThisSession"] is True
            toolsets = data(await client.call_tool("list_toolsets", {}))  # the port this session launched
            assert toolsets["port"] == port and "bridge" in json.dumps(toolsets)
            described = data(await client.call_tool("describe_toolset", {"name": "bridge"}))
            assert "get_state" in json.dumps(described)
            state = data(await client.call_tool("call_tool", {"name": "get_state"}))
            assert isinstance(state.get("frame"), int)
            log = data(await client.call_tool("instance_log", {}))
            assert log["port"] == port and log["lines"]
            stopped = data(await client.call_tool("stop_instance", {}))
            assert stopped["stopped"] is True
    try:
        anyio.run(main)
        assert progress, "no progress notification reached the client over HTTP"
        assert until(lambda: not game_processes(guard), 10)
    finally:
        server.stop()


@pytest.mark.slow
def test_no_token_or_a_wrong_one_gets_a_bare_401(tmp_path: Path, guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, None)
    try:
        for token in (None, "x" * 43, server.token + "x", server.token[:-1]):
            status, headers, body = server.request("POST", INITIALIZE, token=token if token else False)
            assert status == 401 and body == b"" and headers.get("www-authenticate") == "Bearer"
        status, _h, _b = server.request("POST", INITIALIZE, headers={"Authorization": f"Basic {server.token}"},
                                        token=False)
        assert status == 401
        assert (server.home / "http" / f"token-{server.port}").stat().st_mode & 0o777 == 0o600
        assert server.stderr().count(server.token) == 1  # said once, on stderr

        async def wrong() -> None:
            async with connect(server.url, "not-the-token-at-all"):
                pass
        with pytest.raises(BaseException):
            anyio.run(wrong)
        status, headers, _b = server.request("POST", INITIALIZE)
        assert status == 200 and headers.get("mcp-session-id")  # and the right one opens a session
    finally:
        server.stop()


@pytest.mark.slow
def test_foreign_origin_and_host_are_refused(tmp_path: Path, guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, None)
    try:
        status, _h, _b = server.request("POST", INITIALIZE, headers={"Origin": "http://evil.example"})
        assert status == 403
        status, _h, _b = server.request("POST", INITIALIZE, headers={"Host": f"evil.example:{server.port}"})
        assert status == 421
        status, _h, _b = server.request("POST", INITIALIZE, headers={"Host": "127.0.0.1:1"})
        assert status == 421
        status, _h, _b = server.request("POST", INITIALIZE, headers={"Origin": f"http://localhost:{server.port}",
                                                                    "Host": f"localhost:{server.port}"})
        assert status == 200
    finally:
        server.stop()


@pytest.mark.slow
def test_non_loopback_needs_an_explicit_token(tmp_path: Path, guard: ProcessGuard) -> None:
    import subprocess
    import sys

    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    env.pop("GAME_BRIDGE_TOKEN", None)
    done = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "--http", "0.0.0.0:0"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "GAME_BRIDGE_TOKEN" in done.stderr
    server = HttpServer(tmp_path, guard, None, env={"GAME_BRIDGE_TOKEN": "t" * 32})
    try:
        assert server.token == "t" * 32 and not (server.home / "http" / "token").exists()
        assert "t" * 32 not in server.stderr()
    finally:
        server.stop()


@pytest.mark.slow
def test_two_sessions_own_their_launches(tmp_path: Path, guard: ProcessGuard, declaration: Path) -> None:
    server = HttpServer(tmp_path, guard, declaration)

    async def main() -> None:
        async with connect(server.url, server.token) as first, connect(server.url, server.token) as second:
            a = data(await first.call_tool("launch_instance", {}))
            b = data(await second.call_tool("launch_instance", {}))
            assert a["port"] != b["port"]
            refused = await second.call_tool("stop_instance", {"port": a["port"]})
            assert is_error(refused) and "another MCP session" in text(refused)
            refused = await second.call_tool("instance_log", {"port": a["port"]})
            assert is_error(refused) and "another MCP session" in text(refused)
            # each session's default port is the instance it launched
            assert data(await first.call_tool("call_tool", {"name": "get_health"}))["port"] == a["port"]
            assert data(await second.call_tool("call_tool", {"name": "get_health"}))["port"] == b["port"]
            spec = f"{min(a['port'], b['port'])}-{max(a['port'], b['port'])}"
            listed = {e["port"]: e for e in data(await second.call_tool("list_instances", {"range": spec}))["live"]}
            assert listed[a["port"]]["launchedByThisSession"] is False
            assert listed[a["port"]]["launchedByThisBridge"] is True
            assert listed[b["port"]]["launchedByThisSession"] is True
            assert psutil.pid_exists(a["pid"])
    try:
        anyio.run(main)
        assert until(lambda: not game_processes(guard), 10)  # both sessions ended: both games stopped
    finally:
        server.stop()


@pytest.mark.slow
def test_delete_stops_the_sessions_instances_and_its_id_is_gone(tmp_path: Path, guard: ProcessGuard,
                                                                declaration: Path) -> None:
    server = HttpServer(tmp_path, guard, declaration)
    try:
        session = server.open_session()
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "launch_instance", "arguments": {}}}
        status, _h, body = server.request("POST", call, headers=headers)
        launched = json.loads(answer_messages(body)[-1]["result"]["content"][0]["text"])
        assert status == 200 and psutil.pid_exists(launched["pid"])

        async def other() -> int:  # another session's game must survive this one's end
            async with connect(server.url, server.token) as client:
                kept = data(await client.call_tool("launch_instance", {}))
                status, _h, _b = server.request("DELETE", headers=headers)
                assert status == 200
                assert until(lambda: gone(launched["pid"]), 10)
                assert data(await client.call_tool("call_tool", {"name": "get_health"}))["port"] == kept["port"]
                return int(kept["pid"])
        kept_pid = anyio.run(other)
        status, _h, _b = server.request("POST", call, headers=headers)
        assert status == 404
        assert until(lambda: gone(kept_pid), 10)
    finally:
        server.stop()


@pytest.mark.slow
def test_an_idle_session_ends_and_stops_its_instances(tmp_path: Path, guard: ProcessGuard, declaration: Path) -> None:
    server = HttpServer(tmp_path, guard, declaration, "--session-idle", "0.02", env={"GAME_BRIDGE_LOG": "INFO"})
    try:
        async def main() -> None:
            async with connect(server.url, server.token) as client:
                data(await client.call_tool("launch_instance", {}))
                assert await anyio.to_thread.run_sync(lambda: until(lambda: not game_processes(guard), 20))
        anyio.run(main)
        session = server.open_session()
        status, _h, _b = server.request("POST", {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
                                        headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        assert status == 200
        assert until(lambda: f"session {session[:8]} ended" in server.stderr(), 20)  # 1.2 s without a request
        status, _h, _b = server.request("POST", {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
                                        headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        assert status == 404
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_the_servers_end_reaps_every_sessions_instances(tmp_path: Path, guard: ProcessGuard, declaration: Path,
                                                        how: str) -> None:
    server = HttpServer(tmp_path, guard, declaration)
    try:
        launched: list[int] = []

        async def main() -> None:
            async with connect(server.url, server.token) as first, connect(server.url, server.token) as second:
                launched.append(data(await first.call_tool("launch_instance", {}))["pid"])
                launched.append(data(await second.call_tool("launch_instance", {}))["pid"])
                server.proc.send_signal(getattr(signal, how))
                await anyio.to_thread.run_sync(lambda: server.proc.wait(15))
        try:
            anyio.run(main)
        except Exception:  # noqa: BLE001 - the client's DELETE on its way out meets a server that is gone
            pass
        assert len(launched) == 2
        assert until(lambda: not game_processes(guard), 15)
        assert server.proc.wait(15) == (-signal.SIGKILL if how == "SIGKILL" else 128 + signal.SIGTERM)
    finally:
        server.stop()


@pytest.mark.slow
def test_bad_input_gets_clear_answers_and_the_server_keeps_serving(tmp_path: Path, guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, None)
    try:
        status, _h, body = server.request("POST", raw=b"{not json")
        assert status == 400 and b"Parse error" in body or b"parse" in body.lower()
        status, _h, body = server.request("POST", raw=b"x" * (5 * 1024 * 1024))
        assert status == 413 and b"too large" in body
        status, _h, _b = server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                        headers={"Mcp-Session-Id": "0" * 32})
        assert status == 404
        status, _h, _b = server.request("POST", INITIALIZE, headers={"Accept": "application/json"})
        assert status == 406
        status, _h, _b = server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert status == 400  # no session, and not an initialize
        status, _h, _b = server.request("GET", path="/elsewhere")
        assert status == 404
        session = server.open_session()
        status, _h, body = server.request("POST", {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                                          headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        assert status == 200 and len(answer_messages(body)[-1]["result"]["tools"]) == 7
    finally:
        server.stop()


@pytest.mark.slow
def test_sessions_past_the_cap_get_503_with_retry_after(tmp_path: Path, guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, None, "--max-sessions", "2")
    try:
        first, _second = server.open_session(), server.open_session()
        status, headers, _b = server.request("POST", INITIALIZE)
        assert status == 503 and int(headers["retry-after"]) > 0
        status, _h, _b = server.request("DELETE", headers={"Mcp-Session-Id": first})
        assert status == 200
        assert until(lambda: server.request("POST", INITIALIZE)[0] == 200, 10)
    finally:
        server.stop()


@pytest.mark.slow
def test_a_client_that_leaves_mid_call_has_its_call_cancelled(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path / "project", "--boot-delay", "30", timeout_ms=60000)
    server = HttpServer(tmp_path, guard, decl, env={"GAME_BRIDGE_LOG": "INFO"})
    try:
        session = server.open_session()
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
        body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                           "params": {"name": "launch_instance", "arguments": {}}}).encode()
        with socket.create_connection((server.host, server.port), timeout=10) as raw:
            raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: " + f"{server.host}:{server.port}".encode()
                        + b"\r\nAuthorization: Bearer " + server.token.encode()
                        + b"\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json"
                        + b"\r\nMcp-Session-Id: " + session.encode() + b"\r\nMCP-Protocol-Version: 2025-06-18"
                        + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            assert until(lambda: len(game_processes(guard)) == 1, 15)  # the game is booting
        # the client is gone: the launch is cancelled and the booting game ended, long before its 30 s boot
        assert until(lambda: not game_processes(guard), 15), server.stderr()
        assert "cancelling it" in server.stderr()
        status, _h, body = server.request("POST", {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers=headers)
        assert status == 200 and answer_messages(body)  # the session itself carries on
    finally:
        server.stop()


@pytest.mark.slow
def test_call_url_runs_one_tool_on_a_remote_bridge(tmp_path: Path, guard: ProcessGuard, declaration: Path) -> None:
    import subprocess
    import sys

    server = HttpServer(tmp_path, guard, declaration)
    env = dict(guard.env)
    env.pop("GAME_BRIDGE_TOKEN", None)
    env["GAME_BRIDGE_HOME"] = str(tmp_path / "elsewhere")  # no token file to fall back on
    try:
        done = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", "--url", server.url,
                               "--token", server.token, "list_instances", '{"range": "1"}'],
                              env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        assert "live" in json.loads(done.stdout)
        done = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", "--url", server.url,
                               "--token", "wrong-token-wrong-token", "list_instances"],
                              env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode != 0 and "401" in done.stderr and done.stdout == ""
        done = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", "--url", server.url,
                               "--token", server.token, "stop_instance", '{"port": 1}'],
                              env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode != 0 and "not launched by this bridge" in done.stderr
    finally:
        server.stop()
