"""One tool call against a bridge served over streamable HTTP (``call --url``), with the
SDK's own client on either major; and :func:`connect`, the session it opens (the
benchmark and the tests use it too)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from mcp import ClientSession

from ...errors import BridgeError, BridgeUsageError


def _client_streams(url: str, headers: dict[str, str]) -> Any:
    """The SDK's streamable-HTTP client transport with these headers (the function's name
    and how headers reach it changed between releases)."""
    from mcp.client import streamable_http

    modern = getattr(streamable_http, "streamable_http_client", None)
    if modern is not None:
        from mcp.shared._httpx_utils import create_mcp_http_client

        return modern(url, http_client=create_mcp_http_client(headers=headers))
    older = getattr(streamable_http, "streamablehttp_client")  # 1.x before streamable_http_client
    return older(url, headers=headers)


@asynccontextmanager
async def connect(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    """An initialised MCP session on the bridge at ``url``; ended (DELETE) on exit."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with AsyncExitStack() as stack:
        opened = await stack.enter_async_context(_client_streams(url, headers))  # (read, write[, session id])
        session = await stack.enter_async_context(ClientSession(opened[0], opened[1]))
        await session.initialize()
        yield session


def _refused(url: str, token: str | None) -> bool:
    """Whether the server at ``url`` answers this token with 401 (asked again plainly: the
    SDK's client does not say what status failed it)."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=b"{}", headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10):
            return False
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except (OSError, ValueError):
        return False


def _describe(exc: BaseException, url: str, token: str | None) -> str:
    """What went wrong reaching ``url``, in a sentence (the SDK wraps transport errors in
    exception groups)."""
    inner: BaseException = exc
    while isinstance(getattr(inner, "exceptions", None), tuple) and inner.exceptions:  # type: ignore[attr-defined]
        inner = inner.exceptions[0]  # type: ignore[attr-defined]
    text = str(inner) or type(inner).__name__
    if "401" in text or _refused(url, token):
        return (f"The bridge at {url} refused the token (401). Pass the server's token with --token or "
                "GAME_BRIDGE_TOKEN (the server printed it on start and wrote it under GAME_BRIDGE_HOME/http/).")
    return f"Could not call the bridge at {url}: {type(inner).__name__}: {text[:300]}"


def call_remote(url: str, token: str | None, tool: str, arguments: dict[str, Any], *,
                timeout_s: float = 300.0) -> tuple[bool, dict[str, Any] | str, list[tuple[str, bytes]]]:
    """Run one tool on a remote bridge: (is_error, the result's value or error text, images
    as (mime type, bytes)). Raises BridgeUsageError when the bridge cannot be reached."""

    async def run() -> Any:
        with anyio.fail_after(timeout_s):
            async with connect(url, token) as session:
                return await session.call_tool(tool, arguments)

    try:
        result = anyio.run(run)
    except BridgeError:
        raise
    except BaseException as exc:  # noqa: BLE001 - a connection failure becomes one clear error
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise BridgeUsageError(_describe(exc, url, token)) from None
    images: list[tuple[str, bytes]] = []
    texts: list[str] = []
    for block in result.content:
        if getattr(block, "type", None) == "image":
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", "image/png")
            images.append((str(mime), base64.b64decode(block.data)))
        elif getattr(block, "type", None) == "text":
            texts.append(block.text)
    failed = bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
    text = texts[0] if texts else ""
    if failed:
        return True, text, images
    try:
        value = json.loads(text)
    except ValueError:
        value = {"result": text}
    return False, value if isinstance(value, dict) else {"result": value}, images
