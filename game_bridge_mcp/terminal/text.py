"""What a command line prints, cleaned: every stream the CLI and ``check`` write goes through
:class:`TerminalText`, which removes what a game's text could do to a terminal."""

from __future__ import annotations

import io
from typing import TextIO

from ..manifest.sanitise import strip_hidden


class TerminalText(io.TextIOBase):
    """A text stream that writes through :func:`strip_hidden`: what a command prints quotes
    a game's answers and errors, a trace's names and values, a launched game's output, to
    a person at a terminal, where an escape sequence could set the window title, write
    the clipboard (OSC 52) or clear the screen, and a bidi override reorder the line. Each
    character is judged alone, so a sequence split across writes is removed as well."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(strip_hidden(text) if isinstance(text, str) else text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return bool(self.stream.isatty())

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"


def terminal(stream: TextIO) -> TextIO:
    """``stream`` as a :class:`TerminalText` (itself when it already is one): the one
    cleaner every command line output goes through."""
    return stream if isinstance(stream, TerminalText) else TerminalText(stream)  # type: ignore[return-value]


__all__ = ["TerminalText", "terminal"]
