"""``key``, ``mouse`` and ``text`` for an unmodified pygame game (the commands are the wrapper
family's): the events SDL would deliver, and the held keys and pointer pygame reports."""

from __future__ import annotations

from typing import Any

from ..wrapper.input import Words

#: UTF-8 bytes in one TEXTINPUT event (SDL's limit is 32 with the terminator).
TEXT_CHUNK_BYTES = 31
_UNICODE = {"space": " ", "return": "\r", "enter": "\r", "tab": "\t", "backspace": "\b", "escape": "\x1b"}
#: Key names listed first when a name is unknown.
_COMMON = ("left", "right", "up", "down", "space", "return", "escape", "tab", "backspace", "left shift",
           "left ctrl", "left alt")
_MODIFIERS = {"left shift": "KMOD_LSHIFT", "right shift": "KMOD_RSHIFT", "left ctrl": "KMOD_LCTRL",
              "right ctrl": "KMOD_RCTRL", "left alt": "KMOD_LALT", "right alt": "KMOD_RALT",
              "left meta": "KMOD_LMETA", "right meta": "KMOD_RMETA"}


class Devices:
    """The injected keyboard and pointer state, and the events that change it."""

    def __init__(self, pygame: Any) -> None:
        self.pg = pygame
        self.keys_down: set[int] = set()
        self.names: dict[int, str] = {}  # key code -> name, for the state (read off the game thread)
        self.buttons_down: set[int] = set()
        self.pointer: tuple[int, int] | None = None
        self.key_names = sorted({pygame.key.name(getattr(pygame, attr)) for attr in dir(pygame)
                                 if attr.startswith("K_")} - {""})

    # ------------------------------------------------------------------ reading
    def mods(self) -> int:
        pg, bits = self.pg, 0
        for code in self.keys_down:
            attr = _MODIFIERS.get(pg.key.name(code))
            if attr is not None:
                bits |= int(getattr(pg, attr, 0))
        return bits

    def key_code(self, name: str) -> int:
        text = str(name).strip()
        try:
            code = int(self.pg.key.key_code(text))
        except (ValueError, TypeError):
            code = 0
        if not text or not code:
            raise ValueError(f"unknown key name {str(name)[:40]!r}; valid names: {self.valid_names()}")
        return code

    def valid_names(self) -> str:
        """The names ``key`` accepts, compactly (runs of letters, digits and f-keys)."""
        names = set(self.key_names)
        groups = [("a", "z", [chr(c) for c in range(ord("a"), ord("z") + 1)]),
                  ("0", "9", [str(d) for d in range(10)]),
                  ("f1", "f15", [f"f{n}" for n in range(1, 16)]),
                  ("[0]", "[9]", [f"[{d}]" for d in range(10)])]
        parts: list[str] = []
        covered: set[str] = set()
        for first, last, members in groups:
            if all(member in names for member in members):
                parts.append(f"{first}-{last}" + (" (keypad)" if first == "[0]" else ""))
                covered.update(members)
        common = [n for n in _COMMON if n in names]
        words = common + sorted(n for n in names - covered - set(common) if len(n) > 1)
        symbols = "".join(sorted(n for n in names - covered if len(n) == 1))
        return ", ".join(parts + words) + (f"; symbols {symbols}" if symbols else "")

    # ------------------------------------------------------------------ events
    def _post(self, kind: int, **fields: Any) -> None:
        self.pg.event.post(self.pg.event.Event(kind, game_bridge=True, **fields))

    def key_event(self, code: int, down: bool) -> None:
        pg = self.pg
        name = self.names.setdefault(code, pg.key.name(code))
        if down:
            self.keys_down.add(code)
            char = _UNICODE.get(name, name if len(name) == 1 else "")
            if char and self.mods() & int(getattr(pg, "KMOD_SHIFT", 0)):
                char = char.upper()
            self._post(pg.KEYDOWN, key=code, mod=self.mods(), unicode=char, scancode=0)
        else:
            self.keys_down.discard(code)
            self._post(pg.KEYUP, key=code, mod=self.mods(), unicode="", scancode=0)

    def key(self, code: int, _name: str, down: bool) -> None:
        self.key_event(code, down)

    def move(self, x: int, y: int, _shown: tuple[int, int] | None = None) -> None:
        before = self.pointer or (x, y)
        self.pointer = (x, y)
        buttons = tuple(int(b in self.buttons_down) for b in (1, 2, 3))
        self._post(self.pg.MOUSEMOTION, pos=(x, y), rel=(x - before[0], y - before[1]), buttons=buttons,
                   touch=False)

    def button(self, button: int, down: bool) -> None:
        assert self.pointer is not None
        if down:
            self.buttons_down.add(button)
        else:
            self.buttons_down.discard(button)
        kind = self.pg.MOUSEBUTTONDOWN if down else self.pg.MOUSEBUTTONUP
        self._post(kind, pos=self.pointer, button=button, touch=False)

    def release_all(self) -> None:
        """Let go of every key and button still held (a step cut short)."""
        for code in sorted(self.keys_down):
            self.key_event(code, False)
        for button in sorted(self.buttons_down):
            if self.pointer is not None:
                self.button(button, False)

    def wheel(self, dx: int, dy: int) -> None:
        """A wheel turned where the pointer is: MOUSEWHEEL (in notches of 100 pixels, at least
        one; positive y is away from the user, so up) and, as pygame also posts them, a press
        and release of button 4 (up) or 5 (down) per vertical notch."""
        pg = self.pg
        notches_x = round(dx / 100) or (1 if dx > 0 else -1 if dx < 0 else 0)
        notches_y = round(dy / 100) or (1 if dy > 0 else -1 if dy < 0 else 0)
        fields: dict[str, Any] = {"x": notches_x, "y": -notches_y, "flipped": False, "which": 0, "touch": False,
                                  "precise_x": dx / 100, "precise_y": -dy / 100}
        self._post(pg.MOUSEWHEEL, **fields)
        pos = self.pointer or (0, 0)
        for _ in range(min(abs(notches_y), 100)):
            button = 4 if notches_y < 0 else 5
            self._post(pg.MOUSEBUTTONDOWN, pos=pos, button=button, touch=False)
            self._post(pg.MOUSEBUTTONUP, pos=pos, button=button, touch=False)

    def text(self, text: str) -> None:
        chunk = ""
        for char in text:
            if len((chunk + char).encode("utf-8")) > TEXT_CHUNK_BYTES:
                self._post(self.pg.TEXTINPUT, text=chunk)
                chunk = ""
            chunk += char
        if chunk:
            self._post(self.pg.TEXTINPUT, text=chunk)


WORDS = Words(
    key_names="A key name as pygame and SDL spell it: left, space, a, return, f1, left shift.",
    frames="simulation frames",
    key="Press, hold down or release a key, as the keyboard would: the game gets KEYDOWN/KEYUP\n"
        "events and pygame.key.get_pressed() reports it held. Completes once delivered (a press:\n"
        "after the frame in which the key is released).",
    mouse="Move the pointer to (x, y) in the game window's pixels (origin top left; the size is in\n"
          "X-Game-Window and state.pygame.window), or in a screenshot's pixels with its scale, and click,\n"
          "press, release, just move there, or turn the wheel there (wheel: dx, dy; MOUSEWHEEL events).",
    text="Type text, delivered as TEXTINPUT events (what a text field reads); for keys that\n"
         "are not text (arrows, return), use key.",
    area="window", x_more="",
    no_area="the game has no window yet (it has not called pygame.display.set_mode)")
