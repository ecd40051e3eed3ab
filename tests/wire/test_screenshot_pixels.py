"""A screenshot's pixels are bounded before anything is decoded: a small PNG or JPEG whose
header declares hundreds of millions of pixels is refused from the header with a clear
error (never an InternalError from Pillow, never gigabytes decoded), over MCP, while an
oversized image within the cap is still scaled down, and the bridge keeps serving."""

from __future__ import annotations

import struct
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.wire.images import MAX_PIXELS, ImageProblem, inspect_image
from mcp_harness import connect, is_error, structured, text
from peers.hostile import routed

pytestmark = pytest.mark.timeout(120)

HEALTH = b'{"ok": true, "frame": 5, "features": ["screenshot"]}'


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


@lru_cache(maxsize=None)
def bomb_png(width: int, height: int) -> bytes:
    """A whole, valid 1-bit grey PNG of ``width`` x ``height`` black pixels: a few
    hundred kilobytes that decode to one byte a pixel or more."""
    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    packer = zlib.compressobj(9)
    block = row * 256
    idat = b"".join(packer.compress(block) for _ in range(height // 256)) + packer.compress(row * (height % 256))
    idat += packer.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def bomb_jpeg(width: int, height: int) -> bytes:
    """A JPEG's headers claiming ``width`` x ``height`` (SOF0), then a scan and EOI."""
    sof = struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00"
    return (b"\xff\xd8" + b"\xff\xc0" + struct.pack(">H", len(sof) + 2) + sof
            + b"\xff\xda" + struct.pack(">H", 8) + b"\x01\x01\x00\x00\x3f\x00" + b"\x00" * 64 + b"\xff\xd9")


def rgb_png(width: int, height: int) -> bytes:
    raw = (b"\x00" + b"\x20\x80\xc0" * width) * height
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def game(serve: Any, image: dict[str, Any]) -> Any:
    def screenshot(_target: str) -> tuple[int, bytes, str]:
        body, mime = image["body"], image["mime"]
        return 200, body, mime
    return serve(routed({"/health": HEALTH, "/screenshot": screenshot}))


async def call(app: BridgeServer, tool: str, **arguments: Any) -> Any:
    async with connect(app) as client:
        return await client.call_tool(tool, arguments)


@pytest.mark.parametrize("size", [(16384, 16384), (16384, 10900)])
def test_a_png_declaring_too_many_pixels_is_refused_from_its_header(serve: Any, size: tuple[int, int]) -> None:
    body = bomb_png(*size)
    assert len(body) < 2_000_000  # a small file; its pixels would be gigabytes
    peer = game(serve, {"body": body, "mime": "image/png"})
    app = BridgeServer(Bridge(Config(port=peer.port, scan=False, registry=False, timeout_ms=10_000)))
    result = anyio.run(lambda: call(app, "call_tool", name="get_screenshot", arguments={}))
    message = text(result)
    assert is_error(result) and "NotAGameSurface" in message and "InternalError" not in message
    assert f"{size[0]}x{size[1]}" in message and "million pixels" in message and "maxWidth" in message
    health = anyio.run(lambda: call(app, "call_tool", name="get_health", arguments={}))
    assert not is_error(health) and structured(health)["frame"] == 5  # the bridge keeps serving


def test_a_jpeg_declaring_too_many_pixels_is_refused_too(serve: Any) -> None:
    peer = game(serve, {"body": bomb_jpeg(16384, 16384), "mime": "image/jpeg"})
    app = BridgeServer(Bridge(Config(port=peer.port, scan=False, registry=False)))
    result = anyio.run(lambda: call(app, "call_tool", name="get_screenshot", arguments={}))
    assert is_error(result) and "JPEG's frame header claims 16384x16384" in text(result)


def test_an_oversized_image_within_the_cap_is_still_scaled_down(serve: Any, tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    peer = game(serve, {"body": rgb_png(1800, 1200), "mime": "image/png"})
    app = BridgeServer(Bridge(Config(port=peer.port, scan=False, registry=False,
                                     environ={"GAME_BRIDGE_SCREENSHOTS": str(tmp_path / "shots")})))
    result = anyio.run(lambda: call(app, "call_tool", name="get_screenshot", arguments={"maxWidth": 300}))
    assert not is_error(result), text(result)
    fields = structured(result)
    assert (fields["width"], fields["height"]) == (300, 200) and "scaled it down" in fields["note"]


def test_the_cap_is_read_from_the_header_before_the_pixels() -> None:
    # A body that is nothing but a header claiming too much: refused for its size, not its missing data.
    side = int(MAX_PIXELS ** 0.5) + 1
    head_only = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 6, 0, 0, 0))
    with pytest.raises(ImageProblem, match="million pixels"):
        inspect_image(head_only, "image/png")
    inspect_image(rgb_png(4096, 1), "image/png")  # the cap is pixels, not a side
