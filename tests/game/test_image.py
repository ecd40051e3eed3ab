"""The kit's image module: PNG encoder, box-filter scaler, header readers, capture results.

The encoder is checked two independent ways: by a decoder written here from the PNG
specification (chunk CRCs, zlib, all five filters) and by libpng through pygame-ce.
The scaler is checked against hand-computed averages and an exact Fraction reference.
"""

from __future__ import annotations

import io
import os
import random
import struct
import zlib
from fractions import Fraction

import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
import pygame  # noqa: E402  (pygame-ce is in the test extra)

from game_bridge_mcp.game import image  # noqa: E402
from game_bridge_mcp.game.image.png import decode_png  # noqa: E402
from game_bridge_mcp.game.image import Image, ImageFormatError, Pixels  # noqa: E402
from png_helpers import read_png  # noqa: E402

CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def noise(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA"])
@pytest.mark.parametrize("size", [(1, 1), (3, 7), (64, 5)])
def test_png_round_trips_through_an_independent_reader(mode: str, size: tuple[int, int]) -> None:
    width, height = size
    pixels = noise(width * height * CHANNELS[mode], seed=width + height)
    png = image.encode_png(pixels, width, height, CHANNELS[mode])
    w, h, colour, depth, decoded = read_png(png)
    assert (w, h, depth) == (width, height, 8)
    assert colour == {"L": 0, "LA": 4, "RGB": 2, "RGBA": 6}[mode]
    assert decoded == pixels


@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_png_is_read_back_exactly_by_libpng(mode: str) -> None:
    width, height = 37, 21
    pixels = noise(width * height * CHANNELS[mode], seed=5)
    png = image.encode_png(pixels, width, height, CHANNELS[mode])
    surface = pygame.image.load(io.BytesIO(png), "shot.png")
    assert surface.get_size() == (width, height)
    assert pygame.image.tobytes(surface, mode) == pixels


def test_encoder_refuses_a_buffer_of_the_wrong_size() -> None:
    with pytest.raises(ValueError, match="need 12 bytes, got 11"):
        image.encode_png(b"\0" * 11, 2, 2, 3)
    with pytest.raises(ValueError, match="channels"):
        image.encode_png(b"\0" * 20, 2, 2, 5)


# ---------------------------------------------------------------------- the scaler
def exact_box(src: bytes, width: int, height: int, ch: int, new_w: int, new_h: int) -> bytes:
    """Area averaging with Fractions, rounded half up: the definition."""
    out = bytearray()
    for m in range(new_h):
        y0, y1 = Fraction(m * height, new_h), Fraction((m + 1) * height, new_h)
        for k in range(new_w):
            x0, x1 = Fraction(k * width, new_w), Fraction((k + 1) * width, new_w)
            for c in range(ch):
                total = Fraction(0)
                for i in range(int(y0), min(height, int(y1) + 1)):
                    dy = min(y1, i + 1) - max(y0, i)
                    if dy <= 0:
                        continue
                    for j in range(int(x0), min(width, int(x1) + 1)):
                        dx = min(x1, j + 1) - max(x0, j)
                        if dx > 0:
                            total += dx * dy * src[(i * width + j) * ch + c]
                out.append(int(total / ((x1 - x0) * (y1 - y0)) + Fraction(1, 2)))
    return bytes(out)


def test_box_filter_known_averages() -> None:
    # 2x2 -> 1x1: (0 + 255 + 255 + 255) / 4 = 191.25
    assert image.box_downscale(bytes([0, 255, 255, 255]), 2, 2, 1, 1, 1) == bytes([191])
    # 3 -> 2 wide: [0, 1.5) holds 0 and half of 90 -> 30; [1.5, 3) half of 90 and 180 -> 150
    assert image.box_downscale(bytes([0, 90, 180]), 3, 1, 1, 2, 1) == bytes([30, 150])
    # a tie rounds half up: (0 + 1) / 2 = 0.5 -> 1
    assert image.box_downscale(bytes([0, 1]), 2, 1, 1, 1, 1) == bytes([1])
    # channels stay apart: RGB red and blue pixels average to purple
    assert image.box_downscale(bytes([255, 0, 0, 0, 0, 255]), 2, 1, 3, 1, 1) == bytes([128, 0, 128])
    # 4x4 -> 2x2 of quadrants
    quads = bytes([10, 10, 200, 200, 10, 10, 200, 200, 50, 50, 0, 0, 50, 50, 0, 100])
    assert image.box_downscale(quads, 4, 4, 1, 2, 2) == bytes([10, 200, 50, 25])


@pytest.mark.parametrize("case", [
    (5, 3, 2, 1, 4), (7, 5, 3, 2, 3), (12, 8, 5, 3, 3), (16, 9, 6, 4, 4), (40, 30, 7, 29, 3),
    (13, 11, 1, 1, 2), (20, 3, 20, 2, 3), (30, 20, 12, 20, 4),
    (131, 4, 67, 3, 1),  # 67 phases with no common factor: the transposed path
])
def test_box_filter_matches_exact_area_average(case: tuple[int, int, int, int, int]) -> None:
    width, height, new_w, new_h, ch = case
    src = noise(width * height * ch, seed=width * height)
    assert image.box_downscale(src, width, height, ch, new_w, new_h) == \
        exact_box(src, width, height, ch, new_w, new_h)


def test_box_filter_never_upscales_and_checks_its_buffer() -> None:
    with pytest.raises(ValueError, match="only shrinks"):
        image.box_downscale(b"\0" * 12, 2, 2, 3, 3, 2)
    with pytest.raises(ValueError, match="need 12"):
        image.box_downscale(b"\0" * 13, 2, 2, 3, 1, 1)
    assert image.box_downscale(b"abcdef", 2, 1, 3, 2, 1) == b"abcdef"


@pytest.mark.parametrize("size, limit, expected", [
    ((1920, 1080), (768, 768), (768, 432)),
    ((1920, 1080), (1568, 1568), (1568, 882)),
    ((1080, 1920), (768, 768), (432, 768)),
    ((640, 480), (768, 768), (640, 480)),       # never up
    ((640, 480), (320, 100), (133, 100)),
    ((1, 10000), (768, 768), (1, 768)),
    ((10000, 1), (768, 768), (768, 1)),
])
def test_fit_size_keeps_the_aspect_ratio_within_the_limits(size, limit, expected) -> None:
    assert image.fit_size(*size, *limit) == expected


# ---------------------------------------------------------------------- headers
def pygame_file(kind: str, size: tuple[int, int] = (33, 17)) -> bytes:
    surface = pygame.Surface(size)
    surface.fill((200, 30, 90))
    pygame.draw.circle(surface, (10, 250, 10), (size[0] // 2, size[1] // 2), min(size) // 3)
    buffer = io.BytesIO()
    pygame.image.save(surface, buffer, f"x.{kind}")
    return buffer.getvalue()


def test_headers_of_png_and_jpeg_from_libpng_and_libjpeg() -> None:
    assert image.image_info(pygame_file("png")) == ("image/png", 33, 17)
    assert image.image_info(pygame_file("jpg")) == ("image/jpeg", 33, 17)
    assert image.image_info(image.encode_png(b"\0" * 6, 2, 1)) == ("image/png", 2, 1)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d[:-20], "truncated PNG"),
    (lambda d: d[:20], "truncated PNG"),
    (lambda d: d[:20] + b"\xff" + d[21:], "IHDR checksum"),
    (lambda d: b"GIF89a" + d[6:], "not a PNG or JPEG"),
    (lambda d: b"", "not a PNG or JPEG"),
])
def test_broken_png_headers_are_refused_with_the_reason(mutate, message) -> None:
    with pytest.raises(ImageFormatError, match=message):
        image.image_info(mutate(pygame_file("png")))


