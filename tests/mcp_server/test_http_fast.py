"""The HTTP fast path for ``tools/call`` (mcp_server/http/fast.py).

Which POSTs it takes and which it leaves to the SDK's transport; then, in-process through
the real gate, session manager and SDK transport (ASGI messages, no socket): its answers
are the SDK path's field for field for every protocol version it handles (the same
calls through a manager without it), and a cancelled call, a client that leaves, a
session that ends and the per-session cap behave as on the SDK's path. Over a real
server (uvicorn), the SDK's own client gets the same results both ways."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import pytest

from game_bridge_mcp import Composite
from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.mcp_server.http import fast as httpfast, sessions
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.mcp_server.adapter import PROTOCOL_VERSIONS, SESSIONLESS_VERSIONS
from game_bridge_mcp.mcp_server.stdio.fastpath import KNOWN_VERSIONS
from game_bridge_mcp.mcp_server.http.gate import Gate
from game_bridge_mcp.mcp_server.http.remote import connect
from game_bridge_mcp.mcp_server.http.places import Places
from game_bridge_mcp.mcp_server.http.sessions import SessionManager
from fast_answers import CALLS, stable
from http_helpers import HttpServer, answer_messages
from launch_helpers import ProcessGuard
from peers.fakegame import FakeGame

pytestmark = pytest.mark.timeout(90)
TOKEN = "t" * 32
ACCEPT = "application/json, text/event-stream"


# ------------------------------------------------------------------ which requests it takes
def post(body: Any, **headers: str) -> tuple[dict[str, Any], bytes]:
    sent = {"accept": ACCEPT, "content-type": "application/json", "mcp-protocol-version": "2025-06-18", **headers}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return {"type": "http", "method": "POST", "path": "/mcp",
            "headers": [(k.encode(), v.encode()) for k, v in sent.items() if v]}, raw


def call(ident: Any = 1, name: Any = "call_tool", arguments: Any = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def test_a_plain_call_of_an_initialized_session_is_taken() -> None:
    taken = httpfast.take(*post(call(7, arguments={"name": "get_health"})), "2025-06-18")
    assert taken is not None and (taken.ident, taken.name, taken.arguments) == (7, "call_tool", {"name": "get_health"})
    taken = httpfast.take(*post(call("a"), **{"mcp-protocol-version": ""}), "2025-03-26")  # no header: taken
    assert taken is not None and taken.arguments == {}
    assert httpfast.take(*post(call(), accept="text/event-stream, application/json;q=0.5"), "2025-06-18")


@pytest.mark.parametrize("version", [None, "2099-01-01"])
def test_nothing_is_taken_before_initialized_or_for_an_unknown_version(version: str | None) -> None:
    assert httpfast.take(*post(call()), version) is None


@pytest.mark.parametrize("body,headers", [
    (call(progress=1, _meta={"progressToken": "p"}), {}),  # progress needs the stream
    (call(_meta={"progressToken": 0}), {}),
    (call(True), {}), (call(None), {}), (call(1.5), {}),
    (call(arguments=["not", "an", "object"]), {}), (call(name=7), {}), (call(_meta="odd"), {}),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}, {}),
    ({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}, {}),
    ([call()], {}),  # a batch
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"', {}),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "tools/call"}}, {}),
    (call(), {"accept": "application/json"}),  # the SDK's 406
    (call(), {"accept": "text/event-stream"}),
    (call(), {"accept": "*/*"}),  # wildcards and case: each SDK major decides
    (call(), {"accept": "Application/JSON, text/event-stream"}),
    (call(), {"accept": "application/json;q=0, text/event-stream"}),  # JSON refused: SSE it is
    (call(), {"content-type": "text/plain"}),  # the SDK's 415
    (call(), {"content-type": ""}),
    (call(), {"mcp-protocol-version": "2025-03-26"}),  # not the session's: the SDK's to judge
])
def test_odd_requests_are_left_to_the_sdk(body: Any, headers: dict[str, str]) -> None:
    assert httpfast.take(*post(body, **headers), "2025-06-18") is None


def test_a_repeated_header_is_left_to_the_sdk() -> None:
    scope, body = post(call())
    scope["headers"].append((b"accept", ACCEPT.encode()))
    assert httpfast.take(scope, body, "2025-06-18") is None


def test_cancelled_ids() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "x"}}
    assert httpfast.cancelled_ids(json.dumps(note).encode()) == ["x"]
    assert httpfast.cancelled_ids(json.dumps([note, {**note, "params": {"requestId": True}}]).encode()) == ["x"]
    assert httpfast.cancelled_ids(b"{not json notifications/cancelled") == []
    assert httpfast.cancelled_ids(None) == []


# ------------------------------------------------------------------ in-process, through the gate
def nap(ctx: Any) -> dict[str, Any]:
    ctx.sleep(30_000)  # ended by a cancel
    return {"slept": True}


class Answer:
    """One request's answer as ASGI messages; ``leave()`` is the client disconnecting."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.pieces = 0
        self.complete = anyio.Event()
        self.gone = anyio.Event()

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")
            self.pieces += 1
            if not message.get("more_body"):
                self.complete.set()
                self.gone.set()

    def leave(self) -> None:
        self.gone.set()

    def messages(self) -> list[Any]:
        return answer_messages(self.body)


