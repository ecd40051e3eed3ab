"""The clock tool: ``advance``, stepping a paused game (core/clock.py runs the steps)."""

from __future__ import annotations

from typing import Any

from .. import clock
from ..host import Host
from ..screenshot import IMAGE_KEY
from ...contract import MAX_STEP_FRAMES, MOUSE_ACTIONS
from .shapes import BOOL, INT, INT_OR_NULL, STR, answer, from_game, rooted, with_digest
from .unit import PORT, ToolDef, schema

#: One of advance's timed inputs (core/inputs.py checks them whole, with messages).
TIMED_INPUT = {"type": "object", "required": ["at"], "additionalProperties": False, "properties": {
    "at": {"type": "integer", "minimum": 0, "maximum": MAX_STEP_FRAMES - 1, "description": "The frame of the advance before which it is delivered (0: before the first)."},
    "key": {"type": "string", "description": "A key name, as the game's key command takes it (right, space, a)."},
    "action": {"type": "string", "enum": ["press", "down", "up"], "description": "For key: press (default), down or up."},
    "frames": {"type": "integer", "minimum": 1, "maximum": MAX_STEP_FRAMES, "description": "For a key press: frames held (default 1)."},
    "mouse": {"type": "object", "required": ["x", "y"], "additionalProperties": False, "properties": {
        "x": {"type": "integer", "minimum": 0}, "y": {"type": "integer", "minimum": 0},
        "button": {"type": "integer", "enum": [1, 2, 3]},
        "action": {"type": "string", "enum": list(MOUSE_ACTIONS)},
        "dx": {"type": "integer"}, "dy": {"type": "integer"},
        "scale": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}}},
    "text": {"type": "string", "minLength": 1, "maxLength": 1000}}}

ADVANCE_ANSWER = with_digest(answer("advance's answer", {
    "port": INT, "tool": {"const": "advance"}, "matched": BOOL, "framesAdvanced": INT,
    "path": STR, "event": STR, "value": from_game("The value the condition held with"),
    "screenHash": STR, "lastChangeFrame": INT,
    "lastValue": from_game("The value after the last frame"),
    "inputs": {"type": "array", "description": "With inputs: each one's at, tool, commandId and outcome "
               "(ok with result or error; done: false while still in progress)",
               "items": {"type": "object", "properties": {"at": INT, "tool": STR, "commandId": INT_OR_NULL,
                                                          "ok": BOOL, "done": BOOL, "error": STR,
                                                          "result": from_game("What the input command returned")}}},
    "screenshot": {"type": "object", "description": "With screenshot: get_screenshot's fields for the picture after"},
}, ("port", "tool", "matched", "framesAdvanced")))


def advance(bridge: Host, *, port: Any = None, frames: Any = None, until: Any = None,
            max_frames: Any = None, inputs: Any = None, screenshot: bool | None = None) -> dict[str, Any]:
    """Step a paused game: see core/clock.py; with ``inputs``, input delivered at given
    frames (core/inputs.py); with ``screenshot``, the picture after, and whether it changed."""
    target = bridge.resolve_port(port)
    inst = bridge.instance(target)
    with inst.command_lock:  # every frame on the connection the client keeps to the game
        run = clock.Advance(inst.client, inst.shown, timeout_ms=bridge.config.timeout_ms,
                            behind=inst.pending.newest_id)
        result: dict[str, Any] = bridge.guarded(target, lambda: run.run(frames, until, max_frames, inputs))
        if len(inst.pending) and run.last_state is not None:  # the commands it delivered
            result.update(inst.pending.settle(run.last_state, inst.client.generation))
    if screenshot:  # get_screenshot's, with its defaults
        shot = bridge.guarded(target, lambda: bridge.screenshots.take(bridge.client(target), max_width=None,
                                                                      max_height=None, always=None))
        image = shot.pop(IMAGE_KEY, None)
        result["screenshot"] = {k: v for k, v in shot.items() if k != "port"}
        if image is not None:
            result[IMAGE_KEY] = image
    return result


ADVANCE = ToolDef(
    "advance", "Step a paused game's clock",
    "For a game with the clock extension: step its simulation while it stays paused, 'frames' frames, "
    "or frame by frame until 'until' holds (the shapes of wait_for: {path, equals}, {path, changes: true}, "
    "{event} for an event that appears meanwhile, {screen: 'changes'} or {screen: 'stable', frames} for the "
    "picture, optionally in a region), at most maxFrames. Stops at exactly the first frame "
    "where the condition holds and returns the digest then, with matched and framesAdvanced, and "
    "delivered: the commands answered pending that it delivered. With inputs, the frames run with keys, "
    "the pointer and text delivered at given frames (hold right, jump at frame 10: one call, the same every time). "
    "A running game is paused first. Launch with paused: true for the same result from the same seed and moves.",
    schema({"port": PORT,
             "frames": {"type": "integer", "minimum": 1, "maximum": MAX_STEP_FRAMES, "description": "How many simulation frames to run (default 1; with until, the most to run)."},
             "until": {"type": "object", "description": "Stop at the first frame where this holds: {path, equals}, {path, changes: true}, {event}, or on the picture {screen: 'changes'} / {screen: 'stable', frames: N} with an optional region {x, y, width, height} (window pixels). Checked on the current state first."},
             "maxFrames": {"type": "integer", "minimum": 1, "maximum": MAX_STEP_FRAMES, "description": "With until: the most frames to run (default 600); on reaching it, matched is false with the last value."},
             "inputs": {"type": "array", "maxItems": 256, "items": TIMED_INPUT, "description": "With frames, for a game with clock and input: input delivered at given frames of the advance, e.g. [{at: 0, key: right, action: down}, {at: 10, key: space}, {at: 30, key: right, action: up}, {at: 12, mouse: {x, y}}]; at counts frames from the start (0: before the first) and is less than frames. The answer lists each input's outcome under inputs."},
             "screenshot": {"type": "boolean", "description": "Also take a screenshot after the frames: its fields under screenshot (changed: whether the picture differs from the last one) and the picture when it changed."}}),
    advance, rooted(ADVANCE_ANSWER), destructive=False)
