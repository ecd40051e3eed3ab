"""What a command shows while a launch or a long wait runs: one line on a terminal, redrawn
in place and cleared when the call ends; nothing at all when the stream is not a terminal
(piped, redirected, in CI), so scripts read only the answer."""

from __future__ import annotations

import time
from typing import Callable, TextIO

from ..manifest.sanitise import one_line
from .text import TerminalText

Progress = Callable[[float, "float | None", str], None]
#: The widest line drawn (a terminal line that wraps cannot be redrawn in place).
MAX_WIDTH = 100


class TerminalProgress:
    """A progress callback drawing ``what: message`` on ``stream`` when it is a terminal."""

    def __init__(self, stream: TextIO, what: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        # Its own redraw codes go to the terminal itself; the game's text in the message is cleaned.
        self.stream: TextIO = stream.stream if isinstance(stream, TerminalText) else stream
        self.what = what
        self.clock = clock
        self.started = clock()
        self.drawn = False
        try:
            self.enabled = bool(stream.isatty())
        except (AttributeError, ValueError, OSError):
            self.enabled = False

    def __call__(self, done: float, total: float | None, message: str) -> None:
        if not self.enabled:
            return
        elapsed = self.clock() - self.started
        text = f"{self.what} ({elapsed:.1f} s)"
        if message:
            text += ": " + one_line(message, MAX_WIDTH)
        self.stream.write("\r\x1b[K" + text[:MAX_WIDTH])
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        """Take the line away (before the answer or an error is printed)."""
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False

    @property
    def callback(self) -> Progress | None:
        """The callback to hand to ``Bridge.run_tool``: None when nothing would be drawn."""
        return self if self.enabled else None


__all__ = ["TerminalProgress"]
