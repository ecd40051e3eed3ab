"""The bridge driven by the official TypeScript MCP clients (tests/support/ts_helpers.py), over
stdio and over HTTP, as a user's client drives it: list the tools, then every tool's success and
its errors, a screenshot, progress. These clients check what the Python SDK's client skips (an
error's structuredContent against the tool's outputSchema; a message over 10 MiB closes the
stdio connection), so a step they reject fails here."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from http_helpers import HttpServer
from game_bridge_mcp.mcp_server.adapter import SESSIONLESS_VERSIONS
from launch_helpers import ProcessGuard, declaration
from peers.fakegame import FakeGame
from ts_helpers import answer_of, run_client, text_of

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"launch_instance", "list_instances", "stop_instance", "instance_log", "list_toolsets", "describe_toolset",
         "call_tool"}


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stdio(guard: ProcessGuard, tmp_path: Path, *args: str) -> dict[str, Any]:
    env = {**guard.env, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    env.pop("GAME_BRIDGE_TOKEN", None)
    return {"kind": "stdio", "command": sys.executable, "args": ["-m", "game_bridge_mcp", "--scan-range", "1", *args],
            "env": env, "cwd": str(ROOT)}


#: Every tool's success (the launched demo game is every call's default port) and its errors.
def plan(nobody: int) -> list[dict[str, Any]]:
    return [
        {"tool": "launch_instance", "arguments": {"timeoutMs": 30000, "paused": True}, "progress": True},
        {"tool": "list_instances", "arguments": {}},
        {"tool": "list_toolsets", "arguments": {}},
        {"tool": "describe_toolset", "arguments": {"name": "bridge"}},
        {"tool": "call_tool", "arguments": {"name": "get_state", "arguments": {"summary": True}}},
        {"tool": "call_tool", "arguments": {"name": "get_screenshot", "arguments": {"maxWidth": 64}}},
        {"tool": "instance_log", "arguments": {}},
        # errors, one or more of each tool
        {"tool": "launch_instance", "arguments": {"bogus": 1}},
        {"tool": "list_instances", "arguments": {"port": 70000}},
        {"tool": "stop_instance", "arguments": {"port": nobody}},
        {"tool": "instance_log", "arguments": {"port": nobody}},
        {"tool": "list_toolsets", "arguments": {"port": nobody}},
        {"tool": "describe_toolset", "arguments": {"name": "no-such-toolset"}},
        {"tool": "call_tool", "arguments": {"name": "no_such_tool"}},
        {"tool": "call_tool", "arguments": {"port": nobody, "name": "get_state"}},
        {"tool": "stop_instance", "arguments": {}},
    ]


ERRORS = {7: "BridgeUsageError", 8: "BridgeUsageError", 9: "BridgeUsageError", 10: "BridgeUsageError",
          11: "GameOffline", 12: None, 13: None, 14: "GameOffline"}


def check_report(report: dict[str, Any]) -> None:
    assert {tool["name"] for tool in report["tools"]} == TOOLS
    steps = report["steps"]
    for index, step in enumerate(steps):
        assert step["ok"], f"step {index} ({plan(1)[index]['tool']}): the client threw {step['error']}"
    launched = answer_of(steps[0])
    assert steps[0]["progress"], "launch_instance sent no progress"
    port = launched["port"]
    assert any(entry["port"] == port for entry in answer_of(steps[1])["live"])
    assert answer_of(steps[2])["port"] == port
    assert "get_state" in text_of(steps[3])
    assert answer_of(steps[4])["port"] == port
    shot = steps[5]["result"]
    assert not shot["isError"] and [b["type"] for b in shot["content"]] == ["text", "image"]
    assert shot["content"][1]["mimeType"] == "image/png" and shot["content"][1]["head"].startswith("89504e47")
    assert answer_of(steps[6])["port"] == port
    for index, name in ERRORS.items():
        result = steps[index]["result"]
        message = text_of(steps[index])
        assert result["isError"], f"step {index} answered without an error: {message}"
        error = message.split(":", 1)[0]
        if name is not None:
            assert error == name, message
        assert result["structuredContent"]["error"] == error  # the bridge's own words reached the client
    assert answer_of(steps[15])["stopped"] is True
    assert report["listedAfter"] == len(TOOLS) and report["closedEarly"] is False


#: The clients and how they negotiate: the 1.x SDK (2025 versions), the 2.x client as it
#: connects by default (legacy), probing (auto) and pinned to the sessionless 2026-07-28.
CLIENTS = [("sdk", "legacy"), ("client", "legacy"), ("client", "auto"), ("client", "2026-07-28")]


def expected_version(negotiation: str) -> str | None:
    """The version the connection should end up on, with the SDK installed here."""
    if negotiation == "legacy":
        return None
    return "2026-07-28" if "2026-07-28" in SESSIONLESS_VERSIONS else (None if negotiation == "auto" else "refused")


@pytest.mark.parametrize(("flavor", "negotiation"), CLIENTS)
def test_every_tool_and_its_errors_over_stdio(flavor: str, negotiation: str, tmp_path: Path,
                                              guard: ProcessGuard) -> None:
    decl = declaration(tmp_path / "project", variant="slow-boot:1")
    transport = stdio(guard, tmp_path, "--config", str(decl))
    if expected_version(negotiation) == "refused":  # an SDK without 2026-07-28: a clear refusal
        failed = run_client(flavor, transport, plan(unused_port()), negotiation=negotiation, fatal_ok=True)
        assert "fatal" in failed, failed
        return
    report = run_client(flavor, transport, plan(unused_port()), negotiation=negotiation)
    check_report(report)
    if expected_version(negotiation):
        assert report["protocolVersion"] == expected_version(negotiation)


@pytest.mark.parametrize(("flavor", "negotiation"), CLIENTS)
def test_every_tool_and_its_errors_over_http(flavor: str, negotiation: str, tmp_path: Path,
                                             guard: ProcessGuard) -> None:
    server = HttpServer(tmp_path, guard, declaration(tmp_path / "project", variant="slow-boot:1"))
    transport = {"kind": "http", "url": server.url, "token": server.token}
    try:
        if expected_version(negotiation) == "refused":
            failed = run_client(flavor, transport, plan(unused_port()), negotiation=negotiation, fatal_ok=True)
            assert "Unsupported protocol version" in failed.get("fatal", ""), failed
            return
        report = run_client(flavor, transport, plan(unused_port()), negotiation=negotiation)
        check_report(report)
        if expected_version(negotiation):
            assert report["protocolVersion"] == expected_version(negotiation)
            assert "logging" not in (report["serverCapabilities"] or {})  # deprecated there: not advertised
    finally:
        assert server.stop() in (0, 128 + 15, -15)


@pytest.mark.parametrize("flavor", ["sdk", "client"])
def test_a_big_state_keeps_the_connection_over_stdio(flavor: str, tmp_path: Path, guard: ProcessGuard) -> None:
    """A 12 MB /state once closed the TypeScript client's stdio connection (a message over
    10 MiB): now it is refused with the parts to read, each of which arrives."""
    with FakeGame() as game:
        game.game["entities"] = [{"id": i, "kind": "crate", "x": i * 1.5, "tags": ["solid", "wood"]}
                                 for i in range(200_000)]
        steps = [{"tool": "call_tool", "arguments": {"name": "get_state"}},
                 {"tool": "call_tool", "arguments": {"name": "get_state", "arguments": {
                     "path": "game.entities", "offset": 199_000, "limit": 5000}}},
                 {"tool": "call_tool", "arguments": {"name": "get_state", "arguments": {"summary": True}}}]
        report = run_client(flavor, stdio(guard, tmp_path, "--port", str(game.port), "--no-scan", "--timeout", "30000"),
                            steps)
    refused = report["steps"][0]
    assert refused["ok"] and refused["result"]["isError"], refused
    words = text_of(refused)
    assert words.startswith("BridgeUsageError: The answer is ") and 'get_state {path: "game.entities", offset: 0' in words
    page = answer_of(report["steps"][1])
    assert page["total"] == 200_000 and len(page["value"]) == 1000 and page["next"] is None
    assert answer_of(report["steps"][2])["port"] == game.port
    assert report["listedAfter"] == len(TOOLS) and report["closedEarly"] is False