class Server:
    """A Gate and a SessionManager (fast path on or off) serving Bridges on one game."""

    def __init__(self, port: int, *, fast: bool) -> None:
        self.bridges: list[Bridge] = []

        def make(session_id: str) -> BridgeServer:
            bridge = Bridge(Config(port=port, environ={}, scan=False, registry=False),
                            composites=[Composite(name="nap", description="sleeps", run=nap)])
            self.bridges.append(bridge)
            return BridgeServer(bridge)

        self.manager = SessionManager(make, max_sessions=4, idle_s=600, fast=fast)
        self.gate = Gate(self.manager, token=TOKEN, hosts={"127.0.0.1:1"})
        self.session = ""
        self.version = ""
        self.sessionless = ""
        self.next_id = 100

    async def request(self, method: str, message: Any = None, *, answer: Answer | None = None,
                      headers: dict[str, str] | None = None) -> Answer:
        answer = answer or Answer()
        sent = {"host": "127.0.0.1:1", "authorization": f"Bearer {TOKEN}", "accept": ACCEPT,
                "content-type": "application/json", **(headers or {})}
        if self.session:
            sent.update({"mcp-session-id": self.session, "mcp-protocol-version": self.version})
        body = json.dumps(message).encode() if message is not None else b""
        given = False

        async def receive() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await answer.gone.wait()
            return {"type": "http.disconnect"}

        scope = {"type": "http", "method": method, "path": "/mcp", "query_string": b"", "scheme": "http",
                 "server": ("127.0.0.1", 1), "client": ("127.0.0.1", 2), "root_path": "", "http_version": "1.1",
                 "headers": [(k.encode(), v.encode()) for k, v in sent.items()]}
        await self.gate(scope, receive, answer.send)
        return answer

    async def open(self, version: str) -> None:
        if version in SESSIONLESS_VERSIONS:  # nothing to open: every request carries its version
            self.sessionless = version
            return
        opened = await self.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}})
        assert opened.status == 200, opened.body
        self.session, self.version = opened.headers["mcp-session-id"], version
        done = await self.request("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status == 202

    async def call(self, params: dict[str, Any], answer: Answer | None = None) -> Answer:
        self.next_id += 1
        headers = None
        if self.sessionless:  # the envelope in _meta, and the headers that repeat it
            meta = {**params.get("_meta", {}), "io.modelcontextprotocol/protocolVersion": self.sessionless,
                    "io.modelcontextprotocol/clientCapabilities": {}}
            params = {**params, "_meta": meta}
            headers = {"mcp-protocol-version": self.sessionless, "mcp-method": "tools/call", "mcp-name": params["name"]}
        return await self.request("POST", {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                                           "params": params}, answer=answer, headers=headers)


@contextlib.asynccontextmanager
async def serving(port: int, fast: bool) -> AsyncIterator[Server]:
    server = Server(port, fast=fast)
    async with anyio.create_task_group() as tasks:
        await tasks.start(server.manager.run)
        try:
            yield server
        finally:
            await server.manager.close()
            tasks.cancel_scope.cancel()


def run(main: Any) -> Any:
    return anyio.run(main)


@pytest.mark.parametrize("version", sorted(PROTOCOL_VERSIONS))
def test_fast_answers_are_the_sdk_paths_field_for_field(version: str) -> None:
    """Every protocol version the installed SDK serves, through both paths: the fast path
    answers the versions it is proven for (KNOWN_VERSIONS) and leaves every other to the SDK,
    and the answers are the same either way."""
    answers: dict[bool, list[Any]] = {}
    kinds: dict[bool, set[str]] = {}
    proven = version in KNOWN_VERSIONS

    async def main(game: FakeGame, fast: bool) -> None:
        async with serving(game.port, fast) as server:
            await server.open(version)
            await server.call({"name": "list_toolsets", "arguments": {}})  # the manifest, read once by both
            got = [await server.call(params) for params in CALLS]
            assert all(a.status == 200 for a in got), [(a.status, a.body[:300]) for a in got]
            answers[fast] = [stable(a.messages()[-1]["result"]) for a in got]
            kinds[fast] = {a.headers["content-type"] for a in got[:-1]}  # the last has a progressToken
            assert got[-1].headers["content-type"] == "text/event-stream" or not proven
            assert [m.get("method") for m in got[-1].messages()[:-1]] == \
                ["notifications/progress"] * (len(got[-1].messages()) - 1)
            assert server.manager.fast_answered == (len(CALLS) if fast and proven else 0)
    with FakeGame() as game:
        for fast in (True, False):
            run(lambda: main(game, fast))
    assert answers[True] == answers[False]
    if proven:
        assert kinds == {True: {"application/json"}, False: {"text/event-stream"}}
    else:  # the SDK's own answers on both
        assert kinds[True] == kinds[False]


def test_the_answer_is_the_sdk_paths_message_whole() -> None:
    """Beyond the result: the envelope (jsonrpc, id) and a result whose every field is stable."""
    found: dict[bool, Any] = {}

    async def main(game: FakeGame, fast: bool) -> None:
        async with serving(game.port, fast) as server:
            await server.open("2025-06-18")
            answer = await server.call({"name": "describe_toolset", "arguments": {"name": "play"}})
            found[fast] = answer.messages()
    with FakeGame() as game:
        for fast in (True, False):
            run(lambda: main(game, fast))
    assert found[True] == found[False] and len(found[True]) == 1
    assert found[True][0]["result"]["structuredContent"]["name"] == "play"


def test_a_large_answer_goes_out_in_pieces_and_is_the_sdk_paths() -> None:
    found: dict[bool, Any] = {}

    async def main(game: FakeGame, fast: bool) -> None:
        async with serving(game.port, fast) as server:
            await server.open("2025-06-18")
            answer = await server.call({"name": "call_tool", "arguments": {"name": "get_state"}})
            found[fast] = stable(answer.messages()[-1]["result"])
            if fast:
                assert int(answer.headers["content-length"]) == len(answer.body) > httpfast.JOIN_LIMIT
                assert answer.pieces > 1
    with FakeGame(padding_bytes=2 * httpfast.JOIN_LIMIT) as game:
        for fast in (True, False):
            run(lambda: main(game, fast))
    assert found[True] == found[False]
    assert len(json.dumps(found[True])) > 2 * httpfast.JOIN_LIMIT


def test_a_cancelled_call_is_answered_as_the_sdk_answers_it() -> None:
    found: dict[bool, Any] = {}

    async def main(game: FakeGame, fast: bool) -> None:
        async with serving(game.port, fast) as server:
            await server.open("2025-06-18")
            pending = Answer()
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(server.call, {"name": "call_tool", "arguments": {"name": "nap"}}, pending)
                    while not (server.manager.sessions and _running(server)):
                        await anyio.sleep(0.01)
                    note = await server.request("POST", {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                         "params": {"requestId": server.next_id}})
                    assert note.status == 202
            found[fast] = pending.messages()
            with anyio.fail_after(10):  # the cancelled work ends (on the SDK's path it may after the answer)
                while _app(server).calls_in_flight:
                    await anyio.sleep(0.01)
    with FakeGame() as game:
        for fast in (True, False):
            run(lambda: main(game, fast))
    assert found[True] == found[False], found
    assert found[True][0]["error"]["message"] == "Request cancelled"


def _app(server: Server) -> BridgeServer:
    return next(iter(server.manager.sessions.values())).app


def _running(server: Server) -> bool:
    return bool(server.manager.sessions) and _app(server).calls_in_flight > 0


def test_a_client_that_leaves_has_its_call_cancelled_and_its_place_freed(caplog: Any) -> None:
    async def main() -> None:
        with FakeGame() as game:
            async with serving(game.port, True) as server:
                await server.open("2025-06-18")
                pending = Answer()
                with anyio.fail_after(20):
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(server.call, {"name": "call_tool", "arguments": {"name": "nap"}}, pending)
                        while not _running(server):
                            await anyio.sleep(0.01)
                        pending.leave()
                    while _app(server).calls_in_flight:
                        await anyio.sleep(0.01)
                assert pending.status is None  # nobody to answer
                session = next(iter(server.manager.sessions.values()))
                assert session.busy == 0 and not session.fast
                again = await server.call({"name": "describe_toolset", "arguments": {"name": "play"}})
                assert again.headers["content-type"] == "application/json"  # the session carries on
    with caplog.at_level(logging.INFO, logger="game_bridge_mcp"):
        run(main)
    assert "cancelling it" in caplog.text


def test_a_session_that_ends_cancels_its_calls_before_stopping_its_instances() -> None:
    order: list[str] = []

    async def main() -> None:
        with FakeGame() as game:
            async with serving(game.port, True) as server:
                await server.open("2025-06-18")
                bridge = server.bridges[0]
                app = _app(server)
                shutdown = bridge.shutdown

                def recorded() -> None:
                    order.append(f"shutdown with {app.calls_in_flight} calls running")
                    shutdown()
                bridge.shutdown = recorded  # type: ignore[method-assign]
                pending = Answer()
                with anyio.fail_after(20):
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(server.call, {"name": "call_tool", "arguments": {"name": "nap"}}, pending)
                        while not _running(server):
                            await anyio.sleep(0.01)
                        ended = await server.request("DELETE")
                        assert ended.status == 200
                    session_id = server.session
                    while not order:
                        await anyio.sleep(0.01)
                (message,) = pending.messages()
                assert message["id"] == server.next_id and "session ended" in message["error"]["message"]
                gone = await server.request("POST", {"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
                assert gone.status == 404 and session_id not in server.manager.sessions
    run(main)
    assert order == ["shutdown with 0 calls running"]


def test_fast_calls_count_against_the_sessions_cap(monkeypatch: Any) -> None:
    monkeypatch.setattr(sessions, "SESSION_REQUESTS", 2)

    async def main() -> None:
        with FakeGame() as game:
            async with serving(game.port, True) as server:
                await server.open("2025-06-18")
                naps = [Answer(), Answer()]
                with anyio.fail_after(20):
                    async with anyio.create_task_group() as tasks:
                        for pending in naps:
                            tasks.start_soon(server.call, {"name": "call_tool", "arguments": {"name": "nap"}}, pending)
                        while _app(server).calls_in_flight < 2:
                            await anyio.sleep(0.01)
                        third = await server.call({"name": "describe_toolset", "arguments": {"name": "play"}})
                        assert third.status == 503 and int(third.headers["retry-after"]) >= 1
                        for pending in naps:
                            pending.leave()
                fourth = await server.call({"name": "describe_toolset", "arguments": {"name": "play"}})
                assert fourth.status == 200
    run(main)


# ------------------------------------------------------------------ over a real server
@pytest.mark.slow
def test_the_sdks_client_gets_the_same_results_from_both_paths(tmp_path: Path, guard: ProcessGuard) -> None:
    results: dict[bool, list[Any]] = {}
    logs: dict[bool, str] = {}
    with FakeGame() as game:
        for fast in (True, False):
            env = {"GAME_BRIDGE_LOG": "INFO", **({} if fast else {"GAME_BRIDGE_SDK_DISPATCH": "1"})}
            server = HttpServer(tmp_path / str(fast), guard, None, "--port", str(game.port), "--no-registry", env=env)

            async def main() -> list[Any]:
                async with connect(server.url, server.token) as client:
                    await client.list_tools()  # the client checks structuredContent against each outputSchema
                    out = []
                    for params in CALLS[:-1]:
                        result = await client.call_tool(params["name"], params.get("arguments"))
                        out.append(stable(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
                    return out
            try:
                results[fast] = anyio.run(main)
            finally:
                server.stop()
                logs[fast] = server.stderr()
    assert results[True] == results[False]
    assert "over HTTP answered directly" in logs[True] and "answered directly" not in logs[False]


# ------------------------------------------------------------------ places, bodies, ids, initializing
def another(server: Server) -> Server:
    """A second client of the same server (its own session)."""
    other = copy.copy(server)
    other.session = other.version = other.sessionless = ""
    return other


async def slow_body(server: Server, answer: Answer, headers: dict[str, str]) -> None:
    """A POST whose body never finishes arriving (until the gate's deadline)."""
    async def receive() -> dict[str, Any]:
        await anyio.sleep(0.05)
        return {"type": "http.request", "body": b" ", "more_body": True}

    sent = {"host": "127.0.0.1:1", "authorization": f"Bearer {TOKEN}", "accept": ACCEPT,
            "content-type": "application/json", **headers}
    scope = {"type": "http", "method": "POST", "path": "/mcp", "query_string": b"", "headers":
             [(k.encode(), v.encode()) for k, v in sent.items()], "client": ("127.0.0.1", 3)}
    await server.gate(scope, receive, answer.send)


def test_one_sessions_held_calls_leave_the_others_their_places() -> None:
    """Issue 38, item 10: a session holding calls beyond its fair share takes from a shared
    pool only; another session still opens and calls (before: 5 sessions x 64 held calls
    took the 256 global places, and a new session's initialize was 503)."""
    async def main() -> None:
        with FakeGame() as game:
            async with serving(game.port, True) as server:
                server.manager.places = Places(max_in_flight=12, holders=1, fair_share=2)  # shared: 6
                await server.open("2025-06-18")
                naps = [Answer() for _ in range(8)]
                with anyio.fail_after(30):
                    async with anyio.create_task_group() as tasks:
                        for pending in naps:
                            tasks.start_soon(server.call, {"name": "call_tool", "arguments": {"name": "nap"}}, pending)
                        while _app(server).calls_in_flight < 8:  # its fair 2 and the shared 6
                            await anyio.sleep(0.01)
                        greedy = await server.call({"name": "describe_toolset", "arguments": {"name": "play"}})
                        assert greedy.status == 503 and b"places beyond are all taken" in greedy.body
                        other = another(server)
                        await other.open("2025-06-18")  # a new agent gets in
                        mine = await other.call({"name": "describe_toolset", "arguments": {"name": "play"}})
                        assert mine.status == 200, mine.body
                        for pending in naps:
                            pending.leave()
    run(main)


def test_slow_bodies_count_against_their_session(monkeypatch: Any) -> None:
    """Issue 38, item 10: a body that is slow to arrive holds a place of its own session's
    (before: of the server's, so one token holder's slow POSTs starved every agent)."""
    monkeypatch.setattr(sessions, "SESSION_REQUESTS", 2)

    async def main() -> None:
        with FakeGame() as game:
            async with serving(game.port, True) as server:
                server.manager.places = Places(max_in_flight=4, holders=1, fair_share=2)
                server.gate.body_deadline_s = 30
                await server.open("2025-06-18")
                other = another(server)
                await other.open("2025-06-18")
                trickles = [Answer() for _ in range(3)]
                headers = {"mcp-session-id": server.session, "mcp-protocol-version": "2025-06-18"}
                with anyio.fail_after(30):
                    async with anyio.create_task_group() as tasks:
                        for answer in trickles[:2]:
                            tasks.start_soon(slow_body, server, answer, headers)
                        while server.manager.sessions[server.session].busy < 2:
                            await anyio.sleep(0.01)
                        await slow_body(server, trickles[2], headers)  # its own cap: refused at once
                        assert trickles[2].status == 503 and b"this session has 2 requests" in trickles[2].body.lower()
                        mine = await other.call({"name": "describe_toolset", "arguments": {"name": "play"}})
                        assert mine.status == 200, mine.body
                        tasks.cancel_scope.cancel()
    run(main)


def test_a_duplicate_request_id_is_refused_while_the_first_runs() -> None:
    """Issue 38, item 11: a second request with the id of one in flight is refused (before:
    one of them never got its answer, holding its place)."""
    async def main() -> None:
        with FakeGame() as game:
            async with serving(game.port, True) as server:
                await server.open("2025-06-18")
                first = Answer()
                with anyio.fail_after(30):
                    async with anyio.create_task_group() as tasks:
                        message = {"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                                   "params": {"name": "call_tool", "arguments": {"name": "nap"}}}
                        tasks.start_soon(lambda: server.request("POST", message, answer=first))
                        while not _running(server):
                            await anyio.sleep(0.01)
                        again = await server.request("POST", {**message, "params": {"name": "list_toolsets"}})
                        assert again.status == 400
                        (error,) = again.messages()
                        assert error["id"] == 77 and "already in flight" in error["error"]["message"]
                        first.leave()
                session = server.manager.sessions[server.session]
                assert session.busy == 0 and not session.ids
                fine = await server.request("POST", {**message, "params": {"name": "list_toolsets", "arguments": {}}})
                assert fine.status == 200  # the id is free again once its request ended
    run(main)


@pytest.mark.slow  # the expiry loop's first pause is long (5 s) before the test shortens the deadline
def test_a_session_that_never_finishes_initializing_ends() -> None:
    """Issue 38, item 10: a session that only sent initialize ends (before: it held one of
    --max-sessions places for the whole idle time, 30 minutes)."""
    async def main() -> None:
        with FakeGame() as game:
            async with serving(game.port, True) as server:
                server.manager.init_deadline_s = 0.3
                opened = await server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
                assert opened.status == 200
                stalled = opened.headers["mcp-session-id"]
                await server.open("2025-06-18")  # one that does finish
                with anyio.fail_after(20):
                    while stalled in server.manager.sessions:
                        await anyio.sleep(0.05)
                assert server.session in server.manager.sessions
    run(main)
