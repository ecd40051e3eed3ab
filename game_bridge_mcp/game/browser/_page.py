"""One page under the wrapper: its clock and frames, what it shows, what it reports. Runs on
the one thread that drives the browser; :meth:`Page.state` and :meth:`Page.window_size`
read what that thread stored."""

from __future__ import annotations

import base64
import collections
import logging
import time
from typing import Any, Callable

from ..kit.outcomes import Pending
from ..image.scale import fit_size
from ..kit import GameBridge
from ..wrapper.frames import Schedule
from . import _scripts
from ._input import Devices

log = logging.getLogger(__name__)

#: ``ui.text``: at most this many characters of the page's visible text.
MAX_TEXT = 4000
#: Frames run in one round trip at most (a long step is run in chunks, serving between).
MAX_CHUNK = 600
#: While paused, how often the page is looked at (its events are read then too).
IDLE_LOOK_S = 0.2
#: Longest text of one event's message.
MAX_EVENT_TEXT = 500
#: CSS animations followed at once, at most (the oldest is let go beyond).
MAX_ANIMATIONS = 500


class PageGone(Exception):
    """The page closed or crashed: the wrapper ends."""


class CssTime:
    """CSS animations and transitions, held to the page's time with the DevTools
    ``Animation`` domain (best effort: a browser without it leaves them on wall time).
    Each known animation is kept with the page time it ends at, and released once it has
    (the domain keeps every animation it reported until released)."""

    def __init__(self, cdp: Any) -> None:
        self.cdp = cdp
        self.ends: dict[str, float | None] = {}  # id -> its end in its own time (None: never)
        self.rate: float | None = None
        self.available = True
        try:
            cdp.on("Animation.animationStarted", self._started)
            cdp.on("Animation.animationCanceled", lambda params: self.ends.pop(str(params.get("id")), None))
            cdp.send("Animation.enable")
        except Exception as exc:  # noqa: BLE001 - the domain is missing: animations stay on wall time
            log.info("game-bridge browser: no DevTools Animation domain (%s); CSS animations run in real time", exc)
            self.available = False

    def _started(self, params: dict[str, Any]) -> None:
        animation = params.get("animation") or {}
        if animation.get("id") is None:
            return
        source = animation.get("source") or {}
        try:
            iterations = float(source.get("iterations", 1))
            end: float | None = (float(source.get("delay", 0)) + float(source.get("duration", 0)) * iterations
                                 if iterations != float("inf") else None)
        except (TypeError, ValueError):
            end = None
        self.ends[str(animation["id"])] = end
        if len(self.ends) > MAX_ANIMATIONS:  # a page that starts animations and never ends them
            self._release([next(iter(self.ends))])

    def set_rate(self, rate: float, *, force: bool = False) -> None:
        if not self.available or (self.rate == rate and not force):
            return
        try:
            self.cdp.send("Animation.setPlaybackRate", {"playbackRate": rate})
            self.rate = rate
        except Exception as exc:  # noqa: BLE001
            log.debug("game-bridge browser: setPlaybackRate failed: %s", exc)

    def advance(self, ms: float) -> None:
        """Move every known animation ``ms`` of page time on (the page is paused); release
        the ones that have ended."""
        if not self.available or not self.ends:
            return
        done: list[str] = []
        for ident, end in list(self.ends.items()):
            try:
                now = float(self.cdp.send("Animation.getCurrentTime", {"id": ident}).get("currentTime", 0.0))
                self.cdp.send("Animation.seekAnimations", {"animations": [ident], "currentTime": now + ms})
            except Exception:  # noqa: BLE001 - gone from the page: forget it
                self.ends.pop(ident, None)
                continue
            if end is not None and now + ms >= end:
                done.append(ident)
        if done:
            self._release(done)

    def _release(self, idents: list[str]) -> None:
        for ident in idents:
            self.ends.pop(ident, None)
        try:
            self.cdp.send("Animation.releaseAnimations", {"animations": idents})
        except Exception as exc:  # noqa: BLE001
            log.debug("game-bridge browser: releaseAnimations failed: %s", exc)


