"""A PNG reader written from the PNG specification, independent of the kit's code, for
tests that must check an image without trusting the encoder that made it."""

from __future__ import annotations

import struct
import zlib


def read_png(data: bytes) -> tuple[int, int, int, int, bytes]:
    """(width, height, colour type, bit depth, pixels): every chunk's CRC checked, IDAT
    inflated, all five filters undone. Independent of the kit's code."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, colour, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (comp, filt, interlace) == (0, 0, 0)
    bpp = {0: 1, 4: 2, 2: 3, 6: 4}[colour]
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * bpp
    assert len(raw) == (stride + 1) * height
    out, prev = bytearray(), bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) % 256
            elif kind == 2:
                line[i] = (line[i] + b) % 256
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) % 256
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) % 256
            else:
                assert kind == 0, kind
        out += line
        prev = line
    return width, height, colour, depth, bytes(out)
