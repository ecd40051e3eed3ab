"""The screenshot tool: ``get_screenshot``, the game's screen as an image (core/screenshot.py
fetches, checks, scales and saves it; the image rides under ``IMAGE_KEY``)."""

from __future__ import annotations

from typing import Any

from ..host import Host
from .shapes import BOOL, INT, STR, answer, from_game
from .unit import PORT, ToolDef, schema

SCREENSHOT_ANSWER = answer("get_screenshot's answer (the picture follows as an image block)", {
    "port": INT, "frame": from_game("The frame the picture shows"), "width": INT, "height": INT, "format": STR,
    "bytes": INT, "changed": BOOL, "file": STR, "window": from_game("The game's window"),
    "scale": {"type": "number", "description": "Picture pixels per window pixel, when the picture is scaled"},
}, ("port", "format"))


def get_screenshot(bridge: Host, *, port: Any = None, max_width: Any = None, max_height: Any = None,
                   always: bool | None = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    return bridge.guarded(target, lambda: bridge.screenshots.take(bridge.client(target), max_width=max_width,
                                                                  max_height=max_height, always=always))


GET_SCREENSHOT = ToolDef(
    "get_screenshot", "See the game's screen",
    "A picture of the game's screen, drawn after you asked, as an image, with {port, frame, width, height, "
    "format, bytes, changed, file, window, scale}: changed is false when it is byte-identical to this port's previous "
    "screenshot (nothing to look at again: then no image is sent unless always is true); file is a saved copy; window "
    "is the game's size in the pixels its mouse takes, and scale (picture pixels per window pixel) is there when the "
    "picture is smaller: pass it to the mouse of a wrapped game (pygame, browser) to click where the picture shows. "
    "At most 768x768 by default (about 800 "
    "image tokens; width x height / 750); ask smaller to spend less, up to 1568. Needs a game that serves "
    "the screenshot feature; a ui.text in get_state {summary: true} is cheaper when the game has one.",
    schema({"port": PORT,
             "maxWidth": {"type": "integer", "minimum": 1, "maximum": 1568, "description": "Widest image wanted, in pixels (default 768)."},
             "maxHeight": {"type": "integer", "minimum": 1, "maximum": 1568, "description": "Tallest image wanted, in pixels (default 768)."},
             "always": {"type": "boolean", "description": "Send the image even when it is byte-identical to the last one (default false)."}}),
    get_screenshot, SCREENSHOT_ANSWER, read_only=True)
