"""Cancellation ends the work.

A client that cancels a call (``notifications/cancelled``: the user pressed Esc) must
not leave a worker thread polling, sleeping or waiting until the call's own deadline.
Every test here starts calls whose deadlines are a minute away, cancels them through the
real MCP client, and requires their work to have ended (the adapter's count of calls
whose thread still runs is back to 0, the threads are reused) long before that minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import anyio
import psutil
import pytest

from game_bridge_mcp import polling
from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.core.composites import Composite
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import ProcessGuard, write_declaration
from mcp_harness import connect, start_call
from peers.fakegame import FakeGame
from peers.hostile import silent

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
#: The calls' own deadlines: far beyond the waits below, so only cancellation ends them.
LONG_MS = 60_000
#: How long cancelled work may take to end in these tests (the promise is about 100 ms;
#: the margin is for a loaded machine, and still a sixth of the calls' own deadline).
ENDED_WITHIN_S = 10.0
N = 6


async def wait_async(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        await anyio.sleep(0.005)


def cancel_calls(app: BridgeServer, calls: list[tuple[str, dict[str, Any]]], *,
                 started: Callable[[], Any] | None = None) -> None:
    """Start ``calls`` at once through the real client, wait until their work runs
    (and ``started`` holds), cancel them all, and require their work to end."""
    async def main() -> None:
        async with connect(app) as client:
            async with anyio.create_task_group() as tasks:
                running = [await start_call(client, tasks, name, args) for name, args in calls]
                await wait_async(lambda: app.calls_in_flight == len(calls), 10, "the calls started")
                if started is not None:
                    await wait_async(started, 10, "the calls reached their wait")
                for call in running:
                    await call.cancel()
                await wait_async(lambda: app.calls_in_flight == 0, ENDED_WITHIN_S, "cancelled work ended")
                assert all(call.result is None for call in running)  # nobody got an answer
            # The session still serves after the cancellations.
            listed = await client.list_tools()
            assert "call_tool" in {tool.name for tool in listed.tools}
    anyio.run(main)


def test_cancelled_waits_polls_and_confirmations_end_and_threads_are_reused() -> None:
    with FakeGame(apply=False) as game:  # commands are never applied: confirmations wait
        app = BridgeServer(Bridge(Config(port=game.port, scan=False, registry=False)))
        calls = [("call_tool", {"name": "wait_for", "arguments": {"path": "game.never", "equals": 1,
                                                                  "timeoutMs": LONG_MS}}),
                 ("call_tool", {"name": "drop", "arguments": {"x": 1}}),
                 ("call_tool", {"name": "raw_command", "arguments": {"command": "add_score", "timeoutMs": LONG_MS}})]
        app.bridge.config.timeout_ms = LONG_MS
        before = threading.active_count()
        for _round in range(3):  # cancelled calls' threads are reused, not piled up
            cancel_calls(app, [calls[i % len(calls)] for i in range(N)])
        assert threading.active_count() <= before + N + 2
        polls = len(game.requests)
        # No thread is still polling the game for the cancelled calls.
        time.sleep(0.2)
        assert len(game.requests) == polls


def test_a_request_to_a_frozen_game_ends_when_cancelled(serve: Any) -> None:
    peer = serve(silent())  # accepts, reads the request, never answers
    app = BridgeServer(Bridge(Config(port=peer.port, scan=False, registry=False, timeout_ms=LONG_MS)))
    cancel_frozen = [("call_tool", {"name": "get_state"})] * N
    async def main() -> None:
        async with connect(app) as client:
            async with anyio.create_task_group() as tasks:
                running = [await start_call(client, tasks, name, args) for name, args in cancel_frozen]
                await wait_async(lambda: len(peer.requests) >= N, 10, "the requests reached the game")
                for call in running:
                    await call.cancel()
                await wait_async(lambda: app.calls_in_flight == 0, ENDED_WITHIN_S, "cancelled requests ended")
    anyio.run(main)
    assert app.bridge.client(peer.port).generation == 0  # a cancel is not the game going offline


def test_a_composite_sleeping_is_woken_by_the_cancel() -> None:
    naps: list[str] = []

    def nap(ctx: Any) -> dict:
        naps.append("started")
        ctx.sleep(LONG_MS)
        naps.append("woke")  # never: the sleep raises Cancelled
        return {}

    with FakeGame() as game:
        app = BridgeServer(Bridge(Config(port=game.port, scan=False, registry=False),
                                  composites=[Composite("nap", "Sleep a minute.", nap)]))
        cancel_calls(app, [("call_tool", {"name": "nap"})] * 3, started=lambda: len(naps) == 3)
    assert naps == ["started"] * 3


def test_a_cancelled_launch_stops_waiting_and_reaps_the_booting_game(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path, "--boot-delay", "60", timeout_ms=LONG_MS)
    config = Config(environ=guard.env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(decl))
    bridge = Bridge(config)
    app = BridgeServer(bridge)
    try:
        cancel_calls(app, [("launch_instance", {"timeoutMs": LONG_MS})],
                     started=lambda: bridge._launcher is not None and bridge._launcher.launched_ports())
        assert bridge.launched_ports() == []
    finally:
        bridge.shutdown()


def test_a_cancelled_stop_escalates_at_once(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path, "--ignore-close", "--ignore-term")
    config = Config(environ=guard.env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(decl))
    bridge = Bridge(config)
    app = BridgeServer(bridge)
    try:
        launched = bridge.run_tool("launch_instance", {})
        game = psutil.Process(launched["pid"])
        instance = bridge.launcher()._instances[launched["port"]]
        cancel_calls(app, [("stop_instance", {"port": launched["port"], "graceMs": LONG_MS})],
                     started=lambda: instance.stopping)  # in its grace wait: the game ignores close
        assert not game.is_running() or game.status() == psutil.STATUS_ZOMBIE
        assert bridge.launched_ports() == []
    finally:
        bridge.shutdown()


def test_sleep_and_watching_without_and_with_a_token() -> None:
    polling.sleep(0.001)  # no call: a plain sleep
    token = polling.CancelToken()
    fired: list[str] = []
    threading.Timer(0.05, token.cancel).start()
    with polling.cancel_scope(token):
        with polling.on_cancel(lambda: fired.append("aborted")):
            with pytest.raises(polling.Cancelled):
                polling.sleep(LONG_MS / 1000)
        with pytest.raises(polling.Cancelled):
            with polling.on_cancel(lambda: fired.append("late")):
                pass
        with pytest.raises(polling.Cancelled):  # poll_until's own check, whatever its sleep
            polling.poll_until(lambda: None, polling.Deadline(60), first_s=0.01, max_s=0.01, sleep=lambda s: None)
    assert fired == ["aborted"]
    assert polling.current_token() is None


# ------------------------------------------------------------------------- over stdio
class RawClient:
    """JSON-RPC lines to a real server process: requests sent without waiting."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.next_id = 0
        self.replies: dict[int, Any] = {}

    def send(self, method: str, params: dict[str, Any], *, notify: bool = False) -> int | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return None if notify else self.next_id

    def reply(self, ident: int) -> Any:
        while ident not in self.replies:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            assert line, "the server closed stdout"
            message = json.loads(line)
            if "id" in message and ("result" in message or "error" in message):
                self.replies[message["id"]] = message
        return self.replies.pop(ident)


