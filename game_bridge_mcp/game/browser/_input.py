"""``key``, ``mouse`` and ``text`` for an unmodified web page (the commands are the wrapper
family's), as the browser's own trusted input."""

from __future__ import annotations

import re
import string
from typing import Any

from ..wrapper.input import Words
from ._scripts import RENDER

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


class Devices:
    """The page's keyboard and mouse (the library's), and what is held down."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.keys_down: dict[str, str] = {}  # browser code -> the name it was given as
        self.buttons_down: set[int] = set()
        self.pointer: tuple[int, int] | None = None

    def key_code(self, name: str) -> str:
        return browser_key(name)

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

    def release_all(self) -> None:
        """Let go of every key and button still held (a step cut short)."""
        for code, name in list(self.keys_down.items()):
            self.key(code, name, False)
        for button in sorted(self.buttons_down):
            self.button(button, False)

    def wheel(self, dx: int, dy: int) -> None:
        """The browser delivers a wheel (and scrolls) with its next renderings: they are
        waited for, so the page has it before the next frame."""
        self.page.mouse.wheel(dx, dy)
        self.page.evaluate(RENDER, 2)

    def text(self, text: str) -> None:
        self.page.keyboard.type(text)

    def state(self) -> dict[str, Any]:
        return {"keysDown": sorted(self.keys_down.values()), "buttonsDown": sorted(self.buttons_down),
                "pointer": list(self.pointer) if self.pointer is not None else None}


WORDS = Words(
    key_names="A key name as pygame and SDL spell it (left, space, a, return, f1, left shift) or as the "
              "browser does (ArrowLeft, KeyA, Space).",
    frames="animation frames",
    key="Press, hold down or release a key, as the keyboard would: the page gets keydown/keyup\n"
        "(and keypress) events. Completes once delivered (a press: after the frame in which the\n"
        "key is released).",
    mouse="Move the pointer to (x, y) in the page's pixels (origin top left; the size is in\n"
          "X-Game-Window and state.browser.window), or in a screenshot's pixels with its scale, and click,\n"
          "press, release, just move there, or scroll there (wheel: dx, dy pixels, as a mouse wheel).",
    text="Type text, key by key as a keyboard would (characters no key makes arrive as text\n"
         "input); for keys that are not text (arrows, return), use key.",
    area="page", x_more=" (the X-Game-Window width)",
    no_area="the page has no area to point at yet")
