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
async def connect(app: BridgeServer, *, message_handler: Callable[..., Any] | None = None) -> AsyncIterator[Any]:
    if _SDK2:
        from mcp import Client

        kwargs: dict[str, Any] = {"mode": "legacy"}
        if message_handler is not None:
            kwargs["message_handler"] = message_handler
        async with Client(app.server, **kwargs) as client:
            yield client
    else:
        from mcp.shared.memory import create_connected_server_and_client_session

        kwargs = {}
        if message_handler is not None:
            kwargs["message_handler"] = message_handler
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
