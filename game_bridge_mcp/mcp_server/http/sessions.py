"""MCP sessions over streamable HTTP, each a Bridge of its own sharing the process's launcher,
ended by DELETE, idleness, or a client that disconnects (docs/http.md)."""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from mcp.server.streamable_http import StreamableHTTPServerTransport

from . import fast as httpfast
from ..adapter import MAX_CALLS, PROTOCOL_VERSIONS, SESSIONLESS_VERSIONS, BridgeServer
from .gate import BODY_KEY, Message, Receive, Scope, Send, busy, header, respond, rpc_error
from .places import Holder, Openings, Places
from .sessionless import Sessionless

log = logging.getLogger("game_bridge_mcp")

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
#: JSON-RPC's code for a protocol version the server does not speak (2026-07-28's).
UNSUPPORTED_VERSION_CODE = -32022
#: Seconds a client is asked to wait when every session place is taken.
SESSIONS_RETRY_AFTER_S = 5
#: A session's requests in flight at once (its calls, as over stdio); past it, 503.
SESSION_REQUESTS = MAX_CALLS
#: A session that has not said notifications/initialized this long after its initialize ends.
INIT_DEADLINE_S = 60.0


@dataclass
class HttpSession:
    """One MCP session: its transport, its server and Bridge, and when it was last used."""

    id: str
    transport: StreamableHTTPServerTransport
    app: BridgeServer
    last_used: float
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    finished: anyio.Event = field(default_factory=anyio.Event)
    #: Requests in flight other than the notification stream (GET), counted by places.py.
    busy: int = 0
    #: When its initialize was answered (a session not initialized within INIT_DEADLINE_S ends).
    opened: float = 0.0
    #: The JSON-RPC ids of its requests in flight (one id is one request at a time).
    ids: set[Any] = field(default_factory=set)
    #: The protocol version its ``initialize`` was answered with, once the client said
    #: ``notifications/initialized`` (until then no call is answered by the fast path).
    version: str | None = None
    answered_version: str | None = None
    #: Calls the fast path is answering, by request id.
    fast: dict[Any, httpfast.Running] = field(default_factory=dict)
    fast_idle: anyio.Event = field(default_factory=anyio.Event)

    def cancel_fast(self, why: str) -> None:
        for running in list(self.fast.values()):
            running.cancel(why)

    async def fast_drained(self) -> None:
        """Once the fast path's calls of this session have ended (their threads too)."""
        while self.fast:
            self.fast_idle = anyio.Event()
            await self.fast_idle.wait()


