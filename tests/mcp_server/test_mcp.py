"""The MCP surface through the real client over the SDK's in-memory transport."""

from __future__ import annotations

import copy
import os
import json
import socket
import threading
from typing import Any, Iterator

import anyio
import pytest

from peers.fakegame import DEFAULT_MANIFEST, FakeGame
from game_bridge_mcp import Composite
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.config import Config
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from mcp_harness import connect, data, dump, is_error, structured, text

SEVEN = ["launch_instance", "list_instances", "stop_instance", "instance_log",
         "list_toolsets", "describe_toolset", "call_tool"]


@pytest.fixture
def game() -> Iterator[FakeGame]:
    with FakeGame() as g:
        yield g


def app_for(port: int, **kw: Any) -> BridgeServer:
    composites = kw.pop("composites", ())
    return BridgeServer(Bridge(Config(port=port, environ={}, scan_range=(port,), registry=False, **kw),
                               composites=composites))


def test_seven_tools_with_truthful_annotations_and_instructions(game: FakeGame) -> None:
    async def main() -> None:
        async with connect(app_for(game.port)) as client:
            tools = [dump(t) for t in (await client.list_tools()).tools]
            assert [t["name"] for t in tools] == SEVEN
            by = {t["name"]: t for t in tools}
            assert by["list_instances"]["annotations"]["readOnlyHint"] is False  # prune deletes stale files
            assert by["list_instances"]["annotations"]["destructiveHint"] is False
            assert by["describe_toolset"]["annotations"]["readOnlyHint"] is True
            assert by["stop_instance"]["annotations"]["destructiveHint"] is True
            assert by["call_tool"]["annotations"]["readOnlyHint"] is False
            assert by["describe_toolset"]["inputSchema"]["required"] == ["name"]
            for tool in tools:
                assert len(tool["description"]) > 60
                assert "port" in tool["inputSchema"]["properties"] or tool["name"] == "list_instances"
    anyio.run(main)


def test_initialize_carries_the_workflow_instructions(game: FakeGame) -> None:
    app = app_for(game.port)
    opts = dump(app.initialization_options())
    assert "list_toolsets" in opts["instructions"] and "call_tool" in opts["instructions"]


def test_drive_a_game_end_to_end(game: FakeGame) -> None:
    async def main() -> None:
        async with connect(app_for(game.port)) as client:
            listed = data(await client.call_tool("list_toolsets", {}))
            assert [t["name"] for t in listed["toolsets"]] == ["play", "flow", "bridge", "passthrough"]
            play = data(await client.call_tool("describe_toolset", {"name": "play"}))
            assert play["tools"][0]["inputSchema"]["required"] == ["x"]
            result = await client.call_tool("call_tool", {"port": game.port, "name": "drop", "arguments": {"x": 1.2}})
            body = data(result)
            assert body["applied"] is True and body["confirmation"] == "completedCommandId"
            assert body["game"]["score"] == 10
            assert structured(result) == body
            summary = data(await client.call_tool("call_tool", {"name": "get_state", "arguments": {"summary": True}}))
            assert summary["game"]["score"] == 10
    anyio.run(main)


@pytest.mark.parametrize("tool,args,prefix,needle", [
    ("call_tool", {"name": "drop", "arguments": {"x": "a"}}, "BridgeUsageError:", "must be of type number"),
    ("describe_toolset", {"name": "nope"}, "BridgeUsageError:", "no toolset 'nope'"),
    ("list_toolsets", {"port": 70000}, "BridgeUsageError:", "65535"),
    ("call_tool", {"name": "fly"}, "BridgeUsageError:", "accepts:"),
    ("stop_instance", {}, "BridgeUsageError:", "not launched by this bridge"),
    ("call_tool", {"arguments": {}}, "BridgeUsageError:", "name"),
    ("no_such_tool", {}, "BridgeUsageError:", "Unknown tool"),
])
def test_errors_are_results_that_start_with_their_name(game: FakeGame, tool: str, args: dict, prefix: str, needle: str) -> None:
    async def main() -> None:
        async with connect(app_for(game.port)) as client:
            result = await client.call_tool(tool, args)
            assert is_error(result)
            assert text(result).startswith(prefix) and needle in text(result)
            # and the server keeps serving
            assert data(await client.call_tool("call_tool", {"name": "get_health"}))["ok"] is True
    anyio.run(main)