@pytest.mark.slow
@pytest.mark.parametrize("sdk_dispatch", [False, True], ids=["fast-path", "sdk-dispatch"])
def test_cancelled_calls_over_stdio_do_not_pile_up_threads(tmp_path: Path, sdk_dispatch: bool) -> None:
    with FakeGame() as game:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
        if sdk_dispatch:  # tools/call through the SDK's request machinery, not the stdio fast path
            env["GAME_BRIDGE_SDK_DISPATCH"] = "1"
        proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp", "--port", str(game.port), "--no-scan",
                                 "--no-registry"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path)
        client = RawClient(proc)
        try:
            ident = client.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                               "clientInfo": {"name": "test", "version": "0"}})
            assert "result" in client.reply(ident)  # type: ignore[arg-type]
            client.send("notifications/initialized", {}, notify=True)
            server = psutil.Process(proc.pid)
            counts = []
            for _round in range(3):
                polls = sum(1 for r in game.requests if r == "/state")
                sent = [client.send("tools/call", {"name": "call_tool", "arguments": {"name": "wait_for", "arguments": {
                    "path": "game.never", "equals": 1, "timeoutMs": LONG_MS}}}) for _ in range(N)]
                wait_quiet = time.monotonic() + 10
                while sum(1 for r in game.requests if r == "/state") < polls + 2 * N:
                    assert time.monotonic() < wait_quiet, "the calls did not start polling"
                    time.sleep(0.01)
                for ident in sent:
                    client.send("notifications/cancelled", {"requestId": ident, "reason": "Esc"}, notify=True)
                # The polls stop: the game sees a quiet spell well before the calls' deadline.
                deadline = time.monotonic() + ENDED_WITHIN_S
                while True:
                    seen = len(game.requests)
                    time.sleep(0.3)
                    if len(game.requests) == seen:
                        break
                    assert time.monotonic() < deadline, "cancelled calls kept polling the game"
                counts.append(server.num_threads())
            # The threads of cancelled calls are reused by the next round, not added to.
            assert counts[-1] <= counts[0] + 2, counts
            ident = client.send("tools/call", {"name": "call_tool", "arguments": {"name": "get_state"}})
            answer = client.reply(ident)  # type: ignore[arg-type]
            assert answer["result"]["isError"] is False
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdout:
                proc.stdout.close()