class Page:
    """The page, its frame grid and what was last seen of it."""

    def __init__(self, page: Any, bridge: GameBridge, *, canvas: bool, size: tuple[int, int]) -> None:
        self.page = page
        self.bridge = bridge
        self.canvas = canvas
        self.size = size
        self.devices = Devices(page)
        self.cdp = page.context.new_cdp_session(page)
        self.css = CssTime(self.cdp)
        self.ticks = 0.0
        self.k = 0
        self._resync = True
        self.seen: dict[str, Any] = {}
        self.counts = collections.Counter[str]()
        self.gone: str | None = None
        self.frames_run = 0
        self._frame_times: collections.deque[float] = collections.deque(maxlen=240)
        self.schedule = Schedule(at_once=False, name="browser")  # input runs between the page's frames
        self._last_look = 0.0
        self.direct = True
        self.css.set_rate(0.0)  # before the page's first animation starts

    def start(self) -> None:
        """Once the page has loaded: can the clock be driven directly? and a first look."""
        self.direct = bool(self.page.evaluate(_scripts.HAS_CLOCK))
        self.look()
        if not self.direct:
            log.warning("game-bridge browser: the library's clock is not reachable directly; each step adds an "
                        "init script to the page (slower, and memory grows while the page runs)")

    # ------------------------------------------------------------------ events
    def attach(self, on_popup: Callable[[Any], None]) -> None:
        page = self.page
        page.on("console", self._console)
        page.on("pageerror", lambda error: self._event("pageerror", "pageErrors", error=_text(error)))
        page.on("dialog", self._dialog)
        page.on("framenavigated", self._navigated)
        page.on("crash", lambda _page: self._end("the page crashed"))
        page.on("close", lambda _page: self._end("the page closed itself"))
        page.context.on("page", on_popup)

    def _event(self, message: str, counter: str, **fields: Any) -> None:
        self.counts[counter] += 1
        self.bridge.event(message, **fields)

    def _console(self, message: Any) -> None:
        kind = str(getattr(message, "type", "log"))
        counter = "consoleErrors" if kind == "error" else "consoleWarnings" if kind == "warning" else "console"
        self._event(f"console:{kind}", counter, text=_text(message.text))

    def _dialog(self, dialog: Any) -> None:
        kind = str(dialog.type)
        try:
            if kind == "beforeunload":
                dialog.accept()
            else:
                dialog.dismiss()
        except Exception as exc:  # noqa: BLE001 - it went already
            log.debug("game-bridge browser: dialog gone before it was dismissed: %s", exc)
        self._event(f"dialog:{kind}", "dialogs", text=_text(dialog.message),
                    dismissed=kind != "beforeunload")

    def _navigated(self, frame: Any) -> None:
        if frame == self.page.main_frame:
            self._resync = True
            self.css.set_rate(self.css.rate or 0.0, force=True)  # a new document: hold its animations too
            self._event("navigated", "navigations", url=_text(frame.url))

    def _end(self, why: str) -> None:
        if self.gone is None:
            self.gone = why
            self.bridge.event("crashed" if "crash" in why else "closed", text=why)
            self.bridge.request_stop()

    def close(self) -> None:
        """``close``: the page closes, and the wrapper with it."""
        self._end("closed by the agent")
        try:
            self.page.close(run_before_unload=False)
        except Exception as exc:  # noqa: BLE001 - gone already
            log.debug("game-bridge browser: the page was gone before close: %s", exc)

    # ------------------------------------------------------------------ the clock
    def _sync(self) -> None:
        """Read the page's clock (a new document starts its own): the frame grid from there."""
        self.ticks = float(self.page.evaluate(_scripts.TICKS))
        self.k = _scripts.frame_at(self.ticks)
        self._resync = False

    def _run(self, frames: int, look: bool) -> None:
        try:
            if self._resync:
                self._sync()
        except Exception as exc:
            self._failed(exc)
            return
        target = _scripts.frame_ms(self.k + frames)
        ms = target - self.ticks
        try:
            if self.direct:
                seen, _error = self.page.evaluate(_scripts.RUN, [ms, MAX_TEXT, look])
            else:
                self.page.clock.run_for(ms)
                seen = self.page.evaluate(_scripts.RUN, [0, MAX_TEXT, True]) [0] if look else None
            for frame in self.page.frames[1:]:  # frames of their own (iframes) keep the same time
                try:
                    frame.evaluate(_scripts.RUN, [ms, 0, False])
                except Exception:  # noqa: BLE001 - detached, or not reachable
                    pass
        except Exception as exc:
            self._failed(exc)
            return
        self.ticks, self.k = float(target), self.k + frames
        if seen:
            self.seen = seen
        if self.bridge.paused:
            self.css.advance(frames * _scripts.FRAME_MS)

    def _failed(self, exc: Exception) -> None:
        text = str(exc)
        if self.gone is not None or "closed" in text.lower() and "Target" in text or not self._alive():
            self.gone = self.gone or f"the page went away: {text.splitlines()[0][:200]}"
            raise PageGone(self.gone) from None
        # A navigation in the middle of the run destroys the context: read the new clock next time.
        self._resync = True
        log.debug("game-bridge browser: a frame did not complete: %s", text.splitlines()[0] if text else exc)

    def _alive(self) -> bool:
        """Whether the page and its browser are still there (after a failed call)."""
        try:
            browser = self.page.context.browser
            return not self.page.is_closed() and (browser is None or browser.is_connected())
        except Exception:  # noqa: BLE001 - the library's own state is gone
            return False

    def frames(self, count: int, *, look: bool = True) -> None:
        """Run ``count`` frames of the page, then count them for the kit (completing what
        waited for them) and deliver the input due at each."""
        self.set_running(not self.bridge.paused)
        self._run(count, look)
        now = time.monotonic()
        for _ in range(count):
            self.frames_run += 1
            self._frame_times.append(now)
            self.bridge.end_sim_frame()
            self.schedule.frame_ended()
        if look:
            self._last_look = now

    def idle(self) -> None:
        """Paused and not stepping: hold CSS still, and look at the page now and then (a
        page still loads, and its events arrive only while the library is called)."""
        self.set_running(False)
        if time.monotonic() - self._last_look >= IDLE_LOOK_S:
            self.look()

    def look(self) -> None:
        try:
            seen, _error = self.page.evaluate(_scripts.RUN, [0, MAX_TEXT, True])
        except Exception as exc:
            self._failed(exc)
            return
        finally:
            self._last_look = time.monotonic()
        if seen:
            self.seen = seen

    def set_running(self, running: bool) -> None:
        self.css.set_rate(1.0 if running else 0.0)

    # ------------------------------------------------------------------ input's timing (game/wrapper/input.py)
    def soon(self, action: Callable[[], None]) -> None:
        """Run ``action`` (browser input) once the commands being applied are done, before
        the next frame: :meth:`deliver`, outside the kit's lock."""
        self.schedule.soon(action)

    def deliver(self) -> None:
        self.schedule.deliver(self._failed)

    def after_frames(self, frames: int, action: Callable[[], None]) -> None:
        self.schedule.after_frames(frames, action)

    def frames_to_due(self) -> int:
        return self.schedule.frames_to_due(MAX_CHUNK)

    def defer(self) -> Pending:
        return self.bridge.defer()

    # ------------------------------------------------------------------ geometry and pictures
    def _box(self) -> tuple[int, int, int, int]:
        """``(x, y, width, height)`` of what the screenshot shows and the pointer addresses."""
        viewport = self.seen.get("viewport") or {}
        width = int(viewport.get("width") or self.size[0])
        height = int(viewport.get("height") or self.size[1])
        if self.canvas:
            canvases = [c for c in self.seen.get("canvases") or () if c.get("cssWidth", 0) > 0 and c.get("cssHeight", 0) > 0]
            if canvases:
                c = max(canvases, key=lambda c: c["cssWidth"] * c["cssHeight"])
                x, y = max(0, int(c["x"])), max(0, int(c["y"]))
                return x, y, max(1, min(int(c["cssWidth"]), width - x)), max(1, min(int(c["cssHeight"]), height - y))
        return 0, 0, width, height

    def window_size(self) -> tuple[int, int] | None:
        _x, _y, width, height = self._box()
        return width, height

    def pointer_origin(self) -> tuple[int, int]:
        x, y, _w, _h = self._box()
        return x, y

    def capture(self, max_width: int, max_height: int) -> bytes:
        """The page (or its largest canvas) as PNG, drawn by the browser at the size that fits."""
        x, y, width, height = self._box()
        fit_w, fit_h = fit_size(width, height, max_width, max_height)
        scale = min(fit_w / width, fit_h / height)
        if scale < 1:
            scale = scale * (1 - 1e-6)  # never a pixel over the limit from rounding
        shot = self.cdp.send("Page.captureScreenshot", {
            "format": "png", "fromSurface": True, "captureBeyondViewport": False,
            "clip": {"x": x, "y": y, "width": width, "height": height, "scale": scale}})
        return base64.b64decode(shot["data"])

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """``/state`` (HTTP thread): what the driving thread saw last."""
        seen = self.seen
        now = time.monotonic()
        fps = sum(1 for t in list(self._frame_times) if now - t <= 1.0)
        doc: dict[str, Any] = {"browser": {
            "title": seen.get("title", ""), "url": seen.get("url", ""), "readyState": seen.get("readyState"),
            "window": dict(zip(("width", "height"), self.window_size() or (0, 0))),
            "viewport": seen.get("viewport"), "canvases": seen.get("canvases", []),
            "screenshot": "canvas" if self.canvas else "page",
            "frames": self.frames_run, "fps": fps, "pageTimeMs": self.ticks,
            "animationFrameCallbacks": seen.get("frameCallbacks", 0),
            "consoleErrors": self.counts["consoleErrors"], "consoleWarnings": self.counts["consoleWarnings"],
            "pageErrors": self.counts["pageErrors"], "dialogs": self.counts["dialogs"],
            "navigations": self.counts["navigations"], "textLength": seen.get("textLength", 0),
            **self.devices.state()}}
        if seen.get("hookError"):
            doc["browser"]["hookError"] = seen["hookError"]
        doc["ui"] = {"text": seen.get("text", "")}
        hook = seen.get("hook")
        if isinstance(hook, dict):
            for key, value in hook.items():
                if key not in ("browser",):
                    doc[key] = value
        return doc


def _text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_EVENT_TEXT else text[:MAX_EVENT_TEXT] + "..."