def test_offline_and_not_a_game_and_timeout() -> None:
    with FakeGame(apply=False) as frozen, FakeGame(manifest=None) as impostor:
        impostor.overrides["/health"] = lambda h: h.send_json(404, {})
        dead = FakeGame()
        dead_port = dead.port
        dead._server.server_close()

        async def main() -> None:
            async with connect(app_for(frozen.port, timeout_ms=300, launch_hint="make run PORT={port}")) as client:
                r = await client.call_tool("call_tool", {"name": "get_health", "port": dead_port})
                assert text(r).startswith("GameOffline: No game is answering")
                assert f"make run PORT={dead_port}" in text(r)
                r = await client.call_tool("list_toolsets", {"port": impostor.port})
                assert text(r).startswith("NotAGameSurface: Something is listening")
                assert "HTTP 404" in text(r)
                r = await client.call_tool("call_tool", {"name": "drop", "arguments": {"x": 1}})
                assert text(r).startswith("CommandTimeout: Command 'drop' was queued")
        anyio.run(main)


@pytest.mark.slow
def test_a_hung_game_on_one_port_does_not_stall_another(game: FakeGame) -> None:
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # accepts (kernel backlog), never answers
    order: list[str] = []
    try:
        async def main() -> None:
            async with connect(app_for(game.port, timeout_ms=1500)) as client:
                async def slow() -> None:
                    r = await client.call_tool("call_tool", {"name": "get_health", "port": hung.getsockname()[1]})
                    assert text(r).startswith("GameOffline") and "did not complete" in text(r)
                    order.append("hung")

                async def fast() -> None:
                    await anyio.sleep(0.05)
                    for _ in range(5):
                        data(await client.call_tool("call_tool", {"name": "drop", "arguments": {"x": 0}}))
                    order.append("fast")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    tg.start_soon(fast)
        anyio.run(main)
    finally:
        hung.close()
    assert order == ["fast", "hung"]


def test_composites_through_the_client(game: FakeGame) -> None:
    calls: list[str] = []

    def settle(ctx) -> dict:
        calls.append("settle")
        ctx.command_and_sync("drop", {"x": ctx.args["x"]})
        return {"settled": ctx.call("wait_for", {"path": "game.moving", "equals": 0})["matched"]}

    composites = [
        Composite(name="drop_and_settle", description="Drop and wait.", only="Fake Game",
                  args=[{"name": "x", "type": "number", "required": True}], run=settle),
        Composite(name="restart", description="Shadows the game's restart.", run=lambda ctx: {"mine": True}),
        Composite(name="orbit", description="Not for this game.", only="Orbital Freight", run=lambda ctx: {}),
        Composite(name="boom", description="Raises.", run=lambda ctx: {}["missing"]),
    ]

    async def main() -> None:
        async with connect(app_for(game.port, composites=composites)) as client:
            listed = data(await client.call_tool("list_toolsets", {}))
            bridge = next(t for t in listed["toolsets"] if t["name"] == "bridge")
            assert "drop_and_settle" in bridge["tools"] and "orbit" not in bridge["tools"]
            described = data(await client.call_tool("describe_toolset", {"name": "bridge"}))
            schema = next(t for t in described["tools"] if t["name"] == "drop_and_settle")["inputSchema"]
            assert schema["required"] == ["x"]
            assert data(await client.call_tool("call_tool", {"name": "drop_and_settle", "arguments": {"x": 1}}))["settled"] is True
            assert data(await client.call_tool("call_tool", {"name": "restart"}))["mine"] is True
            r = await client.call_tool("call_tool", {"name": "orbit"})
            assert is_error(r) and "rejected command 'orbit'" in text(r)
            r = await client.call_tool("call_tool", {"name": "boom"})
            assert is_error(r) and text(r).startswith("BridgeUsageError: Composite 'boom' failed") and "KeyError" in text(r)
            assert data(await client.call_tool("call_tool", {"name": "get_health"}))["ok"] is True
    anyio.run(main)
    assert calls == ["settle"]


def test_eager_advertises_game_tools_and_announces_changes(game: FakeGame) -> None:
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(message)

    async def main() -> None:
        app = app_for(game.port, eager=True)
        assert dump(app.initialization_options())["capabilities"]["tools"]["listChanged"] is True
        async with connect(app, message_handler=handler) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names[:7] == SEVEN
            assert {"get_state", "wait_for", f"p{game.port}_drop", f"p{game.port}_restart"} <= set(names)
            assert len(names) == len(set(names))
            r = data(await client.call_tool(f"p{game.port}_drop", {"x": 1}))
            assert r["applied"] is True and r["port"] == game.port and r["game"]["score"] == 10
            manifest = copy.deepcopy(DEFAULT_MANIFEST)
            manifest["toolsets"][0]["tools"].append({"name": "noop", "description": "new"})
            game.manifest = manifest
            await client.call_tool("call_tool", {"name": "noop"})  # the miss re-fetches: the manifest changed
            with anyio.fail_after(5):
                while not any("tools/list_changed" in _dump(n) for n in notes):
                    await anyio.sleep(0.01)
            names = [t.name for t in (await client.list_tools()).tools]
            assert f"p{game.port}_noop" in names
    anyio.run(main)


