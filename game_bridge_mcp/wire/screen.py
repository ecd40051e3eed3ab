"""``GET /screenshot?hash=1``: a hash of the game's picture (or of a region of it, in window
pixels) instead of the image, which is what a wait on the picture compares frame by frame
(docs/contract.md, ``screenshot``). A game that answers it with an image anyway (it does not
know ``hash``) is hashed here from the image's bytes: the whole picture only."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..contract import FRAME_HEADER, REGION_KEYS, SCREEN_HASH_PARAM
from ..errors import BridgeUsageError, NotAGameSurface, ScreenshotUnavailable
from ..jsonio import decode_json
from .client import GameClient
from .images import SCREENSHOT_MAX_BYTES, game_reason, parse_frame

#: The largest answer that is a hash (JSON of a few fields).
MAX_HASH_BYTES = 4096


@dataclass(frozen=True)
class Region:
    """A part of the picture, in window pixels."""

    x: int
    y: int
    width: int
    height: int

    def query(self) -> str:
        return "".join(f"&{key}={getattr(self, key)}" for key in REGION_KEYS)

    @classmethod
    def parse(cls, spec: Any, what: str) -> "Region":
        if not isinstance(spec, dict) or set(spec) != set(REGION_KEYS):
            raise BridgeUsageError(f"{what}: region is {{x, y, width, height}} in the game window's pixels, "
                                   f"got {str(spec)[:80]}.")
        values = {}
        for key in REGION_KEYS:
            value = spec[key]
            low = 1 if key in ("width", "height") else 0
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 65535:
                raise BridgeUsageError(f"{what}: region's {key} must be a whole number from {low} to 65535, "
                                       f"not {str(value)[:40]}.")
            values[key] = value
        return cls(**values)

    def describe(self) -> str:
        return f"the region {self.width}x{self.height} at ({self.x}, {self.y})"


@dataclass(frozen=True)
class ScreenHash:
    """What the picture was: its hash, the frame it shows (None: not said), and whether the
    game hashed its pixels itself (False: the bridge hashed an image it sent)."""

    hash: str
    frame: int | None
    by_game: bool


def screen_hash(client: GameClient, region: Region | None, *, timeout_ms: int | None = None) -> ScreenHash:
    """The picture's hash now (the frame drawn after the request). ScreenshotUnavailable
    when the game cannot render; BridgeUsageError when it refuses the region (its reason)
    or cannot hash one; NotAGameSurface for an answer that is neither a hash nor an image."""
    path = f"/screenshot?{SCREEN_HASH_PARAM}=1" + (region.query() if region is not None else "")
    response = client.exchange(path, timeout_ms=timeout_ms, max_bytes=SCREENSHOT_MAX_BYTES)
    reason = game_reason(response.body) if response.status != 200 else None
    if response.status == 503:
        if reason is not None:
            raise ScreenshotUnavailable(client.port, reason)
        raise NotAGameSurface(client.port, "answered 503 without {\"ok\": false, \"error\": \"...\"} saying why",
                              path="/screenshot")
    if response.status == 400 and reason is not None:
        raise BridgeUsageError(f"The game on port {client.port} refused to hash "
                               f"{region.describe() if region else 'its picture'}: {reason}", port=client.port)
    if response.status != 200:
        raise NotAGameSurface(client.port, f"returned HTTP {response.status} to {path}", path="/screenshot")
    frame = parse_frame(response.headers.get(FRAME_HEADER.lower()))
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json" and len(response.body) <= MAX_HASH_BYTES:
        try:
            doc = decode_json(response.body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("hash"), str) and 0 < len(doc["hash"]) <= 128:
            shown = doc.get("frame")
            return ScreenHash(doc["hash"], shown if isinstance(shown, int) and not isinstance(shown, bool) else frame,
                              True)
        raise NotAGameSurface(client.port, "answered /screenshot?hash=1 with JSON that has no \"hash\" text",
                              path="/screenshot")
    if kind not in ("image/png", "image/jpeg"):
        raise NotAGameSurface(client.port, f"answered /screenshot?hash=1 with {kind or 'no type'}, neither a hash "
                              "nor an image", path="/screenshot")
    if region is not None:
        raise BridgeUsageError(
            f"The game on port {client.port} does not hash its picture (it answered /screenshot?hash=1 with an "
            "image), so a region of it cannot be watched: watch the whole picture (leave region out), or serve "
            "the hash (docs/contract.md, screenshot).", port=client.port)
    return ScreenHash(hashlib.blake2b(response.body, digest_size=12).hexdigest(), frame, False)
