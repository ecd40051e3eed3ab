"""A hash of a picture's pixels, or of a region of them, for ``/screenshot?hash=1``: what a
wait on the picture compares frame by frame, far cheaper than encoding an image (no
scaling, no compression; a Surface's region is copied alone)."""

from __future__ import annotations

import hashlib
from typing import Any

from . import Image, Pixels, freeze, is_surface, MAX_SIDE
from .scale import MODES

#: ``(x, y, width, height)`` in the picture's pixels.
Region = tuple[int, int, int, int]


def _digest(data: bytes | bytearray | memoryview, width: int, height: int) -> str:
    hasher = hashlib.blake2b(digest_size=12)
    hasher.update(f"{width}x{height}:".encode())
    hasher.update(data)
    return hasher.hexdigest()


def check_region(region: Region | None, width: int, height: int) -> None:
    """ValueError when ``region`` is not inside a ``width`` x ``height`` picture."""
    if region is None:
        return
    x, y, w, h = region
    if w < 1 or h < 1 or x < 0 or y < 0 or x + w > width or y + h > height:
        raise ValueError(f"the region {w}x{h} at ({x}, {y}) is not inside the {width}x{height} picture: "
                         f"x + width must be at most {width} and y + height at most {height}")


def picture_hash(source: Any, region: Region | None = None) -> str:
    """The hash of what a capture returned (a pygame Surface, Pixels, or PNG/JPEG bytes or
    an Image), whole or in ``region``. ValueError for a region outside the picture, or a
    region of an encoded image (which would have to be decoded: return pixels instead)."""
    if is_surface(source):
        width, height = source.get_size()
        check_region(region, width, height)
        if region is not None:
            source = source.subsurface(region)
        frozen = freeze(source, MAX_SIDE, MAX_SIDE)
    else:
        frozen = freeze(source, MAX_SIDE, MAX_SIDE)
        if isinstance(frozen, Image):
            check_region(region, frozen.width, frozen.height)
            if region is not None:
                raise ValueError("the game's capture returns encoded images (PNG or JPEG), so only the whole "
                                 "picture is hashed: return a Surface or Pixels to hash a region")
            return _digest(frozen.data, frozen.width, frozen.height)
        check_region(region, frozen.width, frozen.height)
        if region is not None:
            frozen = crop(frozen, region)
    assert isinstance(frozen, Pixels)
    return _digest(frozen.data, frozen.width, frozen.height)


def crop(pixels: Pixels, region: Region) -> Pixels:
    """The rows of ``region`` out of ``pixels`` (already checked to be inside)."""
    x, y, w, h = region
    channels = MODES[pixels.mode]
    stride, start, length = pixels.width * channels, x * channels, w * channels
    view = memoryview(pixels.data)
    rows = b"".join(view[(y + row) * stride + start:(y + row) * stride + start + length] for row in range(h))
    return Pixels(rows, w, h, pixels.mode)
