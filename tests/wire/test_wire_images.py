"""The bridge's image reader (wire/images.py): what a screenshot body really is, checked
against PNGs and JPEGs made by pygame (libpng, libjpeg) and by the hand-made game's own
encoder, and against every way a body can lie about itself."""

from __future__ import annotations

import io
import os
import struct
import zlib

import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
import pygame  # noqa: E402

from game_bridge_mcp.wire.images import ImageInfo, ImageProblem, inspect_image, media_type  # noqa: E402

from peers.handmade import encode_png, render  # noqa: E402


def saved(size: tuple[int, int], ext: str, alpha: bool = False) -> bytes:
    surface = pygame.Surface(size, pygame.SRCALPHA if alpha else 0)
    surface.fill((200, 30, 60, 128))
    out = io.BytesIO()
    pygame.image.save(surface, out, f"x.{ext}")
    return out.getvalue()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(ihdr: tuple[int, int, int, int, int], raw: bytes) -> bytes:
    w, h, depth, colour, interlace = ihdr
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, interlace))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("body, content_type, expected", [
    (saved((33, 17), "png"), "image/png", ImageInfo("png", 33, 17)),
    (saved((40, 9), "png", alpha=True), "image/png; charset=binary", ImageInfo("png", 40, 9)),
    (saved((33, 17), "jpg"), "image/jpeg", ImageInfo("jpeg", 33, 17)),
    (saved((1, 300), "jpg"), "IMAGE/JPEG", ImageInfo("jpeg", 1, 300)),
    (encode_png(50, 20, render(50, 20, 0, 3, False)), "image/png", ImageInfo("png", 50, 20)),
    (png((1, 1, 8, 2, 1), b"\x00" * 4), None, ImageInfo("png", 1, 1)),  # Adam7: only pass 1 holds a pixel
    (png((3, 3, 8, 2, 1), b"\x00" * 33), None, ImageInfo("png", 3, 3)),  # Adam7: 4+4+7+8+10 bytes of rows
    (png((10, 2, 1, 0, 0), b"\x00\x00\x00\x00\x00\x00"), None, ImageInfo("png", 10, 2)),  # 1-bit grey
])
def test_real_images_are_read_with_their_size(body: bytes, content_type: str | None, expected: ImageInfo) -> None:
    info = inspect_image(body, content_type)
    assert info == expected
    assert info.mime == {"png": "image/png", "jpeg": "image/jpeg"}[info.format]


GOOD_PNG = saved((64, 48), "png")
GOOD_JPEG = saved((64, 48), "jpg")


@pytest.mark.parametrize("body, content_type, message", [
    (b"<html>hello</html>", "image/png", "not a PNG or JPEG image (it starts b'<html>hello</htm', 18 bytes)"),
    (GOOD_PNG, "text/html", "the answer is text/html, not image/png or image/jpeg (though the body is a PNG)"),
    (GOOD_PNG, "", "the answer is no Content-Type"),
    (GOOD_JPEG, "image/png", "Content-Type says image/png but the body is a JPEG"),
    (GOOD_PNG[: len(GOOD_PNG) // 2], "image/png", "the PNG is truncated"),
    (GOOD_PNG[:-12], "image/png", "before its IEND chunk"),
    (GOOD_PNG[:19] + b"\x07" + GOOD_PNG[20:], "image/png", "'IHDR' chunk at byte 8 has a bad CRC"),
    (GOOD_JPEG[: len(GOOD_JPEG) // 2], "image/jpeg", "the JPEG is truncated"),
    (GOOD_JPEG[:4], "image/jpeg", "the JPEG is truncated"),
    (encode_png(8, 8, render(8, 8, 0, 0, False), claim=(16, 16)), "image/png",
     "IHDR says 16x16 (784 bytes of rows) but its pixel data holds 200"),
    (encode_png(8, 8, render(8, 8, 0, 0, False), claim=(4, 4)), "image/png", "IHDR says 4x4 (52 bytes of rows) but its pixel data holds more than 52"),
    (png((20000, 20000, 8, 2, 0), b""), "image/png", "claims 20000x20000, larger than any screen"),
    (png((0, 5, 8, 2, 0), b""), "image/png", "IHDR says 0x5"),
    (png((5, 5, 8, 9, 0), b""), "image/png", "colour type 9"),
    (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + chunk(b"IEND", b""),
     "image/png", "no IDAT chunk"),
    (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
     + chunk(b"IDAT", b"not zlib") + chunk(b"IEND", b""), "image/png", "does not inflate"),
    (b"\xff\xd8\xff\xd9", "image/jpeg", "ends (EOI) before its image data"),
    (b"\xff\xd8\xff\xda\x00\x02\xff\xd9", "image/jpeg", "no frame header (SOF) before its image data"),
])
def test_each_lying_body_is_refused_saying_what_is_wrong(body: bytes, content_type: str, message: str) -> None:
    with pytest.raises(ImageProblem) as caught:
        inspect_image(body, content_type)
    assert message in str(caught.value)


def test_a_huge_claim_is_refused_by_counting_not_by_holding_its_pixels() -> None:
    # IHDR claims 4096 x 4096 RGBA (64 MB of rows, within the pixel cap); the data holds 100 bytes.
    body = png((4096, 4096, 8, 6, 0), b"\x00" * 100)
    with pytest.raises(ImageProblem, match="4096x4096 .* but its pixel data holds 100"):
        inspect_image(body, "image/png")
    assert inspect_image(body, verify_pixels=False) == ImageInfo("png", 4096, 4096)
    # 16000 x 16000 is over the cap: refused from the header, whether pixels are verified or not
    with pytest.raises(ImageProblem, match="16000x16000 .*million pixels"):
        inspect_image(png((16000, 16000, 8, 6, 0), b"\x00" * 100), verify_pixels=False)


def test_media_type() -> None:
    assert media_type(" Image/PNG ; q=1") == "image/png" and media_type(None) == ""
