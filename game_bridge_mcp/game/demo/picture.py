"""The demo game's screen as a real picture (board, fruit, score, screen name), drawn into RGB
pixels with the standard library for ``/screenshot``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Protocol

from ..image import Pixels

Colour = tuple[int, int, int]


class DemoGame(Protocol):
    """What the picture reads of the demo game (:class:`.demo.FruitMerge`), read-only."""

    @property
    def screen(self) -> str: ...

    @property
    def paused(self) -> bool: ...

    @property
    def score(self) -> int: ...

    @property
    def best(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def current(self) -> int: ...

    @property
    def next(self) -> int: ...

    @property
    def held(self) -> Optional[int]: ...

    @property
    def grid(self) -> Sequence[Sequence[Optional[int]]]: ...

    @property
    def falling(self) -> Sequence[Sequence[int]]: ...

CELL = 48
MARGIN = 24
TOP = 112
WIDTH = 7 * CELL + 2 * MARGIN          # 384
HEIGHT = TOP + 10 * CELL + MARGIN      # 616
BACKGROUND: Colour = (24, 26, 38)
BOARD: Colour = (40, 44, 62)
GRID: Colour = (56, 61, 84)
TEXT: Colour = (235, 235, 240)
DIM: Colour = (150, 155, 175)
#: One colour per kind: cherry ... watermelon.
FRUIT: tuple[Colour, ...] = (
    (190, 20, 45), (240, 70, 95), (135, 70, 185), (255, 150, 30), (120, 200, 60),
    (205, 220, 95), (255, 185, 150), (240, 205, 40), (160, 230, 160), (40, 150, 70))

_GLYPHS = {
    "A": "01110 10001 10001 11111 10001 10001 10001", "B": "11110 10001 10001 11110 10001 10001 11110",
    "C": "01110 10001 10000 10000 10000 10001 01110", "D": "11110 10001 10001 10001 10001 10001 11110",
    "E": "11111 10000 10000 11110 10000 10000 11111", "F": "11111 10000 10000 11110 10000 10000 10000",
    "G": "01110 10001 10000 10111 10001 10001 01111", "H": "10001 10001 10001 11111 10001 10001 10001",
    "I": "01110 00100 00100 00100 00100 00100 01110", "J": "00111 00010 00010 00010 00010 10010 01100",
    "K": "10001 10010 10100 11000 10100 10010 10001", "L": "10000 10000 10000 10000 10000 10000 11111",
    "M": "10001 11011 10101 10101 10001 10001 10001", "N": "10001 10001 11001 10101 10011 10001 10001",
    "O": "01110 10001 10001 10001 10001 10001 01110", "P": "11110 10001 10001 11110 10000 10000 10000",
    "Q": "01110 10001 10001 10001 10101 10010 01101", "R": "11110 10001 10001 11110 10100 10010 10001",
    "S": "01111 10000 10000 01110 00001 00001 11110", "T": "11111 00100 00100 00100 00100 00100 00100",
    "U": "10001 10001 10001 10001 10001 10001 01110", "V": "10001 10001 10001 10001 10001 01010 00100",
    "W": "10001 10001 10001 10101 10101 10101 01010", "X": "10001 10001 01010 00100 01010 10001 10001",
    "Y": "10001 10001 01010 00100 00100 00100 00100", "Z": "11111 00001 00010 00100 01000 10000 11111",
    "0": "01110 10001 10011 10101 11001 10001 01110", "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111", "3": "11111 00010 00100 00010 00001 10001 01110",
    "4": "00010 00110 01010 10010 11111 00010 00010", "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110", "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110", "9": "01110 10001 10001 01111 00001 00010 01100",
    ":": "00000 01100 01100 00000 01100 01100 00000", "-": "00000 00000 00000 11111 00000 00000 00000",
    "+": "00000 00100 00100 11111 00100 00100 00000", ".": "00000 00000 00000 00000 00000 01100 01100",
    " ": "00000 00000 00000 00000 00000 00000 00000",
}
#: For each glyph, the lit pixels as runs: ``[(row, first column, length), ...]``.
_RUNS: dict[str, list[tuple[int, int, int]]] = {}
for _char, _rows in _GLYPHS.items():
    _runs = []
    for _row, _bits in enumerate(_rows.split()):
        _col = 0
        while _col < 5:
            if _bits[_col] == "1":
                _end = _bits.index("0", _col) if "0" in _bits[_col:] else 5
                _runs.append((_row, _col, _end - _col))
                _col = _end
            else:
                _col += 1
    _RUNS[_char] = _runs


class Canvas:
    """An RGB picture in a bytearray, with the few shapes the demo needs (clipped)."""

    def __init__(self, width: int, height: int, background: Colour) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x: int, y: int, w: int, h: int, colour: Colour) -> None:
        x0, x1 = max(0, x), min(self.width, x + w)
        if x1 <= x0:
            return
        span = bytes(colour) * (x1 - x0)
        for row in range(max(0, y), min(self.height, y + h)):
            start = (row * self.width + x0) * 3
            self.pixels[start:start + len(span)] = span

    def disc(self, cx: int, cy: int, radius: int, colour: Colour) -> None:
        for dy in range(-radius, radius + 1):
            half = int((radius * radius - dy * dy) ** 0.5 + 0.5)
            self.rect(cx - half, cy + dy, 2 * half + 1, 1, colour)

    def ring(self, cx: int, cy: int, radius: int, colour: Colour, width: int = 3) -> None:
        inner = max(0, radius - width)
        for dy in range(-radius, radius + 1):
            outer_half = int((radius * radius - dy * dy) ** 0.5 + 0.5)
            if abs(dy) >= inner:
                self.rect(cx - outer_half, cy + dy, 2 * outer_half + 1, 1, colour)
                continue
            inner_half = int((inner * inner - dy * dy) ** 0.5 + 0.5)
            self.rect(cx - outer_half, cy + dy, outer_half - inner_half, 1, colour)
            self.rect(cx + inner_half + 1, cy + dy, outer_half - inner_half, 1, colour)

    def text(self, x: int, y: int, text: str, colour: Colour, scale: int = 2) -> int:
        """Draw ``text`` (upper-cased; unknown characters as spaces); returns the width."""
        for index, char in enumerate(text.upper()):
            for row, col, length in _RUNS.get(char, _RUNS[" "]):
                self.rect(x + (index * 6 + col) * scale, y + row * scale, length * scale, scale, colour)
        return text_width(text, scale)


def text_width(text: str, scale: int = 2) -> int:
    return max(0, len(text) * 6 - 1) * scale


def _fruit(canvas: Canvas, kind: int, cx: int, cy: int, *, falling: bool = False) -> None:
    radius = 11 + kind + (kind > 6)
    canvas.disc(cx, cy, radius, FRUIT[kind])
    if falling:
        canvas.ring(cx, cy, radius + 2, TEXT, 2)
    letter = "CSGOAPHIMW"[kind]
    canvas.text(cx - 5, cy - 7, letter, (20, 20, 28), 2)


def _screen_name(game: DemoGame) -> str:
    if game.screen == "MenuScreen":
        return "MENU"
    if game.screen == "GameOverScreen":
        return "GAME OVER"
    return "PAUSED" if game.paused else "GAME"


def _banner(canvas: Canvas, lines: list[tuple[str, Colour, int]]) -> None:
    height = sum(14 * scale + 10 for _t, _c, scale in lines) + 20
    top = TOP + (10 * CELL - height) // 2
    canvas.rect(MARGIN + 12, top, WIDTH - 2 * MARGIN - 24, height, (14, 15, 24))
    y = top + 16
    for text, colour, scale in lines:
        canvas.text((WIDTH - text_width(text, scale)) // 2, y, text, colour, scale)
        y += 14 * scale + 10


def render_picture(game: DemoGame) -> Pixels:
    """The current screen of ``game`` as RGB pixels (WIDTH x HEIGHT)."""
    canvas = Canvas(WIDTH, HEIGHT, BACKGROUND)
    canvas.text(MARGIN, 14, f"SCORE {game.score}", TEXT, 3)
    name = _screen_name(game)
    canvas.text(WIDTH - MARGIN - text_width(name, 2), 18, name, (255, 210, 90), 2)
    canvas.text(MARGIN, 48, f"BEST {max(game.best, game.score)}  SEED {game.seed}", DIM, 2)
    x = MARGIN
    for label, kind in (("NOW", game.current), ("NEXT", game.next), ("HELD", game.held)):
        x += canvas.text(x, 82, label, DIM, 2) + 22
        if kind is not None:
            _fruit(canvas, kind, x, 88)
        else:
            canvas.text(x - 4, 82, "-", DIM, 2)
        x += 42
    canvas.rect(MARGIN - 4, TOP - 4, 7 * CELL + 8, 10 * CELL + 8, GRID)
    canvas.rect(MARGIN, TOP, 7 * CELL, 10 * CELL, BOARD)
    for column in range(1, 7):
        canvas.rect(MARGIN + column * CELL, TOP, 1, 10 * CELL, GRID)
    for row in range(1, 10):
        canvas.rect(MARGIN, TOP + row * CELL, 7 * CELL, 1, GRID)
    half = CELL // 2
    for row, cells in enumerate(game.grid):
        for column, kind in enumerate(cells):
            if kind is not None:
                _fruit(canvas, kind, MARGIN + column * CELL + half, TOP + row * CELL + half)
    for kind, row, column in game.falling:
        _fruit(canvas, kind, MARGIN + column * CELL + half, TOP + row * CELL + half, falling=True)
    if game.screen == "MenuScreen":
        _banner(canvas, [("FRUIT MERGE", TEXT, 3), ("CLICK START", (255, 210, 90), 2)])
    elif game.screen == "GameOverScreen":
        _banner(canvas, [("GAME OVER", (255, 110, 110), 3), (f"SCORE {game.score}", TEXT, 2),
                         ("CLICK RESTART", (255, 210, 90), 2)])
    elif game.paused:
        _banner(canvas, [("PAUSED", TEXT, 3), ("CLICK RESUME", (255, 210, 90), 2)])
    return Pixels(bytes(canvas.pixels), WIDTH, HEIGHT, "RGB")
