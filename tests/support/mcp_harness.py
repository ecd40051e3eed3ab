"""Connect the real MCP client to a BridgeServer over the SDK's in-memory transport,
on either SDK major, and read results the same way on both."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import anyio

from game_bridge_mcp.mcp_server.adapter import _SDK2, BridgeServer

SDK_MAJOR = 2 if _SDK2 else 1


@asynccontextmanager
async def connect(app: BridgeServer, *, message_handler: Callable[..., Any] | None = None,
                  logging_callback: Callable[..., Any] | None = None) -> AsyncIterator[Any]:
    if _SDK2:
        from mcp import Client

        kwargs: dict[str, Any] = {"mode": "legacy"}
        if message_handler is not None:
            kwargs["message_handler"] = message_handler
        if logging_callback is not None:
            kwargs["logging_callback"] = logging_callback
        async with Client(app.server, **kwargs) as client:
            yield client
    else:
        from mcp.shared.memory import create_connected_server_and_client_session

        kwargs = {}
        if message_handler is not None:
            kwargs["message_handler"] = message_handler
        if logging_callback is not None:
            kwargs["logging_callback"] = logging_callback
        async with create_connected_server_and_client_session(app.server, **kwargs) as session:
            yield session


def is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def text(result: Any) -> str:
    return result.content[0].text


def data(result: Any) -> Any:
    assert not is_error(result), text(result)
    return json.loads(text(result))


def structured(result: Any) -> Any:
    value = getattr(result, "structured_content", None)
    if value is None:
        value = getattr(result, "structuredContent", None)
    return value


def run(fn: Callable[[], Any]) -> Any:
    return anyio.run(fn)


def dump(model: Any) -> Any:
    """An SDK model as its wire JSON (camelCase on both majors)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class CallInFlight:
    """One ``tools/call`` running in a task, which :meth:`cancel` cancels the way a client
    does when its user presses Esc: the caller stops waiting and the server is sent
    ``notifications/cancelled`` for the request (2.x's client sends it itself when the
    waiting task is cancelled; 1.x's does not, so it is sent here by hand)."""

    def __init__(self, client: Any, scope: anyio.CancelScope, request_id: Any) -> None:
        self.client = client
        self.scope = scope
        self.request_id = request_id
        self.result: Any = None
        self.done = anyio.Event()

    async def cancel(self) -> None:
        self.scope.cancel()
        if not _SDK2:
            import mcp.types as types

            await self.client.send_notification(types.ClientNotification(types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=self.request_id, reason="test"))))


async def start_call(client: Any, tasks: Any, name: str, arguments: dict[str, Any]) -> CallInFlight:
    """Start ``tools/call name`` in the task group ``tasks``; return once it is sent."""
    scope = anyio.CancelScope()
    request_id = None if _SDK2 else client._request_id  # 1.x numbers requests in order
    call = CallInFlight(client, scope, request_id)

    async def run() -> None:
        with scope:
            call.result = await client.call_tool(name, arguments)
        call.done.set()

    tasks.start_soon(run)
    if not _SDK2:
        while client._request_id == request_id:  # the request has its id (it is being sent)
            await anyio.sleep(0.001)
    else:
        await anyio.sleep(0.01)
    return call