def test_broken_jpegs_are_refused_with_the_reason() -> None:
    jpeg = pygame_file("jpg")
    with pytest.raises(ImageFormatError, match="truncated JPEG"):
        image.image_info(jpeg[:len(jpeg) // 2])
    with pytest.raises(ImageFormatError, match="no frame header"):
        image.image_info(b"\xff\xd8\xff\xda\x00\x02" + b"\x00" * 40 + b"\xff\xd9")


def test_the_kit_decodes_libpng_files_with_every_filter() -> None:
    src = pygame_file("png", (61, 40))
    pixels, width, height, channels = decode_png(src, max_pixels=10**6)
    surface = pygame.image.load(io.BytesIO(src), "x.png")
    mode = {3: "RGB", 4: "RGBA"}[channels]
    assert (width, height) == (61, 40)
    assert pixels == pygame.image.tobytes(surface, mode)


# ---------------------------------------------------------------------- capture results
def test_a_surface_is_smoothscaled_to_fit_and_read_back() -> None:
    surface = pygame.Surface((1920, 1080))
    surface.fill((0, 0, 255))
    surface.fill((255, 0, 0), pygame.Rect(0, 0, 960, 1080))
    shot = image.from_surface(surface, max_width=768, max_height=768)
    assert (shot.mime, shot.width, shot.height) == ("image/png", 768, 432)
    w, h, _colour, _depth, pixels = read_png(shot.data)
    assert (w, h) == (768, 432)
    left, right = pixels[:3], pixels[-3:]  # smoothscale is close to, not exactly, a box filter
    assert left[0] > 240 and left[2] < 15 and right[2] > 240 and right[0] < 15


def test_an_8_bit_surface_is_converted_before_scaling() -> None:
    surface = pygame.Surface((100, 50), 0, 8)
    surface.fill((255, 255, 255))
    shot = image.from_surface(surface, max_width=10, max_height=10)
    assert (shot.width, shot.height) == (10, 5)


def test_raw_pixels_are_box_filtered_to_fit() -> None:
    pixels = bytes([255, 255, 255]) * (40 * 20)
    shot = image.from_pixels(pixels, 40, 20, "RGB", max_width=10, max_height=10)
    assert (shot.width, shot.height) == (10, 5)
    assert read_png(shot.data)[4] == bytes([255]) * (10 * 5 * 3)


def test_ready_images_pass_through_or_are_scaled() -> None:
    png = pygame_file("png", (300, 200))
    assert image.from_encoded(png, max_width=768, max_height=768).data == png
    smaller = image.from_encoded(png, max_width=150, max_height=150)
    assert (smaller.width, smaller.height) == (150, 100)
    assert image.image_info(smaller.data) == ("image/png", 150, 100)


@pytest.mark.parametrize("source, message", [
    (Pixels(b"\0" * 10, 2, 2, "RGB"), "need 12 bytes, the buffer has 10"),
    (Pixels(b"", 0, 5, "RGB"), "at least 1x1"),
    (Pixels(b"", 100_000, 100_000, "RGB"), "larger than the kit accepts"),
    (Pixels(b"\0" * 4, 2, 2, "CMYK"), "unknown pixel mode"),
    (b"\0" * 100, "not a PNG or JPEG"),
    ("a string", "returned a str"),
    (12, "returned a int"),
    (Image(b"not really", "image/png", 1, 1), "not a PNG or JPEG"),
])
def test_hostile_capture_results_are_refused_with_the_reason(source, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        image.to_image(source, 768, 768)


def test_an_image_whose_claims_do_not_match_its_bytes_is_refused() -> None:
    png = image.encode_png(b"\0" * 12, 2, 2)
    with pytest.raises(ValueError, match="says image/png 900x900, but its bytes are image/png 2x2"):
        image.to_image(Image(png, "image/png", 900, 900), 768, 768)


def test_a_png_claiming_a_huge_size_is_refused_before_it_is_inflated() -> None:
    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", 13) + b"IHDR" + header + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    end = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    bomb = b"\x89PNG\r\n\x1a\n" + chunk + end
    with pytest.raises(ValueError, match="larger than the kit accepts"):
        image.to_image(bomb, 768, 768)


def test_importing_the_kit_does_not_import_pygame() -> None:
    import subprocess
    import sys
    code = ("import sys, game_bridge_mcp.game, game_bridge_mcp.game.image; "
            "assert 'pygame' not in sys.modules, 'pygame imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
