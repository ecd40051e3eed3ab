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


def mouse_command(devices: Devices, timing: Frames, words: Words) -> Callable[..., Any]:
    def mouse(x: Annotated[int, Arg(f"Pixels from the {words.area}'s left edge{words.x_more}.", minimum=0)],
              y: Annotated[int, Arg(f"Pixels from the {words.area}'s top edge.", minimum=0)],
              button: Annotated[int, Arg("1 left, 2 middle, 3 right.", choices=(1, 2, 3))] = 1,
              action: Annotated[str, Arg("click (down then up), down, up or move.",
                                         choices=("click", "down", "up", "move"))] = "click") -> Pending:
        size = timing.window_size()
        if size is None:
            raise ValueError(words.no_area)
        width, height = size
        if not (0 <= x < width and 0 <= y < height):
            raise ValueError(f"({x}, {y}) is outside the {width}x{height} window: x must be 0 to {width - 1} "
                             f"and y 0 to {height - 1}")
        left, top = timing.pointer_origin()
        pending = timing.defer()
        if devices.pointer != (x, y) or action == "move":
            timing.soon(lambda: devices.move(left + x, top + y, (x, y)))
        if action == "click":
            timing.soon(lambda: devices.button(button, True))
            timing.after_frames(1, lambda: devices.button(button, False))
            pending.complete_after_sim_frames(2, lambda: {"x": x, "y": y, "button": button, "action": action})
            return pending
        if action in ("down", "up"):
            timing.soon(lambda: devices.button(button, action == "down"))
        pending.complete_after_sim_frames(1, lambda: {"x": x, "y": y, "button": button, "action": action})
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


def input_commands(devices: Devices, timing: Frames, words: Words) -> list[Callable[..., Any]]:
    """The ``key``, ``mouse`` and ``text`` command functions (for ``bridge.command``)."""
    return [make(devices, timing, words) for make in (key_command, mouse_command, text_command)]
