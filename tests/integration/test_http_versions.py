"""Protocol versions over ``--http``: an unsupported ``MCP-Protocol-Version`` gets 400; the
sessionless 2026-07-28 (with an SDK that speaks it) lists, launches, plays and stops without a
session, its launches owned by sessionless requests alone and stopped when they go idle;
capabilities follow the version (no deprecated ``logging`` where 2026-07-28 deprecates it);
and the bad input of each, a clear error while the server keeps serving (docs/http.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.mcp_server.adapter import SESSIONLESS_VERSIONS
from game_bridge_mcp.mcp_server.http.remote import connect
from http_helpers import INITIALIZE, HttpServer, answer_messages, game_processes, until
from launch_helpers import ProcessGuard, write_declaration
from mcp_harness import data, is_error, text

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

MODERN = "2026-07-28"
SPEAKS_MODERN = MODERN in SESSIONLESS_VERSIONS


def sessionless(server: HttpServer, method: str, params: dict[str, Any] | None = None, *, ident: int = 1,
                meta: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One 2026-07-28 request: its envelope in _meta, repeated in the headers; (status, message)."""
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {}} if meta is None else meta
    body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": {**(params or {}), "_meta": envelope}}
    sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        sent["Mcp-Name"] = str((params or {}).get("name"))
    sent.update(headers or {})
    status, _headers, raw = server.request("POST", body, headers=sent)
    messages = answer_messages(raw) if raw.strip() else []
    return status, messages[-1] if messages else None


def tool(server: HttpServer, name: str, arguments: dict[str, Any], ident: int = 1) -> dict[str, Any]:
    status, message = sessionless(server, "tools/call", {"name": name, "arguments": arguments}, ident=ident)
    assert status == 200, message
    return dict(message["result"])


@pytest.fixture
def server(tmp_path: Path, guard: ProcessGuard) -> Any:
    decl = write_declaration(tmp_path / "project", "--lines", "2")
    running = HttpServer(tmp_path, guard, decl, "--session-idle", "0.05", env={"GAME_BRIDGE_LOG": "INFO"})
    yield running
    running.stop()


def test_an_unsupported_version_is_400_and_the_server_keeps_serving(server: HttpServer) -> None:
    for headers in ({"MCP-Protocol-Version": "1999-01-01"}, {"MCP-Protocol-Version": "x" * 300}):
        status, _h, body = server.request("POST", INITIALIZE, headers=headers)
        assert status == 400, body
        error = json.loads(body)["error"]
        assert error["code"] == -32022 and "Unsupported protocol version" in error["message"]
        assert "2025-06-18" in error["data"]["supported"] and len(error["data"]["requested"]) <= 40
    if not SPEAKS_MODERN:  # an SDK without the sessionless versions refuses them the same way
        status, message = sessionless(server, "tools/list")
        assert status == 400 and "Unsupported protocol version" in message["error"]["message"]
    assert server.open_session()  # still serving


def test_capabilities_follow_the_version(server: HttpServer) -> None:
    status, headers, body = server.request("POST", INITIALIZE)
    assert status == 200
    assert "logging" in answer_messages(body)[-1]["result"]["capabilities"]  # 2025-06-18 keeps it
    if not SPEAKS_MODERN:
        return
    status, message = sessionless(server, "server/discover")
    assert status == 200, message
    capabilities = message["result"]["capabilities"]
    assert "tools" in capabilities and "logging" not in capabilities
    assert MODERN in message["result"]["supportedVersions"]


def refused_without_the_version(server: HttpServer, method: str, params: dict[str, Any] | None = None) -> bool:
    """With an SDK that has no sessionless version: the request is refused as unsupported."""
    if SPEAKS_MODERN:
        return False
    status, message = sessionless(server, method, params)
    assert status == 400 and "Unsupported protocol version" in message["error"]["message"]
    return True


def test_bad_sessionless_requests_are_clear_errors(server: HttpServer) -> None:
    if refused_without_the_version(server, "tools/list"):
        return
    status, message = sessionless(server, "tools/list", meta={"io.modelcontextprotocol/protocolVersion": MODERN})
    assert status == 400 and "clientCapabilities" in message["error"]["message"]
    status, message = sessionless(server, "tools/list", headers={"Mcp-Session-Id": "0" * 32})
    assert status == 400 and "Mcp-Session-Id is not used with protocol 2026-07-28" in message["error"]["message"]
    status, message = sessionless(server, "tools/list", meta={
        "io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}})
    assert status == 400  # the envelope says another version than the header
    status, message = sessionless(server, "tools/list")
    assert status == 200 and len(message["result"]["tools"]) == 7


def test_sessionless_launches_have_an_owner_and_end_when_idle(server: HttpServer, guard: ProcessGuard) -> None:
    if refused_without_the_version(server, "tools/call", {"name": "launch_instance", "arguments": {}}):
        return
    launched = tool(server, "launch_instance", {})
    assert not launched.get("isError"), launched
    port = json.loads(launched["content"][0]["text"])["port"]
    played = tool(server, "call_tool", {"name": "get_state"}, ident=2)  # the port it launched is the default
    assert not played.get("isError") and json.loads(played["content"][0]["text"])["frame"] >= 0

    async def as_a_session() -> None:
        async with connect(server.url, server.token) as client:
            listed = data(await client.call_tool("list_instances", {"range": str(port)}))
            mine = [entry for entry in listed["live"] if entry["port"] == port]
            assert mine and mine[0]["launchedByThisBridge"] is True and mine[0]["launchedByThisSession"] is False
            refused = await client.call_tool("stop_instance", {"port": port})
            assert is_error(refused) and "launched by another MCP session" in text(refused)

    anyio.run(as_a_session)
    assert game_processes(guard)  # a session could not stop it
    # no sessionless request for 3 s (--session-idle 0.05 min): what they launched is stopped
    assert until(lambda: not game_processes(guard), 30)
    assert until(lambda: "sessionless requests: ended" in server.stderr(), 10)
    listed = tool(server, "list_instances", {}, ident=3)  # and the next sessionless request starts afresh
    assert not listed.get("isError"), listed
