"""``GET /screenshot``: capture on the game's thread at its next frame, scale and encode on
the HTTP thread."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import threading
from typing import Any, Callable, Optional

from ...contract import FRAME_HEADER, MAX_HEIGHT, MAX_WIDTH, REGION_KEYS, SCREEN_HASH_PARAM, WINDOW_HEADER
from .. import image
from ..image.hashing import Region, picture_hash
from ..server.http import Answer, json_bytes
from ..server.query import parse as parse_query

log = logging.getLogger(__name__)

#: What the game registers: ``capture()`` or ``capture(max_width, max_height)``.
Capture = Callable[..., Any]
#: How long a request waits for the game's next frame.
WAIT_S = 5.0
DEFAULT_SIZE = 768
#: Requests waiting at once; more are refused (each holds a frame's copy).
MAX_WAITING = 16


class _Request:
    __slots__ = ("max_width", "max_height", "done", "frozen", "frame", "error", "region", "hashing", "hash",
                 "refused")

    def __init__(self, max_width: int, max_height: int, *, hashing: bool = False,
                 region: Region | None = None) -> None:
        self.max_width, self.max_height = max_width, max_height
        self.done = threading.Event()
        self.frozen: image.Image | image.Pixels | None = None
        self.frame = 0
        self.error: str | None = None
        #: ``?hash=1``: the picture's hash (of ``region``, in window pixels), not an image.
        self.hashing, self.region = hashing, region
        self.hash: str | None = None
        self.refused: str | None = None  # a region the picture does not hold: 400


@dataclasses.dataclass(frozen=True)
class Limits:
    max_width: int
    max_height: int


def parse_limits(query: str) -> Limits:
    """``maxWidth`` / ``maxHeight`` from a query string. Raises ValueError naming the
    parameter when one is not a whole number from 1 to :data:`image.MAX_SIDE` or is
    given twice."""
    params = parse_query(query)  # a QueryError is a ValueError
    sizes = []
    for name in (MAX_WIDTH, MAX_HEIGHT):
        text = params.get(name)
        if text is None:
            sizes.append(DEFAULT_SIZE)
            continue
        value = text.strip()
        if not value.isdigit() or len(value) > 9 or not 1 <= int(value) <= image.MAX_SIDE:
            raise ValueError(f"{name} must be a whole number from 1 to {image.MAX_SIDE}, got {text[:40]!r}")
        sizes.append(int(value))
    return Limits(*sizes)


def parse_hash(query: str) -> tuple[bool, Region | None]:
    """``hash=1`` and its region (``x``, ``y``, ``width``, ``height``, all or none) from a
    query string; ValueError naming what is wrong."""
    params = parse_query(query)
    if params.get(SCREEN_HASH_PARAM) not in ("1", "true"):
        if any(params.get(key) is not None for key in REGION_KEYS):
            raise ValueError("x, y, width and height go with hash=1 (a region of the picture to hash)")
        return False, None
    given = [params.get(key) for key in REGION_KEYS]
    if all(value is None for value in given):
        return True, None
    values = []
    for key, text in zip(REGION_KEYS, given):
        value = (text or "").strip()
        if not value.isdigit() or len(value) > 6:
            raise ValueError(f"a region needs x, y, width and height, each a whole number; {key} is {text!r}")
        values.append(int(value))
    x, y, width, height = values
    return True, (x, y, width, height)


def _takes_size(capture: Capture) -> bool:
    """Whether ``capture`` accepts ``(max_width, max_height)``."""
    try:
        signature = inspect.signature(capture)
    except (TypeError, ValueError):
        return False
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values()):
        return True
    return len(positional) >= 2


def _unavailable(reason: str) -> Answer:
    return Answer(503, json_bytes({"ok": False, "error": reason[:600]}))


class Screenshots:
    """The screenshot requests of one game: HTTP threads wait, the game thread captures.

    ``window`` (optional) returns the game window's ``(width, height)`` in the pixels
    its pointer input uses, sent as ``X-Game-Window``.
    """

    def __init__(self, capture: Capture, *, window: Optional[Callable[[], Any]] = None,
                 wait_s: float = WAIT_S, on_request: Optional[Callable[[], None]] = None,
                 hasher: Optional[Callable[[Region | None], str]] = None) -> None:
        if not callable(capture):
            raise TypeError(f"the screenshot capture must be callable, not {type(capture).__name__}")
        self.capture = capture
        self.window = window
        #: ``hasher(region)``: the picture's hash, when the game computes it itself (on the
        #: game thread; ValueError for a region it does not hold); else it is the capture's.
        self.hasher = hasher
        self.wait_s = float(wait_s)
        self._takes_size = _takes_size(capture)
        self._lock = threading.Lock()
        self._waiting: list[_Request] = []
        self._stopped = False
        #: Called once a request is waiting (the kit wakes a paused loop with it).
        self.on_request = on_request

    # ------------------------------------------------------------------ HTTP thread
    def answer(self, query: str) -> Answer:
        """Serve one ``/screenshot`` request (blocks until the game's next frame)."""
        try:
            limits = parse_limits(query)
            hashing, region = parse_hash(query)
        except ValueError as exc:
            return Answer(400, json_bytes({"ok": False, "error": str(exc)}))
        request = _Request(limits.max_width, limits.max_height, hashing=hashing, region=region)
        with self._lock:
            if self._stopped:
                return _unavailable("the game is closing")
            if len(self._waiting) >= MAX_WAITING:
                return _unavailable(f"{MAX_WAITING} screenshots are already waiting for the game's "
                                    "next frame; ask again when one has been answered")
            self._waiting.append(request)
        if self.on_request is not None:
            self.on_request()
        if not request.done.wait(self.wait_s):
            with self._lock:
                if request in self._waiting:
                    self._waiting.remove(request)
            if not request.done.is_set():
                return _unavailable(f"the game did not reach a frame within {self.wait_s:g} s of the "
                                    "request (its loop is blocked, or does not call pump()): nothing "
                                    "was captured")
        if request.refused is not None:
            return Answer(400, json_bytes({"ok": False, "error": request.refused[:600]}))
        if request.hashing and request.hash is not None:
            return Answer(200, json_bytes({"ok": True, "hash": request.hash, "frame": request.frame}),
                          headers=((FRAME_HEADER, str(request.frame)),))
        if request.error is not None or request.frozen is None:
            return _unavailable(request.error or "the game has nothing to show")
        try:
            shot = image.encode(request.frozen, request.max_width, request.max_height)
        except (ValueError, TypeError, OSError, RuntimeError) as exc:
            return _unavailable(f"the game's picture could not be served: {exc}")
        except Exception as exc:  # pygame raises its own error type for unreadable data
            return _unavailable(f"the game's picture could not be served: {type(exc).__name__}: {exc}")
        headers = [(FRAME_HEADER, str(request.frame))]
        window = self._window_header()
        if window is not None:
            headers.append((WINDOW_HEADER, window))
        return Answer(200, shot.data, content_type=shot.mime, headers=tuple(headers))

    def _window_header(self) -> str | None:
        if self.window is None:
            return None
        try:
            width, height = self.window()
            width, height = int(width), int(height)
        except Exception:  # noqa: BLE001 - a window that cannot say its size sends no header
            log.debug("game-bridge kit: the window size is not known", exc_info=True)
            return None
        return f"{width}x{height}" if width > 0 and height > 0 else None

    # ------------------------------------------------------------------ game thread
    @property
    def waiting(self) -> int:
        """How many requests are waiting for the game's next frame."""
        return len(self._waiting)

    def serve(self, frame: int) -> int:
        """Capture for every waiting request (call on the game thread, once a frame).
        Returns how many were answered."""
        if not self._waiting:
            return 0
        with self._lock:
            requests, self._waiting = self._waiting, []
        by_size: dict[tuple[int, int], list[_Request]] = {}
        for request in requests:
            if request.hashing:
                self._hash(request, frame)
                continue
            by_size.setdefault((request.max_width, request.max_height), []).append(request)
        source, error = (None, None) if self._takes_size else self._call()
        for (max_width, max_height), group in by_size.items():
            if self._takes_size:
                source, error = self._call(max_width, max_height)
            frozen: image.Image | image.Pixels | None = None
            if error is None and source is None:
                error = "the game has nothing to show right now (its capture returned None)"
            elif error is None:
                try:
                    frozen = image.freeze(source, max_width, max_height)
                except Exception as exc:  # noqa: BLE001 - whatever the game returned
                    error = f"the game's capture returned what cannot be served: {exc}"
            for request in group:
                request.frozen, request.error, request.frame = frozen, error, frame
                request.done.set()
        return len(requests)

    def _hash(self, request: _Request, frame: int) -> None:
        """``?hash=1``: the picture's hash now (its region's), on the game thread."""
        request.frame = frame
        try:
            if self.hasher is not None:
                request.hash = str(self.hasher(request.region))
            else:
                source, error = self._call(image.MAX_SIDE, image.MAX_SIDE) if self._takes_size else self._call()
                if error is None and source is None:
                    error = "the game has nothing to show right now (its capture returned None)"
                if error is not None:
                    request.error = error
                else:
                    request.hash = picture_hash(source, request.region)
        except ValueError as exc:  # a region the picture does not hold
            request.refused = str(exc)
        except Exception as exc:  # noqa: BLE001 - the game's own capture or hasher
            request.error = f"the game's picture could not be hashed: {type(exc).__name__}: {exc}"
        request.done.set()

    def _call(self, *size: int) -> tuple[Any, str | None]:
        try:
            return self.capture(*size), None
        except Exception as exc:  # the game's capture is the game's code
            error = f"the game's capture failed: {type(exc).__name__}: {exc}"
            log.warning("game-bridge kit: screenshot capture failed: %s", error[:300])
            return None, error

    def stop(self) -> None:
        """Release every waiting request with a 503 (the game is closing)."""
        with self._lock:
            self._stopped = True
            requests, self._waiting = self._waiting, []
        for request in requests:
            request.error = "the game is closing"
            request.done.set()
