"""A real headless browser for the report tests, and a small PNG reader to look at what it drew.

Chromium comes from the system's packages (Debian's ``chromium``; ``.ci/run`` installs it
when it is missing). Each run gets its own profile directory and its own process group,
which is killed if anything of it is left when the run ends, so no browser outlives a test.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("These tests open the replay report in a real browser and need Debian's chromium: "
                    "apt-get install -y chromium (bash .ci/run installs it itself).")
    return found


def run_chromium(profile: Path, *args: str, timeout_s: float = 90) -> str:
    proc = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {timeout_s}s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # our own group: whatever of it is left
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"chromium exited with {proc.returncode}: {err[-2000:]}"
    return out


def dump_dom(page: Path, profile: Path) -> str:
    return run_chromium(profile, "--dump-dom", page.resolve().as_uri())


def screenshot(page: Path, profile: Path, target: Path, size: str = "1200,1600") -> Path:
    run_chromium(profile, f"--screenshot={target}", f"--window-size={size}", page.resolve().as_uri())
    assert target.is_file(), "chromium wrote no screenshot"
    return target


# ----------------------------------------------------------------------------- PNG

def write_png(path: Path, width: int, height: int, rgb: tuple[int, int, int]) -> Path:
    row = b"\x00" + bytes(rgb) * width
    raw = row * height

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    path.write_bytes(data)
    return path


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """``(width, height, rows)``: 8-bit RGB or RGBA, non-interlaced, each row as RGB bytes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + predictor) & 0xFF
        previous = line
        rows.append(bytes(line) if channels == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
    return width, height, rows


def count_colour(rows: list[bytes], rgb: tuple[int, int, int], tolerance: int = 6) -> int:
    """How many pixels are within ``tolerance`` of ``rgb`` in every channel."""
    r0, g0, b0 = rgb
    total = 0
    for row in rows:
        for i in range(0, len(row), 3):
            if abs(row[i] - r0) <= tolerance and abs(row[i + 1] - g0) <= tolerance and abs(row[i + 2] - b0) <= tolerance:
                total += 1
    return total
