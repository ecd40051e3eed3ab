"""A tool's outcome as an MCP result: its value's text block, structuredContent and image
block, or an error's; the JSON-RPC line the fast paths write for it, field for field what the
SDK writes; and the size cap every answer keeps (``ANSWER_LIMIT``)."""

from __future__ import annotations

# Built against both SDK majors: a `pyright: ignore` here marks a line written for the other one
# (1.x's decorators, 2.x's Server(on_...=); SDK types built with camelCase keywords, which both accept).

# SDK models are built with camelCase keywords, which 1.x requires and 2.x accepts.
# mypy: disable-error-code="call-arg"

import base64
import json
import logging
from collections.abc import Mapping
from typing import Any

import mcp.types as types

from ..core.screenshot import IMAGE_KEY, ImagePayload
from ..core.tools.state import too_large
from ..errors import BridgeError
from .encoding import (ANSWER_LIMIT, STRUCTURED_DEPTH, STRUCTURED_LIMIT, answer_size, dumps, dumps_strict, json_id,
                       nests_within, quoted, structured_content)

log = logging.getLogger("game_bridge_mcp")


#: What was asked, for an answer too large to send: the tool's name and its arguments.
Asked = tuple[str, Mapping[str, Any]]


class _Oversized(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _result_parts(value: dict[str, Any]) -> tuple[str, Any, bool, ImagePayload | None]:
    """A result's text, the value that goes out as its structuredContent (every answer has
    one: the tools declare an outputSchema), whether that text is strict JSON, and the
    image it carries (get_screenshot's), which is taken out of the value. Raises
    _Oversized when the answer's line would be over ANSWER_LIMIT."""
    image = value.pop(IMAGE_KEY, None) if isinstance(value, dict) else None
    text, strict = dumps_strict(value)
    image = image if isinstance(image, ImagePayload) else None
    size = answer_size(text, len(image.data) if image is not None else 0)
    if size > ANSWER_LIMIT:
        raise _Oversized(size)
    # The SDK's serializer gives up (and takes the session down) past a few hundred levels:
    # a deeper answer's structuredContent is cut at STRUCTURED_DEPTH (the text stays whole).
    return text, structured_content(value, text), strict, image


def _too_large(value: Any, size: int, asked: Asked | None) -> types.CallToolResult:
    """The error an answer over ANSWER_LIMIT gets instead: how large, and what to read."""
    name, arguments = asked if asked is not None else ("", {})
    log.warning("an answer of %s was %d bytes, over the %d an answer may take: not sent", name or "a call", size,
                ANSWER_LIMIT)
    return error_result(too_large(value, size, name, arguments))


def result_of(value: dict[str, Any], asked: Asked | None = None) -> types.CallToolResult:
    """The text block and structuredContent of a result; an image it carries
    (get_screenshot's) follows as an image block, so a client that shows no images still
    has everything else. An answer too large to send is the error that says how to read
    it in parts (``asked``: the call it answers)."""
    try:
        text, structured, _strict, image = _result_parts(value)
    except _Oversized as over:
        return _too_large(value, over.size, asked)
    return result_of_parts(text, structured, image)


def result_of_parts(text: str, structured: Any, image: ImagePayload | None) -> types.CallToolResult:
    content: list[Any] = [types.TextContent(type="text", text=text)]
    if image is not None:
        content.append(types.ImageContent(type="image", data=base64.b64encode(image.data).decode("ascii"),  # pyright: ignore[reportCallIssue]
                                          mimeType=image.mime))  # pyright: ignore[reportCallIssue]
    return types.CallToolResult(content=content, structuredContent=structured, isError=False)  # pyright: ignore[reportCallIssue]


def call_result_line(ident: Any, outcome: dict[str, Any] | types.CallToolResult, asked: Asked | None = None) -> bytes:
    """The JSON-RPC line answering ``tools/call`` ``ident`` with a value (as
    :func:`result_of` makes it) or a built result (:func:`error_result`): the fields the
    SDK writes for them. A value is encoded once: its text IS its structuredContent."""
    return b"".join(call_result_chunks(ident, [outcome], asked))


def call_result_chunks(ident: Any, holder: list[dict[str, Any] | types.CallToolResult],
                       asked: Asked | None = None) -> list[bytes]:
    """:func:`call_result_line` in pieces, of the one outcome in ``holder`` (which it
    empties): a large value is let go as soon as its text is made, and each copy of the
    text as soon as the next exists, so a 10 MB answer is about two copies at its peak
    (three while the text is encoded as the structuredContent), not six (the value, its
    text, the escaped text, the structuredContent, the line, its bytes)."""
    outcome = holder.pop()
    head = ('{"jsonrpc":"2.0","id":' + json_id(ident) + ',"result":').encode("utf-8")
    if not isinstance(outcome, dict):
        dumped = outcome.model_dump(by_alias=True, mode="json", exclude_none=True)
        wire = {key: dumped[key] for key in ("content", "structuredContent", "isError") if key in dumped}
        return [head + json.dumps(wire, ensure_ascii=False).encode("utf-8") + b"}\n"]
    try:
        text, structured, strict, image = _result_parts(outcome)
    except _Oversized as over:
        return call_result_chunks(ident, [_too_large(outcome, over.size, asked)])
    if not strict or structured is not outcome:  # NaN in a host's value, or cut deep: as the SDK renders it
        return call_result_chunks(ident, [result_of_parts(text, structured, image)])
    del outcome, structured  # the text stands for the value from here on: it IS the structuredContent
    escaped = quoted(text).encode("utf-8")
    tail = b"}"
    if image is not None:
        tail += (b',{"type":"image","data":"' + base64.b64encode(image.data) + b'","mimeType":'
                 + json.dumps(image.mime).encode("utf-8") + b"}")
    chunks = [head, b'{"content":[{"type":"text","text":', escaped, tail, b"]", b',"structuredContent":',
              text.encode("utf-8")]
    del escaped, text
    chunks.append(b',"isError":false}}\n')
    return chunks


def error_result(exc: BaseException) -> types.CallToolResult:
    if isinstance(exc, BridgeError):
        text, data = exc.render(), exc.to_dict()
    elif isinstance(exc, RecursionError):
        text = "NotAGameSurface: The game's answer is nested too deeply to handle; the bridge ignored it."
        data = {"error": "NotAGameSurface"}
    else:
        log.error("internal error", exc_info=exc)
        text = (f"InternalError: {type(exc).__name__}: {str(exc)[:500]}. This is a bug in game-bridge-mcp; "
                "the server keeps serving. Details are on its stderr.")
        data = {"error": "InternalError"}
    if len(text) > STRUCTURED_LIMIT:  # the bridge's messages are short; one carrying a game's text is capped
        text = text[:STRUCTURED_LIMIT] + f"... ({len(text) - STRUCTURED_LIMIT:,} more characters cut)"
    try:
        if len(dumps(data)) > STRUCTURED_LIMIT or not nests_within(data, STRUCTURED_DEPTH):
            data = {"error": data.get("error")}
    except (TypeError, ValueError, RecursionError):
        data = {"error": data.get("error")}
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structuredContent=data, isError=True)  # pyright: ignore[reportCallIssue]
