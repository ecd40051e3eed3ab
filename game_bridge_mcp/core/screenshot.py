"""``get_screenshot``: the game's screen as an image the agent can look at, whether it changed
since the last one, a saved copy, and a down-scale when a game ignored the limits."""

from __future__ import annotations

import hashlib
import importlib
import io
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..contract import SCREENSHOT_FEATURE
from ..errors import BridgeUsageError
from ..paths import SCREENSHOT_KEEP, KeepRule, prune_files, screenshot_dir
from ..wire.client import GameClient
from ..wire.images import MAX_PIXELS as PIXEL_CAP, SCREENSHOT_MAX_BYTES, ImageInfo, inspect_image

log = logging.getLogger(__name__)

#: The default and largest maxWidth/maxHeight (1568 is the most a model is shown unscaled).
DEFAULT_SIDE = 768
MAX_SIDE = 1568
#: What the screenshot directory keeps: the newest files, at most this many, bytes, and days.
KEEP_FILES = SCREENSHOT_KEEP.max_files
KEEP_BYTES = SCREENSHOT_KEEP.max_bytes
KEEP_AGE_S = SCREENSHOT_KEEP.max_age_s
#: Where a tool result carries its image (never serialised as JSON).
IMAGE_KEY = "_image"
_PREFIX = "screenshot-"
_PARTIAL = ".partial-"


@dataclass(frozen=True, repr=False)
class ImagePayload:
    """An image for the MCP adapter: the bytes and their media type."""

    data: bytes
    mime: str

    def __str__(self) -> str:  # what a JSON dump of a result shows, should one reach one
        return f"<{self.mime} image, {len(self.data)} bytes>"

    __repr__ = __str__


def fit(width: int, height: int, max_width: int, max_height: int) -> tuple[int, int]:
    """Scale down (never up) to fit, keeping the aspect ratio."""
    scale = min(1.0, max_width / width, max_height / height)
    return max(1, int(width * scale)), max(1, int(height * scale))


#: One image is decoded at a time: with the pixel cap (``wire.images.MAX_PIXELS``, checked
#: from the header before this runs) that bounds what scaling takes, however many
#: screenshots are asked for at once.
_DECODING = threading.Lock()


def scale_down(body: bytes, info: ImageInfo, max_width: int, max_height: int) -> tuple[bytes, ImageInfo] | None:
    """The image scaled to fit with Pillow, in its own format; None without Pillow (or
    when Pillow cannot read what the game sent). ``info`` is what the header said, already
    within the pixel cap; a JPEG is decoded at a reduced scale when that still fits."""
    try:
        pil: Any = importlib.import_module("PIL.Image")
    except ImportError:
        return None
    if info.width * info.height > PIXEL_CAP:  # inspect_image refuses these; never decode one
        return None
    target = fit(info.width, info.height, max_width, max_height)
    try:
        with _DECODING, pil.open(io.BytesIO(body)) as image:
            if image.size != (info.width, info.height):
                raise ValueError(f"Pillow reads {image.size[0]}x{image.size[1]}, the header said "
                                 f"{info.width}x{info.height}")
            image.draft("RGB", target)  # JPEG: decode at a reduced size when it can
            mode = "RGBA" if info.format == "png" and ("A" in image.mode or "transparency" in image.info) else "RGB"
            scaled = image.convert(mode).resize(target, pil.Resampling.LANCZOS)
        out = io.BytesIO()
        if info.format == "png":
            scaled.save(out, format="PNG", compress_level=3)
        else:
            scaled.save(out, format="JPEG", quality=85)
        data = out.getvalue()
        return data, inspect_image(data, info.mime)
    except Exception as exc:  # noqa: BLE001 - any failure of Pillow's on a game's image: returned unscaled
        log.info("could not scale a screenshot with Pillow: %s: %s", type(exc).__name__, exc)
        return None


def check_side(name: str, value: Any) -> int:
    if value is None:
        return DEFAULT_SIDE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise BridgeUsageError(f"get_screenshot: {name} must be a whole number of pixels, not {value!r}.")
    side = int(value)
    if not 1 <= side <= MAX_SIDE:
        raise BridgeUsageError(f"get_screenshot: {name} must be between 1 and {MAX_SIDE} pixels, not {side} "
                               f"(the default is {DEFAULT_SIDE}).")
    return side