def _dump(message: Any) -> str:
    root = getattr(message, "root", message)
    try:
        return json.dumps(dump(root))
    except Exception:
        return repr(root)


def test_the_list_instances_report_through_the_client(tmp_path) -> None:
    """Live (registry + scan), stale, broken, not-a-game and free, in one call."""
    import subprocess
    import sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    reg = tmp_path / "instances"
    reg.mkdir()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = child.pid

    class NotAGame(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: Any) -> None:
            pass

    impostor = ThreadingHTTPServer(("127.0.0.1", 0), NotAGame)
    threading.Thread(target=impostor.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    free_port = free.getsockname()[1]
    free.close()
    try:
        with FakeGame() as registered, FakeGame(manifest=None) as scanned:
            (reg / f"{os.getpid()}.json").write_text(json.dumps({
                "name": "Stale Name", "version": "0", "protocol": 1, "port": registered.port,
                "pid": os.getpid(), "host": "127.0.0.1", "started": "2026-11-30T00:00:00Z", "cwd": "/checkouts/main"}))
            (reg / f"{dead}.json").write_text(json.dumps({"port": free_port, "pid": dead, "host": "127.0.0.1"}))
            (reg / "123.json").write_text("{ not json")
            ports = (registered.port, scanned.port, impostor.server_address[1], free_port)
            config = Config(port=registered.port, environ={}, scan_range=ports, registry_dir=reg)

            async def main() -> dict:
                async with connect(BridgeServer(Bridge(config))) as client:
                    return data(await client.call_tool("list_instances", {}))
            report = anyio.run(main)
    finally:
        impostor.shutdown()
        impostor.server_close()
    live = {e["port"]: e for e in report["live"]}
    assert report["registryDir"] == str(reg)
    first = live[registered.port]
    assert first["discovery"] == "both" and first["status"] == "live" and first["manifest"] == "game"
    assert first["game"] == "Fake Game" and first["version"] == "1.2.3"  # from /tools, not the entry
    assert first["pid"] == os.getpid() and first["cwd"] == "/checkouts/main"
    assert first["toolsets"] == ["play", "flow", "bridge"] and first["screen"] == "GameScreen"
    assert first["launchedByThisBridge"] is False
    second = live[scanned.port]
    assert second["discovery"] == "scan" and second["status"] == "live-no-manifest" and second["manifest"] == "fallback"
    assert [s["port"] for s in report["stale"]] == [free_port]
    assert [n["port"] for n in report["notAGame"]] == [impostor.server_address[1]]
    assert free_port in report["free"]
    assert any("123.json" in p["path"] for p in report["registryProblems"])
    assert (reg / f"{dead}.json").exists()  # nothing deleted without prune


def test_eager_refresh_announces_a_manifest_changed_without_any_call(game: FakeGame) -> None:
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(message)

    async def main() -> None:
        app = app_for(game.port, eager=True)
        async with connect(app, message_handler=handler) as client:
            assert f"p{game.port}_drop" in [t.name for t in (await client.list_tools()).tools]
            manifest = copy.deepcopy(DEFAULT_MANIFEST)
            manifest["toolsets"][0]["tools"].append({"name": "rebuilt", "description": "new"})
            game.manifest = manifest
            await anyio.to_thread.run_sync(app.refresh_eager)  # what the 2 s refresh loop runs
            with anyio.fail_after(5):
                while not any("tools/list_changed" in _dump(n) for n in notes):
                    await anyio.sleep(0.01)
            assert f"p{game.port}_rebuilt" in [t.name for t in (await client.list_tools()).tools]
    anyio.run(main)


@pytest.mark.parametrize("depth", [500, 900])
def test_a_deeply_nested_state_does_not_take_the_session_down(game: FakeGame, depth: int) -> None:
    body = ('{"frame": 1, "deep": ' + "[" * depth + "]" * depth + "}").encode()
    game.overrides["/state"] = lambda h: h.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    rejected = b'{"accepted": false, "error": "no", "detail": ' + b"[" * depth + b"]" * depth + b"}"
    game.overrides["/command"] = lambda h: h.wfile.write(b"HTTP/1.0 400 X\r\nContent-Length: %d\r\n\r\n" % len(rejected) + rejected)

    async def main() -> None:
        async with connect(app_for(game.port)) as client:
            state = data(await client.call_tool("call_tool", {"name": "get_state"}))
            assert state["frame"] == 1
            r = await client.call_tool("call_tool", {"name": "drop", "arguments": {"x": 1}})
            assert is_error(r) and text(r).startswith("BridgeUsageError: The game on port")
            assert data(await client.call_tool("call_tool", {"name": "get_health"}))["ok"] is True
    anyio.run(main)
