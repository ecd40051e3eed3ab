"""``key``, ``mouse`` and ``text``, the ``input`` toolset of every wrapper: their schemas,
their checks and their timing in frames, once. A wrapper gives the devices that deliver
them to its engine, the frames that time them, and the words that describe them to an
agent in its engine's terms.

No ``from __future__ import annotations`` here: the commands' annotations name their
descriptions from the words a wrapper gives, so they are evaluated where the command is made."""

from dataclasses import dataclass
from typing import Annotated, Any, Callable, Protocol

from ...contract import INPUT
from ..kit.args import Arg
from ..kit.outcomes import Pending

#: The longest text one ``text`` command delivers.
MAX_TEXT = 1000
#: Most frames a ``press`` may hold a key.
MAX_PRESS_FRAMES = 10000
#: What the input toolset is, in ``/tools``.
TOOLSET = INPUT
#: ``mouse``'s ``wheel``: the largest scroll one command asks for, in pixels each way (a
#: wheel notch is about 100).
MAX_WHEEL = 10000
#: ``mouse``'s ``scale``: the smallest picture it maps from (a 1568-pixel picture of an
#: 8192-pixel window is 0.19).
MIN_SCALE = 0.01


class Devices(Protocol):
    """What delivers input to the engine (on the frames' thread, when the frames say)."""

    pointer: tuple[int, int] | None

    def key_code(self, name: str) -> Any:
        """The engine's code for a key name; ValueError naming the valid ones."""

    def key(self, code: Any, name: str, down: bool, /) -> None: ...

    def move(self, x: int, y: int, shown: tuple[int, int], /) -> None:
        """The pointer to ``(x, y)`` in the engine's coordinates (``shown`` in the agent's)."""

    def button(self, button: int, down: bool, /) -> None: ...

    def text(self, text: str, /) -> None: ...


class Pointer(Devices, Protocol):
    """Devices with a pointer: ``mouse`` moves, clicks and scrolls it."""

    def wheel(self, dx: int, dy: int) -> None:
        """Scroll by ``dx``, ``dy`` pixels (positive: right, down) where the pointer is."""


class Frames(Protocol):
    """What input needs of the wrapper: the pointer's area, when to deliver, the bridge."""

    def window_size(self) -> tuple[int, int] | None: ...

    def pointer_origin(self) -> tuple[int, int]: ...

    def soon(self, action: Callable[[], None]) -> None: ...

    def after_frames(self, frames: int, action: Callable[[], None]) -> None: ...

    def defer(self) -> Pending: ...


@dataclass(frozen=True)
class Words:
    """How the commands are described to an agent, in the engine's terms."""

    #: The ``key`` argument: which key names it takes.
    key_names: str
    #: What a frame is called here ("simulation frames", "animation frames").
    frames: str
    #: The commands' descriptions.
    key: str
    mouse: str
    text: str
    #: The area ``mouse`` points in ("window", "page"), for its x and y.
    area: str
    #: After "Pixels from the {area}'s left edge": more about x, or "".
    x_more: str
    #: ``mouse`` before there is anything to point at.
    no_area: str


def key_command(devices: Devices, timing: Frames, words: Words) -> Callable[..., Any]:
    def key(key: Annotated[str, Arg(words.key_names)],
            action: Annotated[str, Arg("press (down, held, up), down or up.",
                                       choices=("press", "down", "up"))] = "press",
            frames: Annotated[int, Arg(f"For press: how many {words.frames} the key is held.",
                                       minimum=1, maximum=MAX_PRESS_FRAMES)] = 1) -> Pending:
        code = devices.key_code(key)
        pending = timing.defer()
        if action == "press":
            timing.soon(lambda: devices.key(code, key, True))
            timing.after_frames(frames, lambda: devices.key(code, key, False))
            pending.complete_after_sim_frames(frames + 1, lambda: {"key": key, "action": action, "frames": frames})
        else:
            timing.soon(lambda: devices.key(code, key, action == "down"))
            pending.complete_after_sim_frames(1, lambda: {"key": key, "action": action})
        return pending

    key.__doc__ = words.key
    return key


