"""What a game's screenshot really is: signature against ``Content-Type``, dimensions (checked
against the caps before any pixel is inflated) and completeness, and :class:`Screenshot`.
Standard library only."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"
MIME = {"png": "image/png", "jpeg": "image/jpeg"}
#: No screen is larger than this on a side; an IHDR claiming more is refused unread.
MAX_SIDE = 16384
#: The most pixels the bridge takes an image of (a 5K screen is 14.7 million): what its
#: header claims is checked before anything is inflated or decoded, since a few hundred
#: kilobytes of PNG can declare gigabytes of pixels.
MAX_PIXELS = 4096 * 4096
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


class ImageProblem(ValueError):
    """The body is not a usable image; the message says what is wrong with it."""


@dataclass(frozen=True)
class ImageInfo:
    format: str  # "png" or "jpeg"
    width: int
    height: int

    @property
    def mime(self) -> str:
        return MIME[self.format]


def media_type(content_type: str | None) -> str:
    """``image/png; charset=x`` -> ``image/png`` (lower case; "" when absent)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def sniff(body: bytes) -> str | None:
    if body.startswith(PNG_SIGNATURE):
        return "png"
    if body.startswith(JPEG_SIGNATURE):
        return "jpeg"
    return None


def inspect_image(body: bytes, content_type: str | None = None, *, verify_pixels: bool = True) -> ImageInfo:
    """Read ``body`` as the image ``content_type`` says it is; ImageProblem when it is not one."""
    declared = media_type(content_type)
    kind = sniff(body)
    if content_type is not None and declared not in MIME.values():
        shown = declared or "no Content-Type"
        raise ImageProblem(f"the answer is {shown}, not image/png or image/jpeg"
                           + (f" (though the body is a {kind.upper()})" if kind else ""))
    if kind is None:
        start = body[:16]
        raise ImageProblem(f"the body is not a PNG or JPEG image (it starts {start!r}, {len(body)} bytes)")
    if content_type is not None and declared != MIME[kind]:
        raise ImageProblem(f"Content-Type says {declared} but the body is a {kind.upper()}")
    width, height = _png(body, verify_pixels) if kind == "png" else _jpeg(body)
    return ImageInfo(kind, width, height)


# --------------------------------------------------------------------------- a /screenshot answer

#: The bridge's cap on a screenshot's body: a 1568x1568 RGBA PNG of noise is about 10 MB.
SCREENSHOT_MAX_BYTES = 20 * 1024 * 1024
_REASON_CHARS = 500


@dataclass(frozen=True)
class Screenshot:
    """A ``200`` answer to ``GET /screenshot``, read and found whole."""

    info: ImageInfo
    body: bytes
    frame: int | None  # X-Game-Frame, when the game sent a whole number
    window: tuple[int, int] | None  # X-Game-Window, when sent as <width>x<height>


def parse_window(value: str | None) -> tuple[int, int] | None:
    """``X-Game-Window: 1280x720`` -> ``(1280, 720)``; None for anything else."""
    width, sep, height = (value or "").strip().lower().partition("x")
    if not sep or not width.strip().isdigit() or not height.strip().isdigit():
        return None
    w, h = int(width), int(height)
    return (w, h) if 0 < w <= 1_000_000 and 0 < h <= 1_000_000 else None


def parse_frame(value: str | None) -> int | None:
    text = (value or "").strip()
    return int(text) if text.isdigit() and len(text) < 20 else None


def game_reason(body: bytes) -> str | None:
    """The ``error`` of a ``{"ok": false, "error": "..."}`` body, on one line and capped."""
    import json

    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    error = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(error, str) or not error.strip():
        return None
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in error).split())
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."


def check_size(where: str, width: int, height: int) -> None:
    """Refuse, from the header alone, an image larger than any screen or over the pixel cap."""
    if width > MAX_SIDE or height > MAX_SIDE:
        raise ImageProblem(f"the {where} claims {width}x{height}, larger than any screen "
                           f"({MAX_SIDE} a side at most)")
    if width * height > MAX_PIXELS:
        raise ImageProblem(f"the {where} claims {width}x{height} ({width * height / 1e6:.1f} million pixels), "
                           f"more than the {MAX_PIXELS / 1e6:.1f} million the bridge decodes; the bridge "
                           "asks for an image that fits maxWidth x maxHeight: scale the screenshot to it")


# --------------------------------------------------------------------------- PNG