class SessionManager:
    """The ASGI app behind the gate: opens, routes to, expires and ends sessions."""

    def __init__(self, make_app: Callable[[str], BridgeServer], *, max_sessions: int, idle_s: float,
                 clock: Callable[[], float] = time.monotonic, fast: bool = True) -> None:
        self._make_app = make_app
        #: Whether plain tools/call POSTs are answered without the SDK's machinery (httpfast.py).
        self.fast = fast
        #: Calls the fast path has answered (for tests and benchmarks).
        self.fast_answered = 0
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._clock = clock
        self.sessions: dict[str, HttpSession] = {}
        #: What sessionless requests (2026-07-28 on) share, launches included.
        self.sessionless = Sessionless(make_app, clock)
        self._tasks: anyio.abc.TaskGroup | None = None
        self._opening = 0
        #: Requests in flight: each session's, the sessionless ones', the openings' (places.py).
        self.places = Places(holders=max_sessions)
        self.openings = Openings()
        self.init_deadline_s = INIT_DEADLINE_S

    # ------------------------------------------------------------------ lifecycle
    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the sessions' task group and expire idle sessions, until cancelled."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            task_status.started()
            while True:
                await anyio.sleep(min(max(min(self.idle_s, self.init_deadline_s) / 10, 0.05), 5.0))
                now = self._clock()
                for session in list(self.sessions.values()):
                    if session.busy == 0 and now - session.last_used > self.idle_s:
                        log.info("session %s idle for %.0f s: ending it", session.id[:8], now - session.last_used)
                        self.end(session)
                    elif session.version is None and now - session.opened > self.init_deadline_s:
                        log.info("session %s did not finish initializing within %.0f s: ending it",
                                 session.id[:8], self.init_deadline_s)
                        self.end(session)
                if self.sessionless.idle_for(now) > self.idle_s:
                    log.info("no sessionless request for %.0f s: stopping what they launched",
                             self.sessionless.idle_for(now))
                    self.sessionless.end()

    def end(self, session: HttpSession) -> None:
        """End a session: its id answers 404 from now on; its task cancels its calls,
        stops its instances and finishes."""
        self.sessions.pop(session.id, None)
        session.scope.cancel()
        session.cancel_fast("ended")

    async def _serve(self, session: HttpSession, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            async with session.transport.connect() as (read_stream, write_stream):
                task_status.started()
                with session.scope:
                    await session.app.run(read_stream, write_stream)
        except Exception:
            log.exception("session %s failed", session.id[:8])
        finally:
            self.sessions.pop(session.id, None)
            with anyio.CancelScope(shield=True):
                if not session.transport.is_terminated:
                    await session.transport.terminate()
                session.cancel_fast("ended")
                await session.fast_drained()
                # its calls have ended (a cancelled call waits for its thread); now its instances
                await anyio.to_thread.run_sync(session.app.bridge.shutdown)
                session.finished.set()
                log.info("session %s ended", session.id[:8])

    # ------------------------------------------------------------------ requests
    def admit(self, scope: Scope) -> tuple[str | None, Callable[[], None]]:
        """A place for a request (the gate asks before its body is read, so a slow body holds
        its own holder's place): (why not, or None) and how to give it back (places.py)."""
        if scope.get("method") == "GET":  # the notification stream stays open: not counted
            return None, _nothing
        version = (header(scope, VERSION_HEADER) or "").strip()
        wanted = header(scope, SESSION_HEADER)
        if version in SESSIONLESS_VERSIONS:
            holder: Holder = self.sessionless
            cap, what = SESSION_REQUESTS, "the sessionless requests"
        elif wanted is None:
            holder, cap, what = self.openings, max(1, self.max_sessions), "the requests opening sessions"
        else:
            session = self.sessions.get(wanted)
            if session is None:  # answered 404 at once
                return None, _nothing
            holder, cap, what = session, SESSION_REQUESTS, "this session"
        refusal = self.places.refusal(holder, cap, what)
        if refusal is not None:
            return refusal, _nothing
        place = self.places.take(holder)
        return None, lambda: self.places.give_back(place)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        version = header(scope, VERSION_HEADER)
        if version is not None and version.strip() not in PROTOCOL_VERSIONS:
            await _unsupported(send, version)
            return
        if version is not None and version.strip() in SESSIONLESS_VERSIONS:
            await self._sessionless(scope, receive, send)
            return
        wanted = header(scope, SESSION_HEADER)
        if wanted is None:
            await self._open(scope, receive, send)
            return
        session = self.sessions.get(wanted)
        if session is None:  # never was, or ended: the transport's own answer
            await respond(send, 404, rpc_error("Session not found"))
            return
        await self._handle(session, scope, receive, send)
        if session.transport.is_terminated:  # the client's DELETE
            self.end(session)

    async def _sessionless(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request of a sessionless protocol version, answered by the SDK (sessionless.py)."""
        if header(scope, SESSION_HEADER) is not None:
            await respond(send, 400, rpc_error(
                f"Mcp-Session-Id is not used with protocol {header(scope, VERSION_HEADER)}: its requests carry no "
                "session. Send the request without it, or open a session with initialize and a 2025 version."))
            return
        assert self._tasks is not None, "SessionManager.run() is not running"
        await self.sessionless.handle(self._tasks, scope, receive, send)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await respond(send, 400, rpc_error("Bad Request: Missing session ID"))
            return
        if len(self.sessions) + self._opening >= self.max_sessions:
            log.warning("refusing a new session: %d are open", len(self.sessions))
            await busy(send, f"Too many open sessions (the limit is {self.max_sessions}). Retry later, or end "
                       "unused sessions.", SESSIONS_RETRY_AFTER_S)
            return
        assert self._tasks is not None, "SessionManager.run() is not running"
        session_id = secrets.token_hex(16)
        self._opening += 1
        try:
            app = await anyio.to_thread.run_sync(self._make_app, session_id)
            session = HttpSession(session_id, StreamableHTTPServerTransport(mcp_session_id=session_id), app,
                                  self._clock(), opened=self._clock())
            await self._tasks.start(self._serve, session)
        finally:
            self._opening -= 1
        self.sessions[session_id] = session
        status = await self._handle(session, scope, receive, send, opening=True)
        if status is None or status >= 400:  # not an initialize that succeeded: nothing was opened
            self.end(session)

    async def _handle(self, session: HttpSession, scope: Scope, receive: Receive, send: Send, *,
                      opening: bool = False) -> int | None:
        """Answer a request of the session: a plain call on the fast path, anything else
        through its transport; returns the HTTP status answered with. Calls of this
        request that the client did not stay for are cancelled."""
        body = scope.get(BODY_KEY)
        pending = _request_ids(body)
        repeated = pending & session.ids
        if repeated:  # its answer would go to the first one's stream, or nowhere: refused
            ident = sorted(repeated, key=str)[0]
            await respond(send, 400, json.dumps({"jsonrpc": "2.0", "id": ident, "error": {
                "code": -32600, "message": f"Request id {ident!r} is already in flight in this session: give each "
                "request an id of its own while it runs."}}).encode())
            return 400
        session.ids |= pending
        try:
            return await self._answer(session, scope, receive, send, body, set(pending), opening)
        finally:
            session.ids -= pending

    async def _answer(self, session: HttpSession, scope: Scope, receive: Receive, send: Send, body: bytes | None,
                      pending: set[Any], opening: bool) -> int | None:
        if self.fast and not session.scope.cancel_called:
            call = httpfast.take(scope, body, session.version)
            if call is not None and call.ident not in session.fast:
                return await self._fast(session, call, receive, send)
            for ident in httpfast.cancelled_ids(body) if session.fast else ():
                running = session.fast.get(ident)
                if running is not None:  # the SDK's transport answers the notification (and ignores it)
                    running.cancel("cancelled")
        status: int | None = None

        async def watch(message: Message) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = int(message.get("status", 0))
            elif message.get("type") == "http.response.body":
                chunk = message.get("body") or b""
                if pending:
                    pending.difference_update(_answered_ids(chunk))
                if opening and session.answered_version is None:
                    session.answered_version = _protocol_version(chunk)
            await send(message)

        try:
            await session.transport.handle_request(scope, receive, watch)
        finally:
            session.last_used = self._clock()
        if pending and (status is None or status < 400) and not session.transport.is_terminated:
            with anyio.CancelScope(shield=True):
                for request_id in pending:
                    await self._cancel(session, scope, request_id)
        if status == 202 and session.version is None and body and b"notifications/initialized" in body \
                and any(isinstance(m, dict) and m.get("method") == "notifications/initialized" for m in _messages(body)):
            session.version = session.answered_version
        return status

    async def _fast(self, session: HttpSession, call: httpfast.Call, receive: Receive, send: Send) -> int | None:
        """A call answered by the fast path (``fast.py``), counted as the session's."""
        running = httpfast.Running()
        session.fast[call.ident] = running
        try:
            status = await httpfast.answer(session.app, session.id, call, running, receive, send)
        finally:
            session.last_used = self._clock()
            del session.fast[call.ident]
            if not session.fast:
                session.fast_idle.set()
        if status is not None:
            self.fast_answered += 1
            if self.fast_answered == 1:
                log.info("tools/call over HTTP answered directly, without the SDK's dispatcher (protocol %s)",
                         session.version)
        return status

    async def _cancel(self, session: HttpSession, scope: Scope, request_id: Any) -> None:
        """Tell the session a request's client is gone: the ``notifications/cancelled`` a
        client sends, handed to its transport as if it had been posted."""
        log.info("session %s: the client left before request %r was answered: cancelling it",
                 session.id[:8], request_id)
        body = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request_id, "reason": "the client disconnected"}}).encode()
        keep = {b"host", SESSION_HEADER, b"mcp-protocol-version", b"authorization"}
        headers = [(k, v) for k, v in scope.get("headers", ()) if k in keep]
        headers += [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream"),
                    (b"content-length", str(len(body)).encode())]
        given = False

        async def receive() -> Message:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(message: Message) -> None:
            return None

        try:
            await session.transport.handle_request({**scope, "method": "POST", "headers": headers}, receive, discard)
        except Exception:
            log.debug("could not cancel request %r", request_id, exc_info=True)

    async def close(self) -> None:
        """End every session and wait (bounded) until each has stopped its instances."""
        sessions = list(self.sessions.values())
        for session in sessions:
            self.end(session)
        self.sessionless.end()
        with anyio.move_on_after(10):
            for session in sessions:
                await session.finished.wait()
        await self.sessionless.ended()


