"""Images for ``/screenshot``: a pygame Surface, raw :class:`Pixels` or ready PNG/JPEG bytes,
turned into an image that fits; :func:`freeze` on the game thread, :func:`encode` off it."""

from __future__ import annotations

import dataclasses
import io
import sys
import threading
from typing import Any, Union

from .png import (DEFAULT_LEVEL, JPEG_SOI, PNG_SIGNATURE, ImageFormatError, decode_png,
                   encode_png, jpeg_size, png_size)
from .scale import MODES, box_downscale, fit_size

__all__ = ["Image", "ImageFormatError", "Pixels", "MAX_ENCODED_BYTES", "MAX_PIXELS", "MAX_SIDE",
           "box_downscale", "encode", "encode_png", "fit_size", "freeze", "from_encoded",
           "from_pixels", "from_surface", "image_info", "is_surface", "to_image"]

#: Largest side, pixel count and encoded size the kit accepts from a game's capture.
MAX_SIDE = 16384
MAX_PIXELS = 40_000_000
MAX_ENCODED_BYTES = 64 * 1024 * 1024
MIME_PNG = "image/png"
MIME_JPEG = "image/jpeg"


@dataclasses.dataclass(frozen=True)
class Image:
    """An encoded image ready to serve: ``data`` in ``mime`` (image/png or image/jpeg)."""

    data: bytes
    mime: str
    width: int
    height: int

    @property
    def format(self) -> str:
        """``"png"`` or ``"jpeg"``."""
        return "png" if self.mime == MIME_PNG else "jpeg"


@dataclasses.dataclass(frozen=True)
class Pixels:
    """Raw 8-bit pixels a capture function may return: ``width * height`` pixels of
    ``mode`` (``"RGB"``, ``"RGBA"``, ``"L"`` grey or ``"LA"``), rows top to bottom, no
    padding. The kit copies ``data`` on the game thread, so the game may reuse its buffer."""

    data: Union[bytes, bytearray, memoryview]
    width: int
    height: int
    mode: str = "RGB"

    def check(self) -> int:
        """Validate; return the channels per pixel. Raises ValueError saying what is wrong."""
        channels = MODES.get(self.mode)
        if channels is None:
            raise ValueError(f"unknown pixel mode {self.mode!r}: use one of {', '.join(MODES)}")
        _check_size(int(self.width), int(self.height))
        expected = self.width * self.height * channels
        size = memoryview(self.data).nbytes
        if size != expected:
            raise ValueError(f"{self.width}x{self.height} {self.mode} pixels need {expected} bytes, "
                             f"the buffer has {size}")
        return channels


#: What a capture function may return (None: nothing to show right now).
Source = Union[Image, Pixels, bytes, bytearray, memoryview, Any]


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1:
        raise ValueError(f"an image must be at least 1x1 pixels, not {width}x{height}")
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        raise ValueError(f"a {width}x{height} image is larger than the kit accepts "
                         f"(at most {MAX_SIDE} pixels a side and {MAX_PIXELS // 1_000_000} megapixels)")


def image_info(data: bytes) -> tuple[str, int, int]:
    """``(mime, width, height)`` of PNG or JPEG bytes. Raises ImageFormatError for
    anything else, or for a truncated or malformed file."""
    if data.startswith(PNG_SIGNATURE):
        return (MIME_PNG, *png_size(data))
    if data.startswith(JPEG_SOI):
        return (MIME_JPEG, *jpeg_size(data))
    raise ImageFormatError(f"not a PNG or JPEG image (it starts with {bytes(data[:8])!r})")


def is_surface(obj: Any) -> bool:
    """True for a pygame / pygame-ce Surface (without importing pygame)."""
    pygame = sys.modules.get("pygame")
    surface_type = getattr(pygame, "Surface", None) if pygame is not None else None
    return isinstance(surface_type, type) and isinstance(obj, surface_type)


def _pygame() -> Any:
    pygame = sys.modules.get("pygame")
    if pygame is None:  # pragma: no cover - a Surface exists only once pygame is imported
        raise RuntimeError("pygame is not imported")
    return pygame


def _surface_pixels(surface: Any, max_width: int, max_height: int) -> Pixels:
    """A scaled copy of ``surface`` as Pixels (smoothscale, then ``tobytes``)."""
    pygame = _pygame()
    width, height = surface.get_size()
    _check_size(width, height)
    alpha = bool(surface.get_flags() & getattr(pygame, "SRCALPHA", 0))
    target = fit_size(width, height, max_width, max_height)
    if target != (width, height):
        if surface.get_bitsize() not in (24, 32):  # smoothscale needs 24- or 32-bit pixels
            converted = pygame.Surface((width, height), pygame.SRCALPHA if alpha else 0, 32)
            converted.blit(surface, (0, 0))
            surface = converted
        surface = pygame.transform.smoothscale(surface, target)
    mode = "RGBA" if alpha else "RGB"
    to_bytes = getattr(pygame.image, "tobytes", None) or pygame.image.tostring
    return Pixels(to_bytes(surface, mode), target[0], target[1], mode)