class Screenshots:
    """Takes screenshots for the Bridge; owns the last image digest per port and the saved copies."""

    def __init__(self, *, environ: Mapping[str, str] | None = None, directory: Path | None = None,
                 max_bytes: int = SCREENSHOT_MAX_BYTES, registry_dir: Path | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._registry_dir = registry_dir  # the home is its parent
        self._directory = directory
        self._directory_found = directory is not None
        self.max_bytes = max_bytes
        self._last: dict[int, tuple[int, bytes]] = {}  # port -> (client generation, sha256 of the image)
        self._lock = threading.Lock()
        self._counter = 0

    def directory(self) -> Path | None:
        """The private directory for copies (made on first use); None when there is none."""
        with self._lock:
            if not self._directory_found:
                self._directory = screenshot_dir(self._environ, self._registry_dir)
                self._directory_found = True
            return self._directory

    def take(self, client: GameClient, *, max_width: Any = None, max_height: Any = None,
             always: bool | None = None) -> dict[str, Any]:
        """The game's screen now: the answer's fields, and the image under IMAGE_KEY,
        unless it is byte-identical to the last one (``changed: false``) and not
        ``always``: then only the fields, which say so (nothing new to look at)."""
        width_limit, height_limit = check_side("maxWidth", max_width), check_side("maxHeight", max_height)
        port = client.port
        client.health()  # also notices a restart (a new generation) before comparing images
        if not client.has_feature(SCREENSHOT_FEATURE):  # the features that /health just advertised
            raise BridgeUsageError(
                f"The game on port {port} does not serve screenshots: its /health lists no 'screenshot' "
                "feature, so the bridge does not ask for one. To add it, serve GET /screenshot?maxWidth=&maxHeight= "
                "(an image/png or image/jpeg of the frame drawn after the request, scaled to fit, with an "
                "X-Game-Frame header) and list \"screenshot\" in /health features; with the Python kit, "
                "register a capture: GameBridge(..., screenshot=capture). Meanwhile get_state {summary: true} "
                "shows the state, and ui.text if the game draws one.", port=port, feature=SCREENSHOT_FEATURE)
        shot = client.screenshot(width_limit, height_limit, max_bytes=self.max_bytes)
        body, info = shot.body, shot.info
        notes: list[str] = []
        if info.width > width_limit or info.height > height_limit:
            sent = f"The game sent {info.width}x{info.height}, larger than the {width_limit}x{height_limit} asked for"
            scaled = scale_down(body, info, width_limit, height_limit)
            if scaled is not None:
                body, info = scaled
                notes.append(f"{sent}; the bridge scaled it down.")
            else:
                notes.append(f"{sent}; it is returned as sent. With Pillow installed (pip install "
                             "'game-bridge-mcp[images]') the bridge scales such images down.")
        if shot.frame is None:
            notes.append("The game sent no X-Game-Frame header, so which frame this shows is not known.")
        digest = hashlib.sha256(body).digest()
        with self._lock:
            changed = self._last.get(port) != (client.generation, digest)
            self._last[port] = (client.generation, digest)
        saved = self.save(port, shot.frame, body, "png" if info.format == "png" else "jpg")
        if saved is None:
            notes.append("No copy was saved: no private screenshot directory could be used "
                         "(set GAME_BRIDGE_SCREENSHOTS to one).")
        result: dict[str, Any] = {"port": port, "frame": shot.frame, "width": info.width, "height": info.height,
                                  "format": info.format, "bytes": len(body), "changed": changed,
                                  "file": str(saved) if saved is not None else None}
        if shot.window is not None:
            result["window"] = {"width": shot.window[0], "height": shot.window[1]}
            if shot.window[0] > 0 and info.width != shot.window[0]:
                # picture pixels per window pixel: a wrapper's mouse takes the picture's pixels with it
                result["scale"] = round(info.width / shot.window[0], 4)
        if not changed and not always:
            notes.append("The picture is byte-identical to this port's previous screenshot (changed: false), so no "
                         "image was sent: nothing new to look at. always: true sends it anyway; file has it.")
        if notes:
            result["note"] = " ".join(notes)
        if changed or always:
            result[IMAGE_KEY] = ImagePayload(body, info.mime)
        return result

    def forget(self, port: int) -> None:
        with self._lock:
            self._last.pop(port, None)

    # ------------------------------------------------------------------ the saved copies
    def save(self, port: int, frame: int | None, body: bytes, ext: str) -> Path | None:
        """Write ``body`` under a temporary name and rename it, so no half-written file is
        ever there under a screenshot's name; then prune. None when it cannot be saved."""
        directory = self.directory()
        if directory is None:
            return None
        with self._lock:
            self._counter += 1
            counter = self._counter
        stamp = int(time.time() * 1000)
        final = directory / f"{_PREFIX}{port}-{stamp}-{counter}-f{frame if frame is not None else 'x'}.{ext}"
        tmp_name: str | None = None
        try:
            fd, tmp_name = tempfile.mkstemp(prefix=_PARTIAL, suffix="." + ext, dir=directory)
            try:
                os.fchmod(fd, 0o600)
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp_name, final)
            tmp_name = None
        except OSError as exc:
            log.warning("could not save a screenshot in %s: %s", directory, exc)
            return None
        finally:
            if tmp_name is not None:
                try:
                    os.unlink(tmp_name)
                except OSError:
                    pass
        prune(directory, keep=final)
        return final


def prune(directory: Path, *, keep: Path | None = None, max_files: int = KEEP_FILES,
          max_bytes: int = KEEP_BYTES, max_age_s: float = KEEP_AGE_S) -> None:
    """Delete screenshot copies older than ``max_age_s``, then the oldest past ``max_files``
    or ``max_bytes`` in total (never ``keep``), and partial files left by a crash (an hour
    old): the one pruning rule, :func:`..paths.prune_files`. Never raises; touches only
    files it names itself, never links."""
    rule = KeepRule(max_files=max_files, max_bytes=max_bytes, max_age_s=max_age_s)
    prune_files(directory, rule, keep=() if keep is None else (keep,),
                match=lambda name: name.startswith(_PREFIX) and name.endswith((".png", ".jpg")))
    prune_files(directory, KeepRule(max_files=1_000_000, max_bytes=1 << 62, max_age_s=3600),
                match=lambda name: name.startswith(_PARTIAL))


__all__ = ["DEFAULT_SIDE", "IMAGE_KEY", "ImagePayload", "KEEP_AGE_S", "KEEP_BYTES", "KEEP_FILES", "MAX_SIDE",
           "Screenshots", "check_side", "fit", "prune", "scale_down"]
