"""MCP's conventions, through the real client on the SDK this venv has: the logging
capability (logging/setLevel, the bridge's own log lines as notifications, stderr left at
its level) over stdio, and progress notifications during wait_for, call_tool ... until,
advance and list_instances when, and only when, the client asks for progress."""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.mcp_server import logs
from game_bridge_mcp.mcp_server.adapter import _SDK2, BridgeServer
from kit_helpers import demo
from loop_helpers import bridge_for
from mcp_harness import connect, data, dump
from peers.fakegame import FakeGame

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, Any, Any]] = []

    async def __call__(self, done: float, total: Any, message: Any) -> None:
        self.seen.append((done, total, message))


def test_levels_map_both_ways() -> None:
    assert [logs.mcp_level(n) for n in (5, 10, 20, 25, 30, 40, 50, 60)] == [
        "debug", "debug", "info", "notice", "warning", "error", "critical", "emergency"]
    assert logs.python_level("DEBUG") == 10 and logs.python_level("alert") == 55
    assert logs.python_level("nonsense") == logging.WARNING


def test_the_logging_capability_is_advertised_and_set_level_answers() -> None:
    with FakeGame() as game:
        app = BridgeServer(bridge_for(game.port))

        async def main() -> None:
            async with connect(app) as client:
                capabilities = client.server_capabilities if _SDK2 else client.get_server_capabilities()
                assert dump(capabilities).get("logging") == {}  # what the client was told at initialize
                result = await client.set_logging_level("info")
                assert dump(result) == {}

        anyio.run(main)
    assert app.logs.client_level == "info"
    assert dump(app.initialization_options())["capabilities"]["logging"] == {}


@pytest.mark.slow
@pytest.mark.parametrize("tool, arguments, needle, total", [
    ("wait_for", {"path": "game.score", "equals": 999, "timeoutMs": 1200}, "waiting for game.score equals 999", 1200),
])
def test_wait_for_reports_progress_when_asked(tool: str, arguments: dict, needle: str, total: int) -> None:
    with FakeGame() as game:
        app = BridgeServer(bridge_for(game.port))
        progress = Progress()

        async def main() -> dict:
            async with connect(app) as client:
                asked = data(await client.call_tool("call_tool", {"name": tool, "arguments": arguments},
                                                    progress_callback=progress))
                unasked = Progress()
                data(await client.call_tool("call_tool", {"name": tool, "arguments": arguments}))
                assert unasked.seen == []
                return asked

        answer = anyio.run(main)
    assert answer["matched"] is False
    assert len(progress.seen) >= 2, progress.seen  # 1.2 s, one report every 0.3 s after the first 0.3 s
    assert all(t == total and needle in m for _d, t, m in progress.seen), progress.seen
    done = [d for d, _t, _m in progress.seen]
    assert done == sorted(done) and 250 <= done[0] <= total


@pytest.mark.slow
def test_until_reports_progress_while_it_waits_and_none_when_not_asked() -> None:
    with FakeGame() as game:
        app = BridgeServer(bridge_for(game.port))
        progress, other = Progress(), Progress()

        async def main() -> tuple[dict, dict]:
            async with connect(app) as client:
                until = {"path": "game.score", "equals": 12345, "timeoutMs": 1000}
                slow = data(await client.call_tool("call_tool", {"name": "add_score", "arguments": {"points": 1},
                                                                 "until": until}, progress_callback=progress))
                quick = data(await client.call_tool("call_tool", {"name": "add_score", "arguments": {"points": 1},
                                                                  "until": {"path": "game.score", "changes": True}},
                                                    progress_callback=other))
                return slow, quick

        slow, quick = anyio.run(main)
    assert slow["settled"] is False and quick["settled"] is True
    assert progress.seen and all(t == 1000 and "game.score equals 12345" in m for _d, t, m in progress.seen)
    assert other.seen == []  # settled at once: nothing to report


def test_advance_until_reports_the_frames_it_has_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from game_bridge_mcp import polling

    monkeypatch.setattr(polling, "PROGRESS_INTERVAL_S", 0.0)  # every frame, however fast the steps are
    with demo() as port:
        app = BridgeServer(bridge_for(port))
        progress = Progress()

        async def main() -> dict:
            async with connect(app) as client:
                return data(await client.call_tool("call_tool", {"port": port, "name": "advance", "arguments": {
                    "until": {"path": "game.score", "equals": -1}, "maxFrames": 60}}, progress_callback=progress))

        answer = anyio.run(main)
    assert answer["matched"] is False
    assert [d for d, _t, _m in progress.seen] == list(range(1, 61))  # after each frame that did not match
    assert all(t == 60 and "advancing until game.score equals -1" in m for _d, t, m in progress.seen)


def test_list_instances_reports_its_probes_when_a_port_is_slow() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel does) and never answers: its probe runs to its deadline
    try:
        with FakeGame() as game:
            ports = f"{game.port},{silent.getsockname()[1]}"
            app = BridgeServer(Bridge(Config(port=game.port, environ={}, registry=False, timeout_ms=1500)))
            progress = Progress()

            async def main() -> dict:
                async with connect(app) as client:
                    return data(await client.call_tool("list_instances", {"range": ports},
                                                       progress_callback=progress))

            listed = anyio.run(main)
    finally:
        silent.close()
    assert [e["port"] for e in listed["live"]] == [game.port]
    assert progress.seen, listed
    assert all(t == 2 and m == f"probed {int(d)} of 2 ports" for d, t, m in progress.seen), progress.seen


# ----------------------------------------------------------------------------- over stdio

async def _stdio_session(tmp_path: Path, port: int, env: dict[str, str], errlog: Any, body: Any) -> Any:
    """The SDK's own stdio client (either major) against the real server in a subprocess."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "game_bridge_mcp", "--port", str(port),
                                                                 "--no-scan", "--no-registry"],
                                   env=env, cwd=str(tmp_path))
    received: list[Any] = []

    async def on_log(params: Any) -> None:
        received.append(params)

    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as session:
            await session.initialize()
            return await body(session, received)


@pytest.mark.slow
def test_the_bridges_log_lines_reach_the_client_at_its_level_and_stderr_keeps_its_own(tmp_path: Path) -> None:
    """Over stdio, the real server: with the client's level at info, the bridge's info line
    (the first call answered on the fast path says so) arrives as a notification, while
    stderr, at WARNING, does not print it."""
    errlog = tmp_path / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GAME_BRIDGE_")}
    env.update({"PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home"),
                "GAME_BRIDGE_LOG": "loud"})  # not a level: stderr says so (a warning) and stays at WARNING

    async def body(client: Any, received: list[Any]) -> list[Any]:
        await client.set_logging_level("info")
        data(await client.call_tool("call_tool", {"name": "get_health"}))
        deadline = time.monotonic() + 15
        while not any("answered directly" in str(getattr(m, "data", "")) for m in received):
            assert time.monotonic() < deadline, [dump(m) for m in received]
            await anyio.sleep(0.02)
        return received

    with FakeGame() as game, open(errlog, "w") as err:
        received = anyio.run(_stdio_session, tmp_path, game.port, env, err, body)
    line = next(m for m in received if "answered directly" in str(m.data))
    assert line.level == "info" and line.logger.startswith("game_bridge_mcp")
    stderr = errlog.read_text()
    assert "GAME_BRIDGE_LOG='LOUD' is not a log level" in stderr  # stderr is read here, and
    assert "answered directly" not in stderr  # stays at WARNING whatever the client asked for