def _png(body: bytes, verify_pixels: bool) -> tuple[int, int]:
    pos = len(PNG_SIGNATURE)
    header: tuple[int, int, int, int, int] | None = None
    idat: list[bytes] = []
    while True:
        if pos + 8 > len(body):
            raise ImageProblem(f"the PNG is truncated: it ends after {len(body)} bytes, before its IEND chunk")
        length, kind = struct.unpack(">I4s", body[pos:pos + 8])
        end = pos + 8 + length + 4
        if end > len(body):
            raise ImageProblem(f"the PNG is truncated: its {kind.decode('latin-1')!r} chunk needs {length} bytes "
                               f"but the body ends after {len(body)}")
        data = body[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", body[end - 4:end])
        if zlib.crc32(kind + data) & 0xFFFFFFFF != crc:
            raise ImageProblem(f"the PNG's {kind.decode('latin-1')!r} chunk at byte {pos} has a bad CRC (damaged)")
        if header is None:
            if kind != b"IHDR" or length != 13:
                raise ImageProblem("the PNG does not start with an IHDR chunk")
            w, h, depth, colour, _comp, _filter, interlace = struct.unpack(">IIBBBBB", data)
            if w == 0 or h == 0:
                raise ImageProblem(f"the PNG's IHDR says {w}x{h}")
            check_size("PNG's IHDR", w, h)
            if colour not in _PNG_CHANNELS:
                raise ImageProblem(f"the PNG's IHDR has colour type {colour}, which does not exist")
            header = (w, h, depth, colour, interlace)
        elif kind == b"IDAT":
            idat.append(data)
        elif kind == b"IEND":
            break
        pos = end
    w, h, depth, colour, interlace = header
    if not idat:
        raise ImageProblem("the PNG has no IDAT chunk (no pixels)")
    if verify_pixels:
        expected = _png_raw_size(w, h, _PNG_CHANNELS[colour] * depth, interlace)
        got = _inflated_size(b"".join(idat), expected)
        if got != expected:
            raise ImageProblem(f"the PNG's IHDR says {w}x{h} ({expected:,} bytes of rows) but its pixel data "
                               f"holds {f'more than {expected:,}' if got > expected else f'{got:,}'}")
    return w, h


def _png_raw_size(w: int, h: int, bits: int, interlace: int) -> int:
    def rows(pw: int, ph: int) -> int:
        return 0 if pw == 0 or ph == 0 else ph * (1 + (pw * bits + 7) // 8)

    if interlace != 1:
        return rows(w, h)
    passes = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
    return sum(rows((w - x0 + dx - 1) // dx, (h - y0 + dy - 1) // dy) for x0, y0, dx, dy in passes)


def _inflated_size(data: bytes, expected: int) -> int:
    """How many bytes ``data`` inflates to, up to ``expected + 1``, in 1 MiB pieces."""
    inflater = zlib.decompressobj()
    total = 0
    piece = 1 << 20
    try:
        out = inflater.decompress(data, piece)
        while True:
            total += len(out)
            if total > expected:
                return total
            if not inflater.unconsumed_tail:
                total += len(inflater.flush())
                return total
            out = inflater.decompress(inflater.unconsumed_tail, piece)
    except zlib.error as exc:
        raise ImageProblem(f"the PNG's pixel data does not inflate ({exc})") from None


# --------------------------------------------------------------------------- JPEG

def _jpeg(body: bytes) -> tuple[int, int]:
    pos = 2
    size: tuple[int, int] | None = None
    while pos < len(body):
        if body[pos] != 0xFF:
            raise ImageProblem(f"the JPEG is damaged: no segment marker at byte {pos}")
        while pos < len(body) and body[pos] == 0xFF:
            pos += 1
        if pos >= len(body):
            break
        marker = body[pos]
        pos += 1
        if marker == 0xD9:
            raise ImageProblem("the JPEG ends (EOI) before its image data")
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:
            continue
        if pos + 2 > len(body):
            break
        (length,) = struct.unpack(">H", body[pos:pos + 2])
        if length < 2 or pos + length > len(body):
            break
        if marker in _SOF:
            if length < 7:
                raise ImageProblem("the JPEG's frame header (SOF) is too short")
            h, w = struct.unpack(">HH", body[pos + 3:pos + 7])
            if w == 0 or h == 0:
                raise ImageProblem(f"the JPEG's frame header says {w}x{h}")
            check_size("JPEG's frame header", w, h)
            size = (w, h)
        if marker == 0xDA:  # start of scan: entropy-coded data runs to EOI
            if size is None:
                raise ImageProblem("the JPEG has no frame header (SOF) before its image data")
            if not body.rstrip(b"\x00").endswith(b"\xff\xd9"):
                raise ImageProblem(f"the JPEG is truncated: its {len(body)} bytes do not end with EOI")
            return size
        pos += length
    raise ImageProblem(f"the JPEG is truncated: it ends after {len(body)} bytes, before its image data")


__all__ = ["ImageInfo", "ImageProblem", "MAX_PIXELS", "MAX_SIDE", "MIME", "SCREENSHOT_MAX_BYTES", "Screenshot",
           "check_size", "game_reason",
           "inspect_image", "media_type", "parse_frame", "parse_window", "sniff"]
