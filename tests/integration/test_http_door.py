"""The streamable-HTTP door under the holes of issue 38 (items 9, 11, 12), against a real
server subprocess: silent and slowloris connections closed, ownership of close and of an
instance's output across sessions, the token kept from launched games, read by ``call`` from a
file or standard input, one token file per server (written after the bind, removed at exit),
weak tokens refused beyond loopback, failed attempts logged without flooding. Each test failed
before its fix; the rules are in docs/reliability.md ("The HTTP door")."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.mcp_server.http.guard import ConnectionGuard
from game_bridge_mcp.mcp_server.http.remote import connect
from game_bridge_mcp.mcp_server.http.token import choose_token, strength_bits
from http_helpers import INITIALIZE, HttpServer, game_processes, until
from launch_helpers import ProcessGuard, write_declaration
from mcp_harness import data, is_error, text

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STRONG = "Zq3x9L_aPw7TnB2vRk5YmC8dHs4uFg6j"  # 32 characters, 32 different


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (EOF or reset), without blocking."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_silent_and_slowloris_connections_are_closed(tmp_path: Path, guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, None)
    try:
        silent = socket.create_connection((server.host, server.port))
        slow = socket.create_connection((server.host, server.port))
        slow.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Slow: ".encode())  # never ends
        assert until(lambda: closed_by_server(silent) and closed_by_server(slow), 30)
        status, _h, _b = server.request("POST", INITIALIZE)  # an agent with the token is served meanwhile
        assert status == 200
        assert until(lambda: "sent no request with the token" in server.stderr(), 10)
        silent.close()
        slow.close()
    finally:
        server.stop()


def test_unauthenticated_connections_have_a_cap_of_their_own() -> None:
    """The oldest waiting connection is closed when one more would pass the cap."""
    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.aborted = False

        def abort(self) -> None:
            self.aborted = True

    async def main() -> None:
        guard = ConnectionGuard(deadline_s=60, cap=3)
        transports = [Transport() for _ in range(5)]
        for index, transport in enumerate(transports):
            guard.opened(("127.0.0.1", 1000 + index), transport)
        assert [t.aborted for t in transports] == [True, True, False, False, False] and guard.waiting == 3
        guard.authorised({"client": ("127.0.0.1", 1003)})  # an agent: not waiting any more
        guard.opened(("127.0.0.1", 2000), Transport())
        assert not transports[3].aborted and transports[2].aborted is False and guard.waiting == 3
        guard.opened(("127.0.0.1", 2001), Transport())
        assert transports[2].aborted and not transports[3].aborted

    asyncio.run(main())


def test_close_and_an_instances_output_are_its_sessions_alone(tmp_path: Path, guard: ProcessGuard) -> None:
    """call_tool close, raw_command close and instance_log from another session are refused
    (before: close from session B closed A's game)."""
    server = HttpServer(tmp_path, guard, write_declaration(tmp_path / "project", "--lines", "2"))
    try:
        async def main() -> None:
            async with connect(server.url, server.token) as first, connect(server.url, server.token) as second:
                port = data(await first.call_tool("launch_instance", {}))["port"]
                for name, arguments in (("close", {}), ("raw_command", {"command": "close"})):
                    refused = await second.call_tool("call_tool", {"port": port, "name": name, "arguments": arguments})
                    assert is_error(refused) and "launched by another MCP session" in text(refused), text(refused)
                refused = await second.call_tool("instance_log", {"port": port})
                assert is_error(refused) and "launched by another MCP session" in text(refused)
                assert data(await first.call_tool("call_tool", {"port": port, "name": "get_health"}))["ok"] is True
                assert data(await first.call_tool("instance_log", {"port": port}))["port"] == port
                assert data(await first.call_tool("call_tool", {"port": port, "name": "close"}))["closed"] is True

        anyio.run(main)
    finally:
        server.stop()


def test_another_sessions_instance_is_not_saved_restored_or_forked_from_here(tmp_path: Path,
                                                                               guard: ProcessGuard) -> None:
    """save_state, restore_state and fork_instance {port} from another session are refused and
    leave its game as it was (before: session B's restore_state loaded B's state into A's game)."""
    import json

    from ports import free_range

    low, high = free_range(4)
    project = tmp_path / "project"
    project.mkdir()
    decl = project / "gamebridge.json"
    decl.write_text(json.dumps({"name": "Handmade", "launch": {
        "argv": [sys.executable, str(ROOT / "tests" / "peers" / "handmade.py"), "--port", "{port}", "--hz", "200"],
        "cwd": str(ROOT), "portRange": f"{low}-{high}", "readyTimeoutMs": 20000}}))
    server = HttpServer(tmp_path, guard, decl)
    try:
        async def main() -> None:
            async with connect(server.url, server.token) as first, connect(server.url, server.token) as second:
                async def call(client: Any, name: str, port: int | None, **arguments: Any) -> Any:
                    args: dict[str, Any] = {"name": name, "arguments": arguments}
                    if port is not None:
                        args["port"] = port
                    return await client.call_tool("call_tool", args)

                mine = data(await first.call_tool("launch_instance", {"paused": True}))["port"]
                theirs = data(await second.call_tool("launch_instance", {"paused": True}))["port"]
                await call(first, "move", mine, dx=2)
                await call(first, "advance", mine, frames=2)
                saved = data(await call(second, "save_state", theirs))  # B's own state, of B's game
                before = data(await call(first, "get_state", mine))
                for name, arguments in (("restore_state", {"state": saved["state"]}), ("save_state", {}),
                                        ("fork_instance", {})):
                    refused = await call(second, name, mine, **arguments)
                    assert is_error(refused) and "launched by another MCP session" in text(refused), (name, text(refused))
                after = data(await call(first, "get_state", mine))
                assert after["game"] == before["game"] and after["simFrame"] == before["simFrame"]
                assert data(await call(first, "list_states", None))["count"] == 0
                # each session does all of it on its own instance; a state of its own forks anywhere
                own = data(await call(first, "save_state", mine))
                assert data(await call(first, "restore_state", mine, state=own["state"]))["exact"] is True
                forked = data(await call(second, "fork_instance", None, state=saved["state"]))
                assert forked["exact"] is True and forked["port"] not in (mine, theirs)

        anyio.run(main)
    finally:
        server.stop()


def test_launched_games_do_not_inherit_the_token(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path / "project", "--child", "plain", "--lines", "2")
    server = HttpServer(tmp_path, guard, decl, env={"GAME_BRIDGE_TOKEN": STRONG})
    try:
        async def main() -> None:
            async with connect(server.url, server.token) as client:
                pid = data(await client.call_tool("launch_instance", {}))["pid"]
                tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
                assert len(tree) >= 2  # the game and what it started
                for proc in tree:
                    assert "GAME_BRIDGE_TOKEN" not in proc.environ(), proc.cmdline()
                assert STRONG in (psutil.Process(server.proc.pid).environ().get("GAME_BRIDGE_TOKEN") or "")

        anyio.run(main)
    finally:
        server.stop()
    assert until(lambda: not game_processes(guard), 20)


def call(server: HttpServer, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> Any:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(server.home), **(env or {})}
    environ.pop("GAME_BRIDGE_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", "call", "--url", server.url, *args],
                          input=stdin, capture_output=True, text=True, timeout=60, env=environ)


