"""One page under the wrapper: its clock and frames, what it shows, what it reports. Runs on
the one thread that drives the browser; :meth:`Page.state` and :meth:`Page.window_size`
read what that thread stored."""

from __future__ import annotations

import base64
import collections
import hashlib
import logging
import time
from typing import Any, Callable

from ..kit.outcomes import Pending
from ..image.hashing import check_region
from ..image.scale import fit_size
from ..kit import GameBridge
from ..wrapper.frames import Schedule
from . import _scripts
from ._input import Devices
from ._chromium import MemoryCap
from ._time import CssTime, PageTime

log = logging.getLogger(__name__)

#: Frames run in one round trip at most (a long step is run in chunks, serving between; a
#: pause cuts a step short at the end of the chunk under way).
MAX_CHUNK = 60
#: While paused, how often the page is looked at (its events are read then too).
IDLE_LOOK_S = 0.2
#: Seconds a page that began to navigate away is waited on when no request for the new
#: document shows up (a navigation the page called off, or one that needs none).
NO_REQUEST_S = 2.0
#: Longest text of one event's message.
MAX_EVENT_TEXT = 500


class PageGone(Exception):
    """The page closed or crashed: the wrapper ends."""


class Page:
    """The page, its frame grid and what was last seen of it."""

    def __init__(self, page: Any, bridge: GameBridge, *, canvas: bool, size: tuple[int, int],
                 time_: PageTime, load_timeout_s: float, memory: MemoryCap | None = None) -> None:
        self.page = page
        self.bridge = bridge
        self.canvas = canvas
        self.size = size
        self.time = time_
        self.load_timeout_s = load_timeout_s
        self.memory = memory
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
        # a navigation of the main frame, once the page began it
        self._new_document = False
        self._navigation_seen = False
        self._navigation_ended = False

    def start(self) -> None:
        """Once the page has loaded: can the clock be driven directly? and a first look."""
        self.direct = bool(self.page.evaluate(_scripts.HAS_CLOCK))
        self._new_document = False
        self.look()
        if not self.direct:
            log.warning("game-bridge browser: the library's clock is not reachable directly; steps run whole, "
                        "without CSS animations held to them")

    # ------------------------------------------------------------------ events
    def attach(self, on_popup: Callable[[Any], None]) -> None:
        page = self.page
        page.on("console", self._console)
        page.on("pageerror", lambda error: self._event("pageerror", "pageErrors", error=_text(error)))
        page.on("dialog", self._dialog)
        page.on("download", self._download)
        page.on("framenavigated", self._navigated)
        page.on("request", self._request)
        page.on("requestfailed", self._request_ended)
        page.on("requestfinished", self._request_ended)
        page.on("crash", lambda _page: self._end("the page crashed"))
        page.on("close", lambda _page: self._end("the page closed itself"))
        page.context.on("page", on_popup)
        try:
            self.cdp.on("Page.frameNavigated", self._document)
            self.cdp.send("Page.enable")
        except Exception as exc:  # noqa: BLE001
            log.debug("game-bridge browser: no Page domain events: %s", exc)

    def _event(self, message: str, counter: str, **fields: Any) -> None:
        self.counts[counter] += 1
        self.bridge.event(message, **fields)

    def _console(self, message: Any) -> None:
        kind = str(getattr(message, "type", "log"))
        counter = "consoleErrors" if kind == "error" else "consoleWarnings" if kind == "warning" else "console"
        fields = {"text": _text(message.text)}
        try:  # where it came from: the script, or the address a failed load was for
            where = message.location or {}
            if where.get("url"):
                fields["url"] = _text(where["url"])
        except Exception:  # noqa: BLE001 - no location
            pass
        self._event(f"console:{kind}", counter, **fields)

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

    def _download(self, download: Any) -> None:
        """A download: refused (the browser was told to accept none; nothing is written)."""
        try:
            url, name = str(download.url), str(download.suggested_filename)
            download.cancel()
        except Exception:  # noqa: BLE001 - gone already
            url, name = "?", "?"
        self._event("download:refused", "downloads", url=_text(url), name=_text(name))

    def _check_memory(self) -> None:
        held = self.memory.over() if self.memory is not None else None
        if held is not None and self.memory is not None:
            mib, cap = held // 2 ** 20, self.memory.cap_bytes // 2 ** 20
            self.bridge.event("memory:exceeded", mib=mib, capMiB=cap)
            self._end(f"the page's browser held {mib} MiB, over the cap of {cap} MiB (--max-memory)")
            raise PageGone(self.gone or "memory")

    def _navigated(self, frame: Any) -> None:
        if frame == self.page.main_frame:
            self._resync = True
            self._event("navigated", "navigations", url=_text(frame.url))

    def _document(self, params: dict[str, Any]) -> None:
        """A new document in the main frame (not a change within one)."""
        frame = params.get("frame") or {}
        if not frame.get("parentId"):
            self._new_document = True
            self._resync = True

    def _request(self, request: Any) -> None:
        try:
            if request.is_navigation_request() and request.frame == self.page.main_frame:
                self._navigation_seen = True
        except Exception:  # noqa: BLE001 - the frame went
            pass

    def _request_ended(self, request: Any) -> None:
        try:
            if not request.is_navigation_request() or request.frame != self.page.main_frame:
                return
            failed = request.failure is not None
            response = None if failed else request.response()
            if failed or response is None or response.status in (204, 205):
                self._navigation_ended = True  # no new document comes of it
        except Exception:  # noqa: BLE001 - the frame went
            self._navigation_ended = True

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

    # ------------------------------------------------------------------ navigations
    def _follow_navigation(self) -> None:
        """Frames stopped where the page began to navigate away: wait for the new document to
        load (the frames go on there) or for the navigation to come to nothing (they go on
        here): a request that failed, was refused or brought no document, or none at all."""
        started = time.monotonic()
        while not (self._new_document or self._navigation_ended) and self.gone is None:
            waited = time.monotonic() - started
            if waited > self.load_timeout_s or not self._navigation_seen and waited > NO_REQUEST_S:
                break
            self.page.wait_for_timeout(5)  # (the library's events are delivered meanwhile)
        if self._new_document:
            try:
                self.page.wait_for_load_state("load", timeout=self.load_timeout_s * 1000)
            except Exception as exc:  # noqa: BLE001 - it goes on loading under the frames
                log.info("game-bridge browser: the new document did not load in time: %s", _first(exc))
            return
        try:
            self.page.evaluate(_scripts.STAY)
        except Exception as exc:  # noqa: BLE001
            log.debug("game-bridge browser: the document could not be told to go on: %s", _first(exc))

    # ------------------------------------------------------------------ the clock
    def _sync(self) -> None:
        """Read the page's clock (a new document starts its own at 0): the frame grid from there."""
        self.ticks = float(self.page.evaluate(_scripts.TICKS))
        self.k = _scripts.frame_at(self.ticks)
        self._resync = False

    def _run(self, frames: int, look: bool) -> int:
        """Run up to ``frames`` frames in one round trip; the number run (fewer when the page
        began to navigate away: the rest run in the next document)."""
        try:
            if self._resync:
                self._sync()
        except Exception as exc:
            self._failed(exc)
            return 0
        if not self.direct:
            return self._run_whole(frames, look)
        self._new_document = self._navigation_seen = self._navigation_ended = False
        try:
            seen, _error, done, leaving = _scripts.run_answer(self.page.evaluate(_scripts.RUN, [self.k, frames, look]))
        except Exception as exc:
            self._failed(exc)
            destroyed = "context was destroyed" in str(exc) or "navigat" in str(exc).lower()
            return self._frames_before_navigation(frames) if destroyed or self._new_document else 0
        done = max(0, min(int(done), frames))
        self.k += done
        self.ticks = float(_scripts.frame_ms(self.k))
        if seen:
            self._saw(seen)
        if leaving:
            self._follow_navigation()
        self.css.release()
        return done

    def _frames_before_navigation(self, frames: int) -> int:
        """The run's document went away under it (a navigation committed before it could
        answer): how many of its frames were the old document's, as it handed them to the new
        one; the rest run there once it has loaded."""
        self._navigation_seen = True  # (it is under way: wait for it as long as a load may take)
        self._follow_navigation()
        if not self._new_document:
            return 0
        try:
            arrived = self.page.evaluate(_scripts.ARRIVED)
        except Exception:  # noqa: BLE001 - not there yet: none counted
            return 0
        handed = arrived.get("frames") if isinstance(arrived, dict) else None
        return max(0, min(int(handed), frames)) if isinstance(handed, (int, float)) else 0

    def _run_whole(self, frames: int, look: bool) -> int:
        """Without the clock's controller: the library's ``run_for``, all frames at once."""
        target = _scripts.frame_ms(self.k + frames)
        try:
            self.page.clock.run_for(target - self.ticks)
            seen = _scripts.run_answer(self.page.evaluate(_scripts.RUN, [self.k + frames, 0, True]))[0] if look else None
        except Exception as exc:
            self._failed(exc)
            return 0
        self.ticks, self.k = float(target), self.k + frames
        if seen:
            self._saw(seen)
        return frames

    def _saw(self, seen: dict[str, Any]) -> None:
        """What a look saw; what the page's floods left out since the last one, said once."""
        dropped = seen.get("dropped")
        if isinstance(dropped, dict):
            last = self.seen.get("dropped")
            before: dict[str, Any] = last if isinstance(last, dict) and seen.get("url") == self.seen.get("url") else {}
            more = {key: int(dropped.get(key) or 0) - int(before.get(key) or 0) for key in ("console", "errors")}
            if any(value > 0 for value in more.values()):
                self._event("console:dropped", "floods", messages=max(0, more["console"]),
                            errors=max(0, more["errors"]))
            popups = int(dropped.get("popups") or 0) - int(before.get("popups") or 0)
            if popups > 0:
                self._event("popup:refused", "popups", count=popups)
        self.seen = seen

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
        self._check_memory()
        left = count
        stalls = 0
        while left > 0 and self.gone is None:
            done = self._run(left, look)
            left -= done
            now = time.monotonic()
            for _ in range(done):
                self.frames_run += 1
                self._frame_times.append(now)
                self.bridge.end_sim_frame()
                self.schedule.frame_ended()
            stalls = stalls + 1 if done == 0 else 0
            if stalls >= 3:
                break  # the page cannot run frames now (no document): the rest are not owed to it
        if look:
            self._last_look = time.monotonic()

    def idle(self) -> None:
        """Paused and not stepping: look at the page now and then (a page still loads, and
        its events and requests are delivered only while the library is called)."""
        self._check_memory()
        if time.monotonic() - self._last_look >= IDLE_LOOK_S:
            self.look()
            self.css.release()
        else:
            try:
                self.page.wait_for_timeout(1)  # the library's events and the page's requests, meanwhile
            except Exception as exc:  # noqa: BLE001
                self._failed(exc)

    def look(self) -> None:
        try:
            seen = _scripts.run_answer(self.page.evaluate(_scripts.RUN, [self.k, 0, True]))[0]
        except Exception as exc:
            self._failed(exc)
            return
        finally:
            self._last_look = time.monotonic()
        if seen:
            self._saw(seen)

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

    def picture_hash(self, region: tuple[int, int, int, int] | None) -> str:
        """``/screenshot?hash=1``: a hash of what the screenshot would show (of ``region``, in
        its pixels): the canvases' pixels there, or else a screenshot of the region."""
        left, top, width, height = self._box()
        x, y, w, h = region if region is not None else (0, 0, width, height)
        check_region(region, width, height)
        try:
            found = self.page.evaluate(_scripts.PICTURE_HASH, [left + x, top + y, w, h])
        except Exception as exc:
            self._failed(exc)
            found = None
        if isinstance(found, str):
            return "c" + found
        shot = self.cdp.send("Page.captureScreenshot", {
            "format": "png", "fromSurface": True, "captureBeyondViewport": False,
            "clip": {"x": left + x, "y": top + y, "width": w, "height": h, "scale": 1}})
        return "s" + hashlib.blake2b(base64.b64decode(shot["data"]), digest_size=12).hexdigest()

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """``/state`` (HTTP thread): what the driving thread saw last."""
        seen = self.seen
        now = time.monotonic()
        # Held, the page runs no frames of its own: 0 (what it would count, steps a second, is the
        # agent's pace, and would make /state differ from one run of the same steps to the next).
        fps = 0 if self.bridge.paused else sum(1 for t in list(self._frame_times) if now - t <= 1.0)
        doc: dict[str, Any] = {"browser": {
            "title": seen.get("title", ""), "url": seen.get("url", ""), "readyState": seen.get("readyState"),
            "window": dict(zip(("width", "height"), self.window_size() or (0, 0))),
            "viewport": seen.get("viewport"), "canvases": seen.get("canvases", []),
            "screenshot": "canvas" if self.canvas else "page",
            "frames": self.frames_run, "fps": fps, "pageTimeMs": self.ticks, **self.time.state(),
            "animationFrameCallbacks": seen.get("frameCallbacks", 0),
            "consoleErrors": self.counts["consoleErrors"], "consoleWarnings": self.counts["consoleWarnings"],
            "pageErrors": self.counts["pageErrors"], "dialogs": self.counts["dialogs"],
            "navigations": self.counts["navigations"], "downloadsRefused": self.counts["downloads"],
            "dropped": seen.get("dropped") or {},
            "textLength": seen.get("textLength", 0),
            "text": seen.get("pageText", ""), "pageTextLength": seen.get("pageTextLength", 0),
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


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_EVENT_TEXT else text[:MAX_EVENT_TEXT] + "..."
