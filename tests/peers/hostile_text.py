"""A game, written by hand, whose every text is hostile: control characters, escape
sequences, bidirectional overrides and isolates, zero-width and other invisible
characters, in keys and in values, in every channel the bridge passes on to an agent.

Serve it with ``peers.hostile.routed(game.routes())``. Each text is ``<channel>:`` +
:data:`EVIL`, so a test can tell which channels reached an answer (the cleaned text
keeps ``<channel>:AB``) and that none of :func:`forbidden` survived. Commands complete
at once; ``drop`` is refused by the game (``commandResults`` ``ok: false``), ``add`` works
and returns a hostile ``result``, anything else is rejected at ``/command`` with a
hostile error and a hostile list of commands. ``/screenshot`` answers 503 with a hostile
reason.
"""

from __future__ import annotations

import json
import threading
import unicodedata
from typing import Any, Callable

#: Every kind of text that must never reach an agent, between letters that must.
EVIL = ("A\x07B\x1b[31mC\u202eD\u200bE\u2066F\u2069G\ufeffH\u00adI\U000e0041J\x85K\rL\u2028M\x7fN"
        "\u200dO\u061cP\ufe0fQ\x00R\u2060S\u180eT")

_ALLOWED_CONTROLS = {"\n", "\t"}


def forbidden(text: str) -> list[str]:
    """The characters of ``text`` that must not reach an agent (as code point names)."""
    found = []
    for ch in text:
        if ch in _ALLOWED_CONTROLS:
            continue
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or 0xFE00 <= ord(ch) <= 0xFE0F or ch in "\u180e\u3164":
            found.append(f"U+{ord(ch):04X}")
    return found


def evil(channel: str) -> str:
    return f"{channel}:{EVIL}"


class HostileTextGame:
    """The game's world: a command counter and the answers built from it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.frame = 10
        self.next_id = 0
        self.results: list[dict[str, Any]] = []

    def routes(self) -> dict[str, Callable[[str], tuple[int, bytes]]]:
        return {"/health": self.health, "/state": self.state, "/tools": self.tools,
                "/command": self.command, "/screenshot": self.screenshot}

    @staticmethod
    def _json(doc: Any, *, raw: bool = False) -> bytes:
        # raw: the hostile characters as UTF-8 (control characters are still escaped, as
        # JSON requires); otherwise every one of them as a \\u escape.
        return json.dumps(doc, ensure_ascii=not raw).encode("utf-8")

    def health(self, _target: str) -> tuple[int, bytes]:
        with self.lock:
            self.frame += 1
            return 200, self._json({"ok": True, "frame": self.frame, "completedCommandId": self.next_id,
                                    "features": ["results", "screenshot"], evil("healthKey"): evil("healthValue")})

    def state(self, _target: str) -> tuple[int, bytes]:
        with self.lock:
            self.frame += 1
            doc = {
                "frame": self.frame, "completedCommandId": self.next_id,
                "ui": {"screen": evil("screen"), "text": evil("uiText"),
                       "elements": [{"label": evil("label"), "visible": True}]},
                "game": {evil("gameKey"): evil("gameValue"), "score": 3, "nested": {"deep": evil("nested")}},
                "events": [{"m": evil("eventM"), evil("eventKey"): evil("eventField")}, evil("eventString")],
                "commandResults": list(self.results[-16:]),
            }
            return 200, self._json(doc, raw=True)

    def tools(self, _target: str) -> tuple[int, bytes]:
        return 200, self._json({
            "game": {"name": evil("gameName"), "version": evil("gameVersion"), "protocol": 1,
                     "description": evil("gameDescription")},
            "toolsets": [{"name": "play", "description": evil("toolsetDescription"), "tools": [
                {"name": "drop", "description": evil("toolDescription"),
                 "args": [{"name": "x", "type": "number", "description": evil("argDescription")}]},
                {"name": "add", "description": evil("addDescription")}]}],
            "passthrough": {"description": evil("passthrough"), "examples": [evil("example")]}})

    def command(self, target: str) -> tuple[int, bytes]:
        from urllib.parse import parse_qs, urlsplit

        cmd = parse_qs(urlsplit(target).query).get("cmd", [""])[0]
        with self.lock:
            if cmd not in ("drop", "add", "close"):
                return 404, self._json({"accepted": False, "error": evil("rejected"),
                                        "commands": ["drop", "add", evil("commandName")]}, raw=True)
            self.next_id += 1
            entry: dict[str, Any] = {"id": self.next_id, "ok": cmd != "drop"}
            if cmd == "drop":
                entry["error"] = evil("failure")
            else:
                entry["result"] = {evil("resultKey"): evil("resultValue")}
            self.results.append(entry)
            return 200, self._json({"accepted": True, "commandId": self.next_id, "frame": self.frame})

    def screenshot(self, _target: str) -> tuple[int, bytes]:
        return 503, self._json({"ok": False, "error": evil("screenshotReason")}, raw=True)