async def _unsupported(send: Send, version: str) -> None:
    """400 for an MCP-Protocol-Version this server does not speak (the spec's answer)."""
    supported = sorted(PROTOCOL_VERSIONS)
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": UNSUPPORTED_VERSION_CODE,
        "message": f"Bad Request: Unsupported protocol version {version[:40]!r}. This server speaks "
                   f"{', '.join(supported)}.",
        "data": {"supported": supported, "requested": version[:40]}}}).encode()
    await respond(send, 400, body)


def _nothing() -> None:
    return None


def _messages(body: Any) -> list[Any]:
    try:
        doc = json.loads(body)
    except (TypeError, ValueError, RecursionError):
        return []
    return doc if isinstance(doc, list) else [doc]


def _protocol_version(chunk: bytes) -> str | None:
    """The protocol version an ``initialize`` answer (SSE events, or a JSON body) agreed on."""
    if b'"protocolVersion"' not in chunk:
        return None
    lines = [line[5:].strip() for line in chunk.splitlines() if line.startswith(b"data:")] or [chunk]
    for line in lines:
        for message in _messages(line):
            result = message.get("result") if isinstance(message, dict) else None
            if isinstance(result, dict) and "serverInfo" in result and isinstance(result.get("protocolVersion"), str):
                return str(result["protocolVersion"])
    return None


def _request_ids(body: bytes | None) -> set[Any]:
    """The ids of the JSON-RPC requests in a POST body (notifications and responses have none to answer)."""
    if not body:
        return set()
    return {m["id"] for m in _messages(body)
            if isinstance(m, dict) and "method" in m and isinstance(m.get("id"), (str, int)) and not isinstance(m.get("id"), bool)}


def _answered_ids(chunk: bytes) -> set[Any]:
    """Ids of responses in a piece of an answer (SSE events, or a JSON body)."""
    found: set[Any] = set()
    lines = [line[5:].strip() for line in chunk.splitlines() if line.startswith(b"data:")] or [chunk]
    for line in lines:
        for message in _messages(line):
            if isinstance(message, dict) and ("result" in message or "error" in message):
                ident = message.get("id")
                if isinstance(ident, (str, int)):
                    found.add(ident)
    return found