def test_call_reads_the_token_from_a_file_or_standard_input(tmp_path: Path, guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, None)
    try:
        secret = tmp_path / "secret"
        secret.write_text(server.token + "\n")
        from_file = call(server, "--token-file", str(secret), "list_instances", '{"range": "1"}')
        assert from_file.returncode == 0, from_file.stderr
        from_stdin = call(server, "--token", "-", "list_instances", '{"range": "1"}', stdin=server.token + "\n")
        assert from_stdin.returncode == 0, from_stdin.stderr
        in_argv = call(server, "--token", server.token, "list_instances", '{"range": "1"}')
        assert in_argv.returncode == 0 and "every user of this machine can read it" in in_argv.stderr
        empty = call(server, "--token-file", str(tmp_path / "nothing"), "list_instances")
        assert empty.returncode == 2 and "cannot be read" in empty.stderr
        local = call(server, "list_instances", '{"range": "1"}')  # the file this server wrote, by its port
        assert local.returncode == 0, local.stderr
    finally:
        server.stop()


def test_one_token_file_per_server_written_after_the_bind_and_removed_at_exit(tmp_path: Path,
                                                                               guard: ProcessGuard) -> None:
    first = HttpServer(tmp_path, guard, None)
    files = first.home / "http"
    try:
        mine = files / f"token-{first.port}"
        assert mine.read_text().split("\n")[0] == first.token and mine.stat().st_mode & 0o777 == 0o600
        before = mine.read_bytes()
        second = HttpServer(tmp_path, guard, None)
        try:
            assert (files / f"token-{second.port}").is_file() and mine.read_bytes() == before
            assert second.token != first.token
        finally:
            assert second.stop() in (0, 128 + 15)
        assert not (files / f"token-{second.port}").exists()  # removed at exit
        clash = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "--http", f"127.0.0.1:{first.port}"],
                               capture_output=True, text=True, timeout=60,
                               env={**guard.env, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(first.home)})
        assert clash.returncode != 0 and "could not listen" in clash.stderr
        assert mine.read_bytes() == before  # a server that failed to bind left it alone
        status, _h, _b = first.request("POST", INITIALIZE)  # and the first's clients still get in
        assert status == 200
    finally:
        first.stop()
    assert not mine.exists()


def test_weak_tokens_are_refused_beyond_loopback() -> None:
    for weak in ("aaaaaaaaaaaaaaaaaaaaaaaa", "passwordpassword", "0123456789abcdef"):
        with pytest.raises(BridgeUsageError, match="too weak for an address beyond loopback"):
            choose_token({"GAME_BRIDGE_TOKEN": weak}, loopback=False)
        assert choose_token({"GAME_BRIDGE_TOKEN": weak}, loopback=True) == (weak, False)  # loopback: as before
    assert choose_token({"GAME_BRIDGE_TOKEN": STRONG}, loopback=False) == (STRONG, False)
    assert strength_bits(STRONG) >= 128 and strength_bits("x" * 100) == 0


def test_failed_attempts_are_logged_without_flooding(tmp_path: Path, guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, None)
    try:
        for _ in range(40):
            status, _h, _b = server.request("POST", INITIALIZE, token="wrong-token-wrong-token")
            assert status == 401
        assert until(lambda: "without the right bearer token" in server.stderr(), 10)
        lines = [line for line in server.stderr().splitlines() if "without the right bearer token" in line]
        assert 1 <= len(lines) <= 2 and "127.0.0.1" in lines[0]
    finally:
        server.stop()
