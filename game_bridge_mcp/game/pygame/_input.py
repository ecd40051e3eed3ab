"""``key``, ``mouse`` and ``text`` for an unmodified pygame game: the events SDL would deliver,
and the held keys and pointer pygame reports, timed in simulation frames."""

from __future__ import annotations

from typing import Annotated, Any, Callable, Protocol

from ..kit.args import Arg
from ..kit.outcomes import Pending

#: The longest text one ``text`` command delivers.
MAX_TEXT = 1000
#: Most frames a ``press`` may hold a key.
MAX_PRESS_FRAMES = 10000
#: UTF-8 bytes in one TEXTINPUT event (SDL's limit is 32 with the terminator).
TEXT_CHUNK_BYTES = 31
_UNICODE = {"space": " ", "return": "\r", "enter": "\r", "tab": "\t", "backspace": "\b", "escape": "\x1b"}
#: Key names listed first when a name is unknown.
_COMMON = ("left", "right", "up", "down", "space", "return", "escape", "tab", "backspace", "left shift",
           "left ctrl", "left alt")
_MODIFIERS = {"left shift": "KMOD_LSHIFT", "right shift": "KMOD_RSHIFT", "left ctrl": "KMOD_LCTRL",
              "right ctrl": "KMOD_RCTRL", "left alt": "KMOD_LALT", "right alt": "KMOD_RALT",
              "left meta": "KMOD_LMETA", "right meta": "KMOD_RMETA"}


class Frames(Protocol):
    """What input needs of the wrapper: the window, a frame scheduler, the bridge."""

    def window_size(self) -> tuple[int, int] | None: ...

    def after_frames(self, frames: int, action: Callable[[], None]) -> None: ...

    def defer(self) -> Pending: ...


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

    def move(self, x: int, y: int) -> None:
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

    def text(self, text: str) -> None:
        chunk = ""
        for char in text:
            if len((chunk + char).encode("utf-8")) > TEXT_CHUNK_BYTES:
                self._post(self.pg.TEXTINPUT, text=chunk)
                chunk = ""
            chunk += char
        if chunk:
            self._post(self.pg.TEXTINPUT, text=chunk)


def input_commands(devices: Devices, timing: Frames) -> list[Callable[..., Any]]:
    """The ``key``, ``mouse`` and ``text`` command functions (for ``bridge.command``)."""

    def key(key: Annotated[str, Arg("A key name as pygame and SDL spell it: left, space, a, return, f1, "
                                    "left shift.")],
            action: Annotated[str, Arg("press (down, held, up), down or up.",
                                       choices=("press", "down", "up"))] = "press",
            frames: Annotated[int, Arg("For press: how many simulation frames the key is held.",
                                        minimum=1, maximum=MAX_PRESS_FRAMES)] = 1) -> Pending:
        """Press, hold down or release a key, as the keyboard would: the game gets KEYDOWN/KEYUP
        events and pygame.key.get_pressed() reports it held. Completes once delivered (a press:
        after the frame in which the key is released)."""
        code = devices.key_code(key)
        pending = timing.defer()
        if action == "press":
            devices.key_event(code, True)
            timing.after_frames(frames, lambda: devices.key_event(code, False))
            pending.complete_after_sim_frames(frames + 1, lambda: {"key": key, "action": action,
                                                                     "frames": frames})
        else:
            devices.key_event(code, action == "down")
            pending.complete_after_sim_frames(1, lambda: {"key": key, "action": action})
        return pending

    def mouse(x: Annotated[int, Arg("Pixels from the window's left edge.", minimum=0)],
              y: Annotated[int, Arg("Pixels from the window's top edge.", minimum=0)],
              button: Annotated[int, Arg("1 left, 2 middle, 3 right.", choices=(1, 2, 3))] = 1,
              action: Annotated[str, Arg("click (down then up), down, up or move.",
                                         choices=("click", "down", "up", "move"))] = "click") -> Pending:
        """Move the pointer to (x, y) in the game window's pixels (origin top left; the size is in
        X-Game-Window and state.pygame.window) and click, press, release or just move there."""
        size = timing.window_size()
        if size is None:
            raise ValueError("the game has no window yet (it has not called pygame.display.set_mode)")
        width, height = size
        if not (0 <= x < width and 0 <= y < height):
            raise ValueError(f"({x}, {y}) is outside the {width}x{height} window: x must be 0 to {width - 1} "
                             f"and y 0 to {height - 1}")
        pending = timing.defer()
        if devices.pointer != (x, y) or action == "move":
            devices.move(x, y)
        if action == "click":
            devices.button(button, True)
            timing.after_frames(1, lambda: devices.button(button, False))
            pending.complete_after_sim_frames(2, lambda: {"x": x, "y": y, "button": button, "action": action})
            return pending
        if action in ("down", "up"):
            devices.button(button, action == "down")
        pending.complete_after_sim_frames(1, lambda: {"x": x, "y": y, "button": button, "action": action})
        return pending

    def text(text: Annotated[str, Arg(f"The text to type (at most {MAX_TEXT} characters).")]) -> Pending:
        """Type text, delivered as TEXTINPUT events (what a text field reads); for keys that
        are not text (arrows, return), use key."""
        if len(text) > MAX_TEXT:
            raise ValueError(f"the text has {len(text)} characters; send at most {MAX_TEXT} at a time")
        if not text:
            raise ValueError("the text is empty; give at least one character")
        pending = timing.defer()
        devices.text(text)
        pending.complete_after_sim_frames(1, lambda: {"characters": len(text)})
        return pending

    return [key, mouse, text]
