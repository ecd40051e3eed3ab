"""The page's time and randomness, which are the launch's (docs/design.md, "The browser
wrapper"): ``Date`` starts at the launch's wall-clock time (or the date ``--date`` or
``GAME_BRIDGE_DATE`` gives), ``performance.now`` at 0 when the page's first frame is owed,
``Math.random`` and ``crypto`` from the seed (``--seed`` or ``GAME_BRIDGE_SEED``, 0 when
neither is given). A new document (a navigation, a reload) of the same origin starts where
the page's time is: its ``Date`` goes on from where the last one left (``_scripts``), its
``performance.now`` starts at 0 again (as in any browser), and its random numbers are drawn
from the seed and that moment. CSS animations are held to the page's clock (:class:`CssTime`)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from . import _scripts

log = logging.getLogger(__name__)

#: Animations the DevTools domain reported that are released to it in one call, at most.
MAX_ANIMATIONS = 500


def parse_date(text: str, source: str = "--date") -> int:
    """``text`` as Unix milliseconds: an ISO 8601 date or date and time (without an offset:
    this machine's local time), or a whole number of Unix milliseconds; ValueError says
    what is accepted."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{source} expects an ISO 8601 date (2024-10-31, 2024-10-31T18:30:00, "
                         f"2024-10-31T18:30:00Z) or Unix milliseconds, got {text[:60]!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # this machine's local time, as a page reading its clock sees it
    millis = int(when.timestamp() * 1000)
    if not 0 <= millis <= 8_640_000_000_000_000:
        raise ValueError(f"{source} is outside the dates a page can hold: {text[:60]!r}")
    return millis


def iso(millis: int) -> str:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


class PageTime:
    """The launch's start, seed and the page time of the documents before this one."""

    def __init__(self, page: Any, *, seed: int, start_ms: int | None) -> None:
        self.page = page
        self.seed = seed
        self.start_ms = start_ms if start_ms is not None else int(time.time() * 1000)

    def install(self) -> None:
        """Before the first document: the clock paused at the start, then the page's script
        (which runs after the clock's in every document)."""
        self.page.clock.pause_at(dt.datetime.fromtimestamp(self.start_ms / 1000, dt.timezone.utc))
        self.page.add_init_script(_scripts.init_script(seed=self.seed, start_ms=self.start_ms))

    def state(self) -> dict[str, Any]:
        return {"startDate": iso(self.start_ms), "startMs": self.start_ms, "seed": self.seed}


class CssTime:
    """CSS animations and transitions held to the page's clock: the DevTools ``Animation``
    domain stops the document timeline (its playback rate 0, which holds for every later
    document of the page too), and the page's script moves each animation a frame on per
    frame (``_scripts``). The domain reports every animation and keeps it until released:
    they are released in batches as they come (best effort: a browser without the domain
    leaves CSS animations on wall-clock time)."""

    def __init__(self, cdp: Any) -> None:
        self.cdp = cdp
        self.reported: list[str] = []
        self.available = True
        try:
            cdp.on("Animation.animationCreated", self._reported)
            cdp.send("Animation.enable")
            cdp.send("Animation.setPlaybackRate", {"playbackRate": 0})
        except Exception as exc:  # noqa: BLE001 - the domain is missing: animations stay on wall time
            log.info("game-bridge browser: no DevTools Animation domain (%s); CSS animations run in real time", exc)
            self.available = False

    def _reported(self, params: dict[str, Any]) -> None:
        if params.get("id") is not None:
            self.reported.append(str(params["id"]))

    def release(self) -> None:
        """Let the domain forget the animations it reported (the page still has them)."""
        if not self.reported:
            return
        idents, self.reported = self.reported[:MAX_ANIMATIONS], self.reported[MAX_ANIMATIONS:]
        try:
            self.cdp.send("Animation.releaseAnimations", {"animations": idents})
        except Exception as exc:  # noqa: BLE001
            log.debug("game-bridge browser: releaseAnimations failed: %s", exc)
