"""``key``, ``mouse`` and ``text`` for an unmodified web page, as the browser's own trusted
input, timed in animation frames."""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, Callable, Protocol

from ..kit.args import Arg
from ..kit.outcomes import Pending

MAX_TEXT = 1000
MAX_PRESS_FRAMES = 10000
_BUTTONS = {1: "left", 2: "middle", 3: "right"}

#: pygame's key names -> the browser's key codes (``KeyboardEvent.code``).
KEYS: dict[str, str] = {
    "left": "ArrowLeft", "right": "ArrowRight", "up": "ArrowUp", "down": "ArrowDown",
    "space": "Space", "return": "Enter", "enter": "Enter", "escape": "Escape", "tab": "Tab",
    "backspace": "Backspace", "delete": "Delete", "insert": "Insert", "home": "Home", "end": "End",
    "page up": "PageUp", "page down": "PageDown", "caps lock": "CapsLock",
    "left shift": "ShiftLeft", "right shift": "ShiftRight", "left ctrl": "ControlLeft",
    "right ctrl": "ControlRight", "left alt": "AltLeft", "right alt": "AltRight",
    "left meta": "MetaLeft", "right meta": "MetaRight", "left gui": "MetaLeft", "right gui": "MetaRight",
    "-": "Minus", "=": "Equal", "[": "BracketLeft", "]": "BracketRight", "\\": "Backslash",
    ";": "Semicolon", "'": "Quote", ",": "Comma", ".": "Period", "/": "Slash", "`": "Backquote",
    "[+]": "NumpadAdd", "[-]": "NumpadSubtract", "[*]": "NumpadMultiply", "[/]": "NumpadDivide",
    "[.]": "NumpadDecimal",
    **{c: f"Key{c.upper()}" for c in string.ascii_lowercase},
    **{d: f"Digit{d}" for d in string.digits},
    **{f"[{d}]": f"Numpad{d}" for d in string.digits},
    **{f"f{n}": f"F{n}" for n in range(1, 13)},
}
#: The browser's names accepted as they are (codes, and the generic modifiers).
BROWSER_NAMES = frozenset(KEYS.values()) | {"Shift", "Control", "Alt", "Meta", "NumpadEnter"}
_COMMON = ("left", "right", "up", "down", "space", "return", "escape", "tab", "backspace", "left shift",
           "left ctrl", "left alt")


def browser_key(name: str) -> str:
    """The browser's code for a pygame (or browser) key name; ValueError naming the valid ones."""
    text = str(name).strip()
    if text in BROWSER_NAMES:
        return text
    lowered = text.lower()
    if lowered in KEYS:
        return KEYS[lowered]
    raise ValueError(f"unknown key name {str(name)[:40]!r}; valid names: {valid_names()}")


def valid_names() -> str:
    """The names ``key`` accepts, compactly."""
    runs = re.compile(r"[a-z0-9]|f\d+|\[\d\]")
    words = list(_COMMON) + sorted(n for n in KEYS if len(n) > 1 and n not in _COMMON and not runs.fullmatch(n))
    symbols = "".join(sorted(n for n in KEYS if len(n) == 1 and not n.isalnum()))
    return ("a-z, 0-9, f1-f12, [0]-[9] (keypad), " + ", ".join(words)
            + f"; symbols {symbols}; or the browser's codes (ArrowLeft, KeyA, Space, Enter)")


class Frames(Protocol):
    """What input needs of the wrapper: the pointer's area, a frame scheduler, the bridge."""

    def window_size(self) -> tuple[int, int] | None: ...

    def pointer_origin(self) -> tuple[int, int]: ...

    def soon(self, action: Callable[[], None]) -> None: ...

    def after_frames(self, frames: int, action: Callable[[], None]) -> None: ...

    def defer(self) -> Pending: ...


class Devices:
    """The page's keyboard and mouse (the library's), and what is held down."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.keys_down: dict[str, str] = {}  # browser code -> the name it was given as
        self.buttons_down: set[int] = set()
        self.pointer: tuple[int, int] | None = None

    def key(self, code: str, name: str, down: bool) -> None:
        if down:
            self.page.keyboard.down(code)
            self.keys_down[code] = name
        else:
            self.page.keyboard.up(code)
            self.keys_down.pop(code, None)

    def move(self, x: float, y: float, shown: tuple[int, int]) -> None:
        self.page.mouse.move(x, y)
        self.pointer = shown

    def button(self, button: int, down: bool) -> None:
        if down:
            self.page.mouse.down(button=_BUTTONS[button])
            self.buttons_down.add(button)
        else:
            self.page.mouse.up(button=_BUTTONS[button])
            self.buttons_down.discard(button)

    def text(self, text: str) -> None:
        self.page.keyboard.type(text)

    def state(self) -> dict[str, Any]:
        return {"keysDown": sorted(self.keys_down.values()), "buttonsDown": sorted(self.buttons_down),
                "pointer": list(self.pointer) if self.pointer is not None else None}


def input_commands(devices: Devices, timing: Frames) -> list[Callable[..., Any]]:
    """The ``key``, ``mouse`` and ``text`` command functions (for ``bridge.command``)."""

    def key(key: Annotated[str, Arg("A key name as pygame and SDL spell it (left, space, a, return, f1, "
                                    "left shift) or as the browser does (ArrowLeft, KeyA, Space).")],
            action: Annotated[str, Arg("press (down, held, up), down or up.",
                                       choices=("press", "down", "up"))] = "press",
            frames: Annotated[int, Arg("For press: how many animation frames the key is held.",
                                       minimum=1, maximum=MAX_PRESS_FRAMES)] = 1) -> Pending:
        """Press, hold down or release a key, as the keyboard would: the page gets keydown/keyup
        (and keypress) events. Completes once delivered (a press: after the frame in which the
        key is released)."""
        code = browser_key(key)
        pending = timing.defer()
        if action == "press":
            timing.soon(lambda: devices.key(code, key, True))
            timing.after_frames(frames, lambda: devices.key(code, key, False))
            pending.complete_after_sim_frames(frames + 1, lambda: {"key": key, "action": action, "frames": frames})
        else:
            timing.soon(lambda: devices.key(code, key, action == "down"))
            pending.complete_after_sim_frames(1, lambda: {"key": key, "action": action})
        return pending

    def mouse(x: Annotated[int, Arg("Pixels from the page's left edge (the X-Game-Window width).", minimum=0)],
              y: Annotated[int, Arg("Pixels from the page's top edge.", minimum=0)],
              button: Annotated[int, Arg("1 left, 2 middle, 3 right.", choices=(1, 2, 3))] = 1,
              action: Annotated[str, Arg("click (down then up), down, up or move.",
                                         choices=("click", "down", "up", "move"))] = "click") -> Pending:
        """Move the pointer to (x, y) in the page's pixels (origin top left; the size is in
        X-Game-Window and state.browser.window) and click, press, release or just move there."""
        size = timing.window_size()
        if size is None:
            raise ValueError("the page has no area to point at yet")
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

    def text(text: Annotated[str, Arg(f"The text to type (at most {MAX_TEXT} characters).")]) -> Pending:
        """Type text, key by key as a keyboard would (characters no key makes arrive as text
        input); for keys that are not text (arrows, return), use key."""
        if len(text) > MAX_TEXT:
            raise ValueError(f"the text has {len(text)} characters; send at most {MAX_TEXT} at a time")
        if not text:
            raise ValueError("the text is empty; give at least one character")
        pending = timing.defer()
        timing.soon(lambda: devices.text(text))
        pending.complete_after_sim_frames(1, lambda: {"characters": len(text)})
        return pending

    return [key, mouse, text]
