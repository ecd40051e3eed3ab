"""PNG and JPEG for the kit, from the standard library: encode raw pixels as PNG, check the
headers and completeness of ready images, decode PNG."""

from __future__ import annotations

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SOI = b"\xff\xd8"
_PNG_END = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
#: PNG colour type for each channel count (grey, grey+alpha, RGB, RGBA).
_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}
_CHANNELS_OF_TYPE = {0: 1, 4: 2, 2: 3, 6: 4, 3: 1}
DEFAULT_LEVEL = 3


class ImageFormatError(ValueError):
    """Bytes that are not the image they claim to be (the message says what is wrong)."""


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(payload, zlib.crc32(kind))))


def encode_png(data: bytes | bytearray | memoryview, width: int, height: int, channels: int = 3,
               *, level: int = DEFAULT_LEVEL) -> bytes:
    """A PNG of raw interleaved 8-bit pixels (``channels``: 1 grey, 2 grey+alpha, 3 RGB,
    4 RGBA), rows top to bottom without padding. ``level`` is zlib's (0-9)."""
    colour = _COLOUR_TYPES.get(channels)
    if colour is None:
        raise ValueError(f"channels must be 1, 2, 3 or 4, not {channels}")
    if width < 1 or height < 1 or width > 0x7FFFFFFF or height > 0x7FFFFFFF:
        raise ValueError(f"a PNG must be 1x1 to 2^31-1 pixels on a side, not {width}x{height}")
    raw = bytes(data)
    stride = width * channels
    if len(raw) != stride * height:
        raise ValueError(f"{width}x{height} pixels of {channels} bytes need {stride * height} bytes, "
                         f"got {len(raw)}")
    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    # Filter type 0 on every row: a zero byte before each row.
    scanlines = b"".join([b"\x00" + raw[offset:offset + stride]
                          for offset in range(0, len(raw), stride)])
    return (PNG_SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(scanlines, level)) + _PNG_END)


def png_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` from a PNG's header. Raises ImageFormatError when the bytes
    do not start with the PNG signature and an intact IHDR chunk, or do not end with
    IEND (a truncated file)."""
    if not data.startswith(PNG_SIGNATURE):
        raise ImageFormatError("not a PNG: the bytes do not start with the PNG signature")
    if len(data) < 8 + 25 + 12:
        raise ImageFormatError(f"a truncated PNG: {len(data)} bytes is too short for a header and an end")
    length, kind = struct.unpack(">I4s", data[8:16])
    if kind != b"IHDR" or length != 13:
        raise ImageFormatError("a malformed PNG: the first chunk is not a 13-byte IHDR")
    payload = data[16:29]
    (crc,) = struct.unpack(">I", data[29:33])
    if crc != zlib.crc32(payload, zlib.crc32(b"IHDR")):
        raise ImageFormatError("a corrupt PNG: the IHDR checksum does not match")
    width, height = struct.unpack(">II", payload[:8])
    if width < 1 or height < 1:
        raise ImageFormatError(f"a malformed PNG: its header says {width}x{height} pixels")
    if not data.endswith(_PNG_END):
        raise ImageFormatError("a truncated PNG: it does not end with the IEND chunk")
    return width, height


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def jpeg_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` from a JPEG's frame header (SOFn). Raises ImageFormatError
    when the bytes are not a JPEG, the header is missing, or the end marker is absent."""
    if not data.startswith(JPEG_SOI + b"\xff"):
        raise ImageFormatError("not a JPEG: the bytes do not start with the JPEG start-of-image marker")
    if b"\xff\xd9" not in data[-16:]:
        raise ImageFormatError("a truncated JPEG: it does not end with the end-of-image marker")
    pos = 2
    end = len(data)
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            raise ImageFormatError(f"a malformed JPEG: no segment marker at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            pos += 2
            continue
        if marker in (0xD9, 0xDA):
            break
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if length < 2:
            raise ImageFormatError(f"a malformed JPEG: a segment of length {length} at byte {pos}")
        if marker in _SOF_MARKERS:
            if pos + 9 > end:
                break
            height, width = struct.unpack(">HH", data[pos + 5:pos + 9])
            if width < 1 or height < 1:
                raise ImageFormatError(f"a malformed JPEG: its frame header says {width}x{height} pixels")
            return width, height
        pos += 2 + length
    raise ImageFormatError("a malformed JPEG: no frame header (SOF) before the image data")


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> bytes:
    """Undo PNG filters 0-4 on 8-bit scanlines (Python loops; used only to scale a
    ready PNG when no pygame is present)."""
    stride = width * bpp
    if len(raw) < (stride + 1) * height:
        raise ImageFormatError("a truncated PNG: the image data is shorter than its header says")
    out = bytearray(stride * height)
    prev = bytearray(stride)
    for y in range(height):
        base = y * (stride + 1)
        kind = raw[base]
        line = bytearray(raw[base + 1:base + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif kind != 0:
            raise ImageFormatError(f"a corrupt PNG: unknown filter type {kind} on row {y}")
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return bytes(out)


def decode_png(data: bytes, *, max_pixels: int) -> tuple[bytes, int, int, int]:
    """``(pixels, width, height, channels)`` of an 8-bit, non-interlaced PNG (grey,
    grey+alpha, RGB, RGBA or palette, which comes out as RGB or RGBA). Refuses images
    over ``max_pixels`` before inflating anything."""
    width, height = png_size(data)
    if width * height > max_pixels:
        raise ImageFormatError(f"a {width}x{height} PNG is over the {max_pixels}-pixel limit")
    pos = 8
    header = b""
    palette = b""
    transparency = b""
    idat: list[bytes] = []
    while pos + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        payload = data[pos + 8:pos + 8 + length]
        if len(payload) != length:
            raise ImageFormatError(f"a truncated PNG: the {kind!r} chunk is cut short")
        if kind == b"IHDR":
            header = payload
        elif kind == b"PLTE":
            palette = payload
        elif kind == b"tRNS":
            transparency = payload
        elif kind == b"IDAT":
            idat.append(payload)
        elif kind == b"IEND":
            break
        pos += 12 + length
    depth, colour, _compression, _filter, interlace = struct.unpack(">BBBBB", header[8:13])
    if depth != 8 or colour not in _CHANNELS_OF_TYPE or interlace != 0:
        raise ImageFormatError(f"the kit decodes 8-bit non-interlaced PNGs only (this one: depth {depth}, "
                               f"colour type {colour}, interlace {interlace}); install pygame-ce or "
                               "return raw pixels instead")
    bpp = _CHANNELS_OF_TYPE[colour]
    inflater = zlib.decompressobj()
    limit = (width * bpp + 1) * height
    try:
        raw = inflater.decompress(b"".join(idat), limit)
    except zlib.error as exc:
        raise ImageFormatError(f"a corrupt PNG: its image data does not inflate ({exc})") from None
    pixels = _unfilter(raw, width, height, bpp)
    if colour != 3:
        return pixels, width, height, bpp
    if not palette or len(palette) % 3:
        raise ImageFormatError("a malformed PNG: a palette image without a valid PLTE chunk")
    entries = len(palette) // 3
    if transparency:
        alpha = transparency + b"\xff" * (entries - len(transparency))
        table = [palette[3 * i:3 * i + 3] + alpha[i:i + 1] for i in range(entries)]
    else:
        table = [palette[3 * i:3 * i + 3] for i in range(entries)]
    table += [table[0]] * (256 - entries)
    return b"".join([table[index] for index in pixels]), width, height, 4 if transparency else 3