def window_point(x: int, y: int, scale: float, size: tuple[int, int]) -> tuple[int, int]:
    """A point of a picture at ``scale`` (picture pixels per window pixel) as a window pixel:
    the one under the picture pixel's centre. ValueError when it is outside the picture."""
    width, height = size
    if scale == 1.0:
        if not (0 <= x < width and 0 <= y < height):
            raise ValueError(f"({x}, {y}) is outside the {width}x{height} window: x must be 0 to {width - 1} "
                             f"and y 0 to {height - 1}")
        return x, y
    shown_w, shown_h = max(1, int(width * scale)), max(1, int(height * scale))
    if not (0 <= x < shown_w and 0 <= y < shown_h):
        raise ValueError(f"({x}, {y}) is outside the {shown_w}x{shown_h} picture of the {width}x{height} window "
                         f"at scale {scale:g}: x must be 0 to {shown_w - 1} and y 0 to {shown_h - 1}")
    return min(width - 1, int((x + 0.5) / scale)), min(height - 1, int((y + 0.5) / scale))


def mouse_command(devices: Pointer, timing: Frames, words: Words) -> Callable[..., Any]:
    def mouse(x: Annotated[int, Arg(f"Pixels from the {words.area}'s left edge{words.x_more}, in the picture's pixels "
                                    "when scale is given.", minimum=0)],
              y: Annotated[int, Arg(f"Pixels from the {words.area}'s top edge.", minimum=0)],
              button: Annotated[int, Arg("1 left, 2 middle, 3 right.", choices=(1, 2, 3))] = 1,
              action: Annotated[str, Arg("click (down then up), down, up, move, or wheel (scroll by dx, dy there).",
                                         choices=("click", "down", "up", "move", "wheel"))] = "click",
              dx: Annotated[int, Arg("For wheel: pixels to scroll right (negative: left); a notch is about 100.",
                                     minimum=-MAX_WHEEL, maximum=MAX_WHEEL)] = 0,
              dy: Annotated[int, Arg("For wheel: pixels to scroll down (negative: up); a notch is about 100.",
                                     minimum=-MAX_WHEEL, maximum=MAX_WHEEL)] = 0,
              scale: Annotated[float, Arg("The scale of the screenshot x and y were read from (get_screenshot's "
                                          "scale: picture pixels per window pixel); default 1, the window's own "
                                          "pixels. With it, click what the picture shows where it shows it.",
                                          minimum=MIN_SCALE, maximum=1)] = 1.0) -> Pending:
        size = timing.window_size()
        if size is None:
            raise ValueError(words.no_area)
        if action == "wheel" and not (dx or dy):
            raise ValueError("wheel scrolls by dx and dy pixels (positive: right, down): give at least one")
        if action != "wheel" and (dx or dy):
            raise ValueError(f"dx and dy are for action wheel, not {action}")
        wx, wy = window_point(x, y, float(scale), size)
        left, top = timing.pointer_origin()
        pending = timing.defer()
        shown = (x, y) if scale == 1.0 else (wx, wy)
        if devices.pointer != shown or action == "move":
            timing.soon(lambda: devices.move(left + wx, top + wy, shown))
        result: dict[str, Any] = {"x": x, "y": y, "button": button, "action": action}
        if scale != 1.0:
            result.update(window={"x": wx, "y": wy}, scale=scale)
        if action == "click":
            timing.soon(lambda: devices.button(button, True))
            timing.after_frames(1, lambda: devices.button(button, False))
            pending.complete_after_sim_frames(2, lambda: result)
            return pending
        if action in ("down", "up"):
            timing.soon(lambda: devices.button(button, action == "down"))
        elif action == "wheel":
            result.update(dx=dx, dy=dy)
            timing.soon(lambda: devices.wheel(dx, dy))
        pending.complete_after_sim_frames(1, lambda: result)
        return pending

    mouse.__doc__ = words.mouse
    return mouse


def text_command(devices: Devices, timing: Frames, words: Words) -> Callable[..., Any]:
    def text(text: Annotated[str, Arg(f"The text to type (at most {MAX_TEXT} characters).")]) -> Pending:
        if len(text) > MAX_TEXT:
            raise ValueError(f"the text has {len(text)} characters; send at most {MAX_TEXT} at a time")
        if not text:
            raise ValueError("the text is empty; give at least one character")
        pending = timing.defer()
        timing.soon(lambda: devices.text(text))
        pending.complete_after_sim_frames(1, lambda: {"characters": len(text)})
        return pending

    text.__doc__ = words.text
    return text


def input_commands(devices: Pointer, timing: Frames, words: Words) -> list[Callable[..., Any]]:
    """The ``key``, ``mouse`` and ``text`` command functions (for ``bridge.command``)."""
    return [key_command(devices, timing, words), mouse_command(devices, timing, words),
            text_command(devices, timing, words)]
