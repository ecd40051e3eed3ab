"""The stdio fast path for ``tools/call`` (mcp_server/stdio/fastpath.py).

In-process: which lines it takes and which it leaves to the SDK, cancellation, the cap.
Over stdio: its answers are the SDK's, field for field, for every protocol version it
handles (the same calls through a server with ``GAME_BRIDGE_SDK_DISPATCH=1``), progress
notifications arrive, and stdout stays pure JSON-RPC with answers and SDK output mixed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from game_bridge_mcp import Composite
from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.mcp_server.adapter import PROTOCOL_VERSIONS, SESSIONLESS_VERSIONS
from game_bridge_mcp.mcp_server.stdio.fastpath import DISABLE_ENV, KNOWN_VERSIONS, FastPath
from fast_answers import CALLS, stable
from launch_helpers import ProcessGuard, write_declaration
from peers.fakegame import FakeGame

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]
INIT_ANSWER = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "game-bridge-mcp", "version": "0"}}})


class Sink:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.changed = threading.Condition()

    def write_line(self, data: bytes | list[bytes]) -> None:
        data = data if isinstance(data, bytes) else b"".join(data)
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        with self.changed:
            self.lines.append(json.loads(data))
            self.changed.notify_all()

    def wait(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.lines) >= count, timeout), self.lines
            return list(self.lines)


def nap(ctx: Any) -> dict[str, Any]:
    ctx.sleep(30_000)  # ended by a cancel
    return {"slept": True}


@pytest.fixture
def fast() -> Iterator[tuple[FastPath, Sink, FakeGame]]:
    with FakeGame() as game:
        bridge = Bridge(Config(port=game.port, environ={}, scan=False, registry=False),
                        composites=[Composite(name="nap", description="sleeps", run=nap)])
        sink = Sink()
        path = FastPath(BridgeServer(bridge), sink, max_calls=2, max_queued=1)
        yield path, sink, game
        path.close()


def request(ident: Any, name: str = "call_tool", arguments: Any = None, **extra: Any) -> str:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}) + "\n"


def cancel(ident: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}}) + "\n"


def initialized(path: FastPath) -> None:
    path.outgoing(INIT_ANSWER)
    assert path.incoming('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n') is False


def test_nothing_is_taken_before_the_session_is_initialized(fast: Any) -> None:
    path, sink, _game = fast
    line = request(1, arguments={"name": "get_health"})
    assert path.incoming(line) is False  # no protocol version yet
    path.outgoing(INIT_ANSWER)
    assert path.incoming(line) is False  # no notifications/initialized yet
    assert path.incoming('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n') is False
    assert path.incoming(line) is True
    (answer,) = sink.wait(1)
    assert answer["id"] == 1 and answer["result"]["isError"] is False
    assert json.loads(answer["result"]["content"][0]["text"])["ok"] is True
    assert answer["result"]["structuredContent"]["ok"] is True


def test_an_unknown_protocol_version_leaves_every_call_to_the_sdk(fast: Any) -> None:
    path, _sink, _game = fast
    path.outgoing(INIT_ANSWER.replace("2025-06-18", "2099-01-01"))
    path.incoming('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    assert path.incoming(request(1, arguments={"name": "get_health"})) is False


@pytest.mark.parametrize("line", [
    request(True, arguments={"name": "get_health"}),
    request(None, arguments={"name": "get_health"}),
    request(1.5, arguments={"name": "get_health"}),
    request(1, arguments=["not", "an", "object"]),
    request(1, name=7),  # type: ignore[arg-type]
    request(1, arguments={}, _meta={"progressToken": {"odd": 1}}),
    request(1, arguments={}, _meta="odd"),
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}) + "\n",
    json.dumps({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}) + "\n",
    json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}]) + "\n",
    '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"\n',
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "tools/call"}}) + "\n",
])
def test_odd_requests_are_left_to_the_sdk(fast: Any, line: str) -> None:
    path, sink, _game = fast
    initialized(path)
    assert path.incoming(line) is False
    assert sink.lines == []


def test_a_cancelled_call_ends_without_an_answer_and_frees_its_place(fast: Any) -> None:
    path, sink, _game = fast
    initialized(path)
    assert path.incoming(request("a", arguments={"name": "nap"})) is True
    assert path.incoming(request("b", arguments={"name": "nap"})) is True
    assert path.incoming(request("c", arguments={"name": "nap"})) is True  # the cap (2): it waits its turn
    assert path.full and path.queued == 1
    assert path.incoming(request("d", arguments={"name": "nap"})) is False  # the queue is full: the SDK's
    assert path.incoming(request("a", arguments={"name": "nap"})) is False  # a duplicate id: the SDK answers
    assert path.incoming(request("c", arguments={"name": "nap"})) is False  # a duplicate of a queued one too
    assert path.incoming(cancel("nobody")) is False  # not ours: the SDK's to ignore
    assert path.incoming(cancel("c")) is True and path.queued == 0 and not path.full  # it never starts
    started = time.monotonic()
    assert path.incoming(cancel("a")) is True and path.incoming(cancel("b")) is True
    deadline = time.monotonic() + 5
    while path.running:
        assert time.monotonic() < deadline, "cancelled calls kept running"
        time.sleep(0.01)
    assert time.monotonic() - started < 5
    assert sink.lines == []  # a cancelled request gets no answer
    assert path.incoming(request(9, arguments={"name": "get_health"})) is True  # their places are free again
    assert sink.wait(1)[0]["id"] == 9


def test_a_queued_call_runs_when_a_place_frees(fast: Any) -> None:
    path, sink, _game = fast
    initialized(path)
    assert path.incoming(request("a", arguments={"name": "nap"})) is True
    assert path.incoming(request("b", arguments={"name": "nap"})) is True
    assert path.incoming(request("q", arguments={"name": "get_health"})) is True and path.queued == 1
    assert path.incoming(cancel("a")) is True
    answer = sink.wait(1)[0]  # a's place goes to q, which answers; a never does
    assert answer["id"] == "q" and "result" in answer and path.queued == 0


def test_errors_are_answered_as_results(fast: Any) -> None:
    path, sink, _game = fast
    initialized(path)
    path.incoming(request(1, arguments={"name": "get_health", "port": 1}))
    path.incoming(request(2, name="no_such_tool", arguments={}))
    answers = {a["id"]: a["result"] for a in sink.wait(2)}
    assert answers[1]["isError"] is True and answers[1]["content"][0]["text"].startswith("GameOffline:")
    assert answers[1]["structuredContent"]["error"] == "GameOffline"
    assert answers[2]["isError"] is True and "Unknown tool" in answers[2]["content"][0]["text"]


def test_close_cancels_what_is_running(fast: Any) -> None:
    path, sink, _game = fast
    initialized(path)
    assert path.incoming(request(1, arguments={"name": "nap"})) is True
    started = time.monotonic()
    path.close(timeout_s=5)
    assert path.running == 0 and time.monotonic() - started < 5
    assert sink.lines == []


# ------------------------------------------------------------------ over stdio
class Raw:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.next = 0
        self.seen: list[dict[str, Any]] = []
        #: A sessionless version's _meta, added to every call.
        self.envelope: dict[str, Any] = {}

    def send(self, method: str, params: dict[str, Any], *, notify: bool = False) -> int | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        ident = None
        if not notify:
            self.next += 1
            ident = message["id"] = self.next
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return ident

    def reply(self, ident: int) -> dict[str, Any]:
        while True:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            assert line, "the server closed stdout"
            message = json.loads(line)  # every line is JSON-RPC
            assert message.get("jsonrpc") == "2.0"
            self.seen.append(message)
            if message.get("id") == ident:
                return message

    def call(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.envelope:
            params = {**params, "_meta": {**params.get("_meta", {}), **self.envelope}}
        ident = self.send("tools/call", params)
        assert ident is not None
        return self.reply(ident)


def serve(tmp_path: Path, port: int, version: str, *, fast: bool, env: dict[str, str] | None = None,
          args: tuple[str, ...] = ()) -> Raw:
    environ = {**(env or os.environ), "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home"),
               "GAME_BRIDGE_LOG": "INFO"}
    environ.pop(DISABLE_ENV, None)
    if not fast:
        environ[DISABLE_ENV] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp", "--port", str(port), "--no-scan",
                             "--no-registry", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environ, cwd=tmp_path)
    raw = Raw(proc)
    if version in SESSIONLESS_VERSIONS:  # no handshake: every request carries its version
        raw.envelope = {"io.modelcontextprotocol/protocolVersion": version,
                        "io.modelcontextprotocol/clientCapabilities": {}}
        return raw
    ident = raw.send("initialize", {"protocolVersion": version, "capabilities": {},
                                    "clientInfo": {"name": "test", "version": "0"}})
    assert ident is not None
    assert raw.reply(ident)["result"]["protocolVersion"] == version
    raw.send("notifications/initialized", {}, notify=True)
    return raw


def stop(raw: Raw) -> str:
    assert raw.proc.stdin is not None
    raw.proc.stdin.close()
    try:
        raw.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        raw.proc.kill()
        raw.proc.wait(timeout=10)
    stderr = raw.proc.stderr.read() if raw.proc.stderr else ""
    for stream in (raw.proc.stdout, raw.proc.stderr):
        if stream:
            stream.close()
    return stderr


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(PROTOCOL_VERSIONS))
def test_fast_answers_are_the_sdks_field_for_field(tmp_path: Path, version: str) -> None:
    """Every protocol version the installed SDK serves, through both paths: the fast path
    answers those it is proven for (KNOWN_VERSIONS), leaves every other to the SDK, and the
    answers are the same either way."""
    answers: dict[bool, list[Any]] = {}
    logs: dict[bool, str] = {}
    with FakeGame() as game:
        for fast in (True, False):
            raw = serve(tmp_path, game.port, version, fast=fast)
            try:
                raw.call({"name": "list_toolsets", "arguments": {}})  # the manifest, read once by both
                answers[fast] = [stable(raw.call(params)["result"]) for params in CALLS]
            finally:
                logs[fast] = stop(raw)
    assert answers[True] == answers[False]
    assert ("answered directly" in logs[True]) is (version in KNOWN_VERSIONS)
    assert "answered directly" not in logs[False]


@pytest.mark.slow
def test_progress_and_sdk_output_share_stdout_as_whole_lines(tmp_path: Path, guard: ProcessGuard) -> None:
    decl = write_declaration(tmp_path, "--boot-delay", "0.6", "--lines", "2")
    raw = serve(tmp_path, 1, "2025-06-18", fast=True, env=guard.env, args=("--config", str(decl)))
    try:
        launch = raw.send("tools/call", {"name": "launch_instance", "arguments": {"timeoutMs": 10000},
                                         "_meta": {"progressToken": "boot"}})
        pings = [raw.send("ping", {}) for _ in range(20)]  # the SDK's answers, written meanwhile
        assert launch is not None
        answer = raw.reply(launch)
        for ident in pings:
            if not any(m.get("id") == ident for m in raw.seen):
                raw.reply(ident)  # type: ignore[arg-type]
        assert answer["result"]["isError"] is False
        progress = [m["params"] for m in raw.seen if m.get("method") == "notifications/progress"]
        assert progress and all(p["progressToken"] == "boot" and p["total"] == 10000 for p in progress)
        assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)
    finally:
        stop(raw)


def nested(depth: int, leaf: Any = "bottom") -> Any:
    value = leaf
    for level in range(depth):
        value = {"d": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize("padding", [0, 100], ids=["few brackets", "brackets in strings"])
def test_structured_content_is_cut_below_its_depth_alike_on_both_paths(padding: int) -> None:
    """An answer nested STRUCTURED_DEPTH deep goes out whole; one level more is cut there, on
    the fast path's line exactly as in the SDK's result (whether the text has few brackets,
    so no walk is needed, or many inside strings, so the tree is walked)."""
    from game_bridge_mcp.mcp_server.encoding import STRUCTURED_DEPTH, TOO_DEEP
    from game_bridge_mcp.mcp_server.results import call_result_line, result_of

    for depth, cut in ((STRUCTURED_DEPTH - 1, False), (STRUCTURED_DEPTH, True)):
        value = {"port": 1, "note": "{[" * padding, "deep": nested(depth)}
        line = json.loads(call_result_line(3, dict(value)))
        sdk = result_of(dict(value)).model_dump(by_alias=True, mode="json", exclude_none=True)
        assert line["result"]["structuredContent"] == sdk["structuredContent"]
        assert (TOO_DEEP in json.dumps(line["result"]["structuredContent"])) is cut
        assert json.loads(line["result"]["content"][0]["text"]) == value  # the text is always whole
