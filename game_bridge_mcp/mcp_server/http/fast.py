"""``tools/call`` over streamable HTTP without the SDK's request machinery: a plain call of an
initialized session runs on the session's server and is answered as one JSON body, field for
field the SDK's answer; anything else goes to the SDK's transport (docs/design.md, "The HTTP
server's fast path")."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from ... import polling
from ..adapter import CANCELLED_CODE, BridgeServer
from ..results import call_result_chunks, error_result
from ..stdio.fastpath import KNOWN_VERSIONS
from .gate import Message, Receive, Scope, Send

log = logging.getLogger("game_bridge_mcp")

#: The message the SDK answers a cancelled request's POST with (the code: CANCELLED_CODE).
CANCELLED_MESSAGE = "Request cancelled"
#: Answers up to this size are joined and sent in one piece; larger ones go out chunk by chunk.
JOIN_LIMIT = 256 * 1024


@dataclass
class Call:
    """A ``tools/call`` taken here: its id, tool, arguments."""

    ident: Any
    name: str
    arguments: dict[str, Any]


@dataclass
class Running:
    """A call being answered here: its cancel token and why it was cancelled (if it was)."""

    token: polling.CancelToken = field(default_factory=polling.CancelToken)
    why: str = ""

    def cancel(self, why: str) -> None:
        """End the call's work (its waits and requests end within about 100 ms); safe from any thread."""
        if not self.why:
            self.why = why
        self.token.cancel()


def _request_id(value: Any) -> bool:
    return (isinstance(value, str) or isinstance(value, int)) and not isinstance(value, bool)


def _media_types(value: str) -> dict[str, float]:
    """``Accept``'s media types (as written, parameters dropped) with their quality."""
    found: dict[str, float] = {}
    for part in value.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, number = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(number)
                except ValueError:
                    quality = 0.0
        if kind:
            found[kind] = max(quality, found.get(kind, 0.0))
    return found


def accepts_json(accept: str) -> bool:
    """Whether ``Accept`` names ``application/json`` (not refused with ``q=0``) and
    ``text/event-stream``, as written: what every SDK major's transport takes (they differ
    on wildcards and case, which are left to them)."""
    types = _media_types(accept)
    return types.get("application/json", 0.0) > 0.0 and "text/event-stream" in types


def take(scope: Scope, body: bytes | None, version: str | None) -> Call | None:
    """The call to answer here, or None to leave the request to the SDK (see the module
    docstring). ``version`` is the session's protocol version once it is initialized."""
    if version not in KNOWN_VERSIONS or not body or b'"tools/call"' not in body or scope.get("method") != "POST":
        return None
    accept = content_type = protocol = None
    for key, value in scope.get("headers", ()):
        if key == b"accept":
            if accept is not None:
                return None  # more than one: left to the SDK, which reads one of them
            accept = bytes(value).decode("latin-1")
        elif key == b"content-type":
            if content_type is not None:
                return None
            content_type = bytes(value).decode("latin-1")
        elif key == b"mcp-protocol-version":
            if protocol is not None:
                return None
            protocol = bytes(value).decode("latin-1").strip()
    if content_type is None or content_type.split(";")[0].strip() != "application/json":
        return None
    if accept is None or not accepts_json(accept) or (protocol is not None and protocol != version):
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or message.get("method") != "tools/call":
        return None
    ident, params = message.get("id"), message.get("params")
    if not _request_id(ident) or not isinstance(params, dict):
        return None
    name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    if not (meta is None or isinstance(meta, dict)) or (meta and meta.get("progressToken") is not None):
        return None
    return Call(ident, name, arguments or {})


def cancelled_ids(body: bytes | None) -> list[Any]:
    """The ``requestId`` of each ``notifications/cancelled`` in a POST body."""
    if not body or b"notifications/cancelled" not in body:
        return []
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return []
    found = []
    for message in doc if isinstance(doc, list) else [doc]:
        params = message.get("params") if isinstance(message, dict) else None
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled" \
                and isinstance(params, dict) and _request_id(params.get("requestId")):
            found.append(params["requestId"])
    return found


def _error_body(ident: Any, code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}).encode("utf-8")


async def _send_json(send: Send, chunks: list[bytes], session_id: str) -> None:
    size = sum(len(c) for c in chunks)
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(size).encode()),
        (b"mcp-session-id", session_id.encode("latin-1"))]})
    if size <= JOIN_LIMIT:
        await send({"type": "http.response.body", "body": b"".join(chunks)})
        return
    for index, chunk in enumerate(chunks):
        await send({"type": "http.response.body", "body": chunk, "more_body": index < len(chunks) - 1})
        chunks[index] = b""  # let each piece go once it is out


def _work(app: BridgeServer, call: Call, running: Running) -> list[bytes] | None:
    """The call, in a worker thread: its answer's pieces, or None when it was cancelled."""
    with polling.cancel_scope(running.token):
        try:
            polling.check_cancelled()
            holder: list[Any] = [app.dispatch(call.name, call.arguments, None)]
        except polling.Cancelled:
            if running.why:
                return None
            holder = [error_result(RuntimeError("the call was cancelled"))]  # not ours to swallow
        except Exception as exc:  # every failure becomes a result; the server keeps serving
            holder = [error_result(exc)]
    if running.why:
        return None
    chunks = call_result_chunks(call.ident, holder, (call.name, call.arguments))  # the value is let go once it is text
    chunks[-1] = chunks[-1].rstrip(b"\n")
    return chunks


async def answer(app: BridgeServer, session_id: str, call: Call, running: Running, receive: Receive,
                 send: Send) -> int | None:
    """Run ``call`` on the session's server and answer it as one JSON body; the HTTP
    status sent (None when the client left first: no answer, the call was cancelled).
    The call holds its place under the server's cap of calls until its thread has ended,
    however it was cancelled."""
    done = False

    async def watch_disconnect() -> None:
        while True:
            message: Message = await receive()
            if message.get("type") == "http.disconnect":
                if not done:
                    log.info("session %s: the client left before request %r was answered: cancelling it",
                             session_id[:8], call.ident)
                    running.cancel("disconnect")
                return

    status: int | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch_disconnect)
        app.calls_in_flight += 1
        try:  # a thread is waited for, whatever cancels its waiter (run_sync shields it)
            chunks = await anyio.to_thread.run_sync(_work, app, call, running, limiter=app.limiter)
        finally:
            app.calls_in_flight -= 1
            done = True
        status = 200
        if chunks is not None:
            await _send_json(send, chunks, session_id)
        elif running.why == "cancelled":  # the SDK's answer to a cancelled request's POST
            await _send_json(send, [_error_body(call.ident, CANCELLED_CODE, CANCELLED_MESSAGE)], session_id)
        elif running.why == "ended":
            await _send_json(send, [_error_body(call.ident, -32603, "The MCP session ended before this call "
                                                "completed (its instances are stopped). Open a new session.")],
                             session_id)
        else:  # the client left: nobody to answer
            status = None
        tasks.cancel_scope.cancel()
    return status
