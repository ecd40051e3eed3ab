"""``check``: an advertised ``screenshot``: a real, fresh image that fits what was asked, read
with the bridge's own :func:`~game_bridge_mcp.wire.images.inspect_image`."""

from __future__ import annotations

import re
import time
from typing import Any

from ..wire.images import ImageInfo, ImageProblem, inspect_image
from ..jsonio import decode_json
from ..wire.transport import HttpResponse, TransportError
from .base import FAIL, PASS, WARN, CheckSession, show_value

#: The limits asked for: one a game at any common size must scale down for, and a small one.
ASKS = ((320, 240), (64, 64))
#: A body over this is reported rather than read (the bridge's own cap is of this order).
SCREENSHOT_MAX_BYTES = 32 * 1024 * 1024
_WINDOW = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


class ScreenshotChecks(CheckSession):
    """``GET /screenshot?maxWidth=&maxHeight=``: type, signature, size, freshness, 503."""

    def _shot(self, max_w: int, max_h: int) -> tuple[HttpResponse | None, float, int | None, str]:
        before = self.frame_now()
        started = time.monotonic()
        try:
            response = self.get(f"/screenshot?maxWidth={max_w}&maxHeight={max_h}", max_bytes=SCREENSHOT_MAX_BYTES)
        except TransportError as exc:
            what = {"timeout": f"no answer within {self.timeout_s * 1000:.0f} ms",
                    "too-large": f"the image is over {SCREENSHOT_MAX_BYTES // (1024 * 1024)} MB ({exc.detail})"}
            return None, 0.0, before, what.get(exc.kind, f"{exc.kind}: {exc.detail}")
        return response, (time.monotonic() - started) * 1000, before, ""

    def check_screenshot(self, *, with_input: bool = False) -> None:
        shots: list[ImageInfo] = []
        for max_w, max_h in ASKS:
            query = f"GET /screenshot?maxWidth={max_w}&maxHeight={max_h}"
            response, ms, before, problem = self._shot(max_w, max_h)
            if response is None:
                self.report(FAIL, f"screenshot: {query}: {problem}",
                            "Answer with the image rendered at the next frame (or 503 when the game cannot render).")
                return
            if response.status == 503:
                self._unavailable(query, response)
                return
            if response.status != 200:
                self.report(FAIL, f"screenshot: {query} answered HTTP {response.status}",
                            f"It answered {show_value(response.body[:200].decode('latin-1'))}.")
                return
            try:
                info = inspect_image(response.body, response.headers.get("content-type"))
            except ImageProblem as exc:
                self.report(FAIL, f"screenshot: {query}: {exc}",
                            "Answer 200, Content-Type image/png or image/jpeg, and the whole image as the body.")
                return
            problems = self._headers(response, before, with_input)
            if info.width > max_w or info.height > max_h:
                problems.insert(0, f"the image is {info.width}x{info.height}, larger than the {max_w}x{max_h} asked "
                                   "for: scale it down (never up) to fit, keeping the aspect ratio")
            if problems:
                self.report(FAIL, f"screenshot: {query}: {problems[0]}", *problems[1:])
                return
            shots.append(info)
            self.report(PASS, f"screenshot: {query}: {info.format.upper()} {info.width}x{info.height}, "
                              f"{len(response.body):,} bytes, frame {response.headers.get('x-game-frame')} "
                              f"(not older than frame {before} read before it), {ms:.0f} ms")
        big, small = shots
        if abs(small.width * big.height - small.height * big.width) > big.width + big.height:
            self.report(WARN, f"screenshot: the aspect ratio changes with the limits ({big.width}x{big.height} at "
                              f"{ASKS[0][0]}x{ASKS[0][1]}, {small.width}x{small.height} at {ASKS[1][0]}x{ASKS[1][1]})",
                        "Scale to fit keeping the aspect ratio, so points in the image map back to the window.")

    def _headers(self, response: HttpResponse, before: int | None, with_input: bool) -> list[str]:
        problems: list[str] = []
        frame = response.headers.get("x-game-frame")
        number = int(frame) if frame is not None and frame.strip().isdigit() else None
        if number is None:
            problems.append(f"X-Game-Frame is {show_value(frame)}, not the whole frame number the image shows")
        elif before is not None and number < before:
            problems.append(f"X-Game-Frame {number} is older than frame {before}, read before the request: the image "
                            "is stale. Render it at the next frame after the request arrives")
        window = response.headers.get("x-game-window")
        if window is not None and not _WINDOW.match(window):
            problems.append(f"X-Game-Window is {show_value(window)}, not <width>x<height>")
        elif window is None and with_input:
            problems.append("no X-Game-Window header: a game with input and screenshot says its window size "
                            "(the pixels mouse uses) so points in a scaled image map back")
        return problems

    def _unavailable(self, query: str, response: HttpResponse) -> None:
        doc: Any = None
        try:
            doc = decode_json(response.body, strict=True)
        except ValueError:
            pass
        if isinstance(doc, dict) and doc.get("ok") is False and isinstance(doc.get("error"), str):
            self.report(WARN, f"screenshot: the game cannot render now (503: {show_value(doc['error'], 120)})",
                        "The 503 has the right shape; the image checks were not run. Check it where it renders.")
            return
        self.report(FAIL, f"screenshot: {query} answered 503 without {{\"ok\": false, \"error\": ...}}",
                    f"It answered {show_value(response.body[:200].decode('latin-1'))}. The agent sees the game's "
                    "reason only when it is there.")


__all__ = ["ASKS", "SCREENSHOT_MAX_BYTES", "ScreenshotChecks"]