def freeze(source: Source, max_width: int, max_height: int) -> Image | Pixels:
    """The cheap part of a capture, on the game's thread: copy whatever the game could
    change (scaling a Surface on the way, since that is fast in C). Raises ValueError or
    TypeError saying what the capture returned and what it should return."""
    if isinstance(source, Image):
        mime, width, height = image_info(source.data)
        if (mime, width, height) != (source.mime, source.width, source.height):
            raise ValueError(f"the capture returned an Image that says {source.mime} "
                             f"{source.width}x{source.height}, but its bytes are {mime} {width}x{height}")
        return source
    if isinstance(source, Pixels):
        source.check()
        return Pixels(bytes(source.data), int(source.width), int(source.height), source.mode)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if len(data) > MAX_ENCODED_BYTES:
            raise ValueError(f"the capture returned {len(data)} bytes, over the "
                             f"{MAX_ENCODED_BYTES // (1024 * 1024)} MiB the kit serves")
        mime, width, height = image_info(data)
        return Image(data, mime, width, height)
    if is_surface(source):
        return _surface_pixels(source, max_width, max_height)
    raise TypeError(f"the capture function returned a {type(source).__name__}; return a pygame "
                    "Surface, Pixels(data, width, height, mode), PNG or JPEG bytes, an Image, or "
                    "None when there is nothing to show")


def encode(frozen: Image | Pixels, max_width: int, max_height: int, *,
           level: int = DEFAULT_LEVEL) -> Image:
    """The expensive part, on any thread: scale to fit ``max_width`` x ``max_height``
    (never up) and encode."""
    if isinstance(frozen, Pixels):
        channels = frozen.check()
        width, height = frozen.width, frozen.height
        target = fit_size(width, height, max_width, max_height)
        data = bytes(frozen.data)
        if target != (width, height):
            data = box_downscale(data, width, height, channels, *target)
        return Image(encode_png(data, target[0], target[1], channels, level=level), MIME_PNG, *target)
    _check_size(frozen.width, frozen.height)
    if frozen.width <= max_width and frozen.height <= max_height:
        return frozen
    return _rescale_encoded(frozen, max_width, max_height, level=level)


#: One encoded image is decoded at a time: with MAX_PIXELS (checked from its header first,
#: in ``encode``) that bounds the memory of screenshots asked for at once.
_DECODING = threading.Lock()


def _rescale_encoded(image: Image, max_width: int, max_height: int, *, level: int) -> Image:
    with _DECODING:
        return _decode_and_scale(image, max_width, max_height, level=level)


def _decode_and_scale(image: Image, max_width: int, max_height: int, *, level: int) -> Image:
    pygame = sys.modules.get("pygame")
    if pygame is not None and hasattr(pygame, "image"):
        surface = pygame.image.load(io.BytesIO(image.data), f"shot.{image.format}")
        return encode(_surface_pixels(surface, max_width, max_height), max_width, max_height, level=level)
    if image.mime != MIME_PNG:
        raise ValueError(f"the capture returned a {image.width}x{image.height} JPEG, larger than the "
                         f"{max_width}x{max_height} asked for, and the kit cannot scale JPEG without "
                         "pygame: return a Surface, Pixels or a PNG instead, or a JPEG that fits")
    data, width, height, channels = decode_png(image.data, max_pixels=MAX_PIXELS)
    mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]
    return encode(Pixels(data, width, height, mode), max_width, max_height, level=level)


def to_image(source: Source, max_width: int = MAX_SIDE, max_height: int = MAX_SIDE, *,
             level: int = DEFAULT_LEVEL) -> Image:
    """Any supported capture result as an Image that fits (``freeze`` then ``encode``)."""
    return encode(freeze(source, max_width, max_height), max_width, max_height, level=level)


def from_pixels(data: bytes | bytearray | memoryview, width: int, height: int, mode: str = "RGB", *,
                max_width: int = MAX_SIDE, max_height: int = MAX_SIDE,
                level: int = DEFAULT_LEVEL) -> Image:
    """A PNG of raw pixels, box-filtered down to fit when larger than the limits."""
    return to_image(Pixels(data, width, height, mode), max_width, max_height, level=level)


def from_surface(surface: Any, *, max_width: int = MAX_SIDE, max_height: int = MAX_SIDE,
                 level: int = DEFAULT_LEVEL) -> Image:
    """A PNG of a pygame Surface (``smoothscale`` down to fit when larger)."""
    if not is_surface(surface):
        raise TypeError(f"from_surface needs a pygame Surface, not a {type(surface).__name__}")
    return to_image(surface, max_width, max_height, level=level)


def from_encoded(data: bytes, *, max_width: int = MAX_SIDE, max_height: int = MAX_SIDE) -> Image:
    """Ready PNG or JPEG bytes as an Image (validated; scaled when larger than asked)."""
    return to_image(bytes(data), max_width, max_height)
