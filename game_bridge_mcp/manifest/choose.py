"""Which manifest a game instance gets, the one rule shared by the Bridge and discovery: its
own ``/tools``; on 404 the ``--manifest`` file or the fallback; on a broken one the fallback
with the reason (with ``verify``, only once ``/health`` proved a game answers)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Protocol

from ..errors import BridgeError, NotAGameSurface
from .reader import Manifest, fallback_manifest, load_manifest_file, normalise_manifest


class ManifestSource(Protocol):
    """What choosing needs of a port's client (``wire.client.GameClient`` is one)."""

    def tools(self, *, timeout_ms: int | None = None) -> Any | None: ...

    def health(self, *, timeout_ms: int | None = None) -> dict[str, Any]: ...


class ManifestFile:
    """``--manifest FILE``: read at most once, and only when a game needs it. Thread-safe."""

    def __init__(self, path: str | Path | None) -> None:
        self._path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._loaded = False
        self._value: Manifest | None = None
        self._error: BridgeError | None = None

    def get(self) -> tuple[Manifest | None, BridgeError | None]:
        """The file's manifest, or why it could not be used (``(None, None)``: no file)."""
        if self._path is None:
            return None, None
        with self._lock:
            if not self._loaded:
                self._loaded = True
                try:
                    self._value = load_manifest_file(self._path)
                except BridgeError as exc:
                    self._error = exc
            return self._value, self._error


def choose_manifest(source: ManifestSource, *, timeout_ms: int | None = None,
                    manifest_file: ManifestFile | None = None, verify: bool = True,
                    strict_file: bool = True) -> tuple[Manifest, str | None]:
    """The instance's manifest and, when it is not the game's own, the problem met on the
    way (None when there was none). GameOffline propagates. ``strict_file`` raises a
    ``--manifest`` file that cannot be used (a file the user named fails loudly) instead
    of reporting it as the problem."""
    try:
        doc = source.tools(timeout_ms=timeout_ms)
    except NotAGameSurface as exc:
        if verify:
            source.health(timeout_ms=timeout_ms)
        reason = f"GET /tools was unusable: {exc.detail}"
        return fallback_manifest(reason=reason), reason
    if doc is not None:
        return normalise_manifest(doc, source="game"), None
    if verify:
        source.health(timeout_ms=timeout_ms)  # a 404 from something that is not a game is NotAGameSurface
    from_file, error = (manifest_file or ManifestFile(None)).get()
    if from_file is not None:
        return from_file, None
    if error is not None and strict_file:
        raise error
    return fallback_manifest(), (error.message if error is not None else None)


class RecentMisses:
    """Names an instance's manifest lacked, re-fetched for and still lacked: not worth
    another ``GET /tools`` for :data:`MISS_TTL_S` (a passthrough command is a miss every
    call; a 7.9 MB manifest made each such call 108 ms). Valid for one generation of the
    instance's client (a restart may bring the name); at most :data:`MAX_MISSES`
    remembered. Thread-safe."""

    MISS_TTL_S = 5.0
    MAX_MISSES = 256

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._generation = -1
        self._missed: dict[str, float] = {}

    def recent(self, name: str, generation: int) -> bool:
        """True when ``name`` missed after a re-fetch in this generation, a moment ago."""
        with self._lock:
            if generation != self._generation:
                return False
            at = self._missed.get(name)
            return at is not None and self._clock() - at < self.MISS_TTL_S

    def remember(self, name: str, generation: int) -> None:
        with self._lock:
            if generation != self._generation or len(self._missed) >= self.MAX_MISSES:
                self._missed.clear()
                self._generation = generation
            self._missed[name] = self._clock()


__all__ = ["ManifestFile", "ManifestSource", "RecentMisses", "choose_manifest"]
