""":class:`FrameClock`: when a game's next frame starts, learned from the frames its answers
report, so a confirmation is asked for just after it (docs/design.md, "Learning a game's
frames"). Pure and thread-safe."""

from __future__ import annotations

import threading
from typing import NamedTuple

#: A transition bracketed more loosely than this fraction of a period does not anchor.
ANCHOR_WIDTH_FRACTION = 0.5
#: Before the period is known, brackets up to this wide (seconds) may anchor.
ANCHOR_WIDTH_UNKNOWN_S = 0.002
#: A period sample is used only when its error is at most this fraction of it.
PERIOD_ERROR_FRACTION = 0.1
#: Anchors kept for the fit.
MAX_ANCHORS = 16
#: Coarse period: answers at least this far apart (seconds) and two frames apart.
COARSE_SPAN_S = 0.25
#: How many recent confirmations' lateness is kept (see FrameClock.note_applied).
MAX_LATENESS = 32
#: The share of recent confirmations that saw their command applied within the window.
LATENESS_QUANTILE = 0.8
#: A prediction may miss a hard fact by this much (seconds, or fraction of a period)
#: before the anchor is dropped: games' loops jitter.
TOLERANCE_S = 0.0002
TOLERANCE_FRACTION = 0.05


class _Seen(NamedTuple):
    """An answer that reported ``frame``, asked at ``sent`` and in at ``received`` (one is
    made for every answer: a named tuple is the cheapest record to make)."""

    frame: int
    sent: float
    received: float

    @property
    def middle(self) -> float:
        return (self.sent + self.received) / 2


class FrameClock:
    """Predicts frame starts for one game instance (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._period: float | None = None
        self._period_is_fine = False
        self._last: _Seen | None = None
        #: Recent narrow transitions (frame, start, bracket width) on one steady line.
        self._anchors: list[tuple[int, float, float]] = []
        #: The fitted line: a frame and when it started (with the period).
        self._line: tuple[int, float] | None = None
        #: False from an answer that contradicts the line until a new anchor is on it.
        self._trusted = False
        self._coarse: _Seen | None = None  # the first answer of this run (coarse period)
        #: How long after a predicted frame start recent commands were seen applied (s).
        self._lateness: list[float] = []

    def reset(self) -> None:
        """Forget everything (a new process on the port)."""
        with self._lock:
            self._forget()
            self._last = None

    @property
    def period_s(self) -> float | None:
        """The learned time between frames, or None."""
        return self._period

    @property
    def predictable(self) -> bool:
        """Whether :meth:`next_frame_at` currently predicts anything."""
        return self._trusted and self._line is not None and self._period is not None

    @property
    def last_frame(self) -> int | None:
        """The newest frame any answer reported."""
        last = self._last
        return None if last is None else last.frame

    def observe(self, frame: int, sent: float, received: float) -> bool:
        """An answer reported ``frame``; the request was sent at ``sent`` and its answer
        arrived at ``received`` (the caller's clock). True when the frame went backwards
        in an answer asked for after a newer frame was seen: a new process on the port."""
        if received < sent:
            sent, received = received, sent
        seen = _Seen(int(frame), sent, received)
        with self._lock:
            last = self._last
            if last is not None and seen.frame < last.frame:
                if seen.sent >= last.received:
                    self._forget()  # asked after a newer frame was seen: a new process
                    self._last = self._coarse = seen
                    return True
                return False  # an answer overtaken by a newer one (another thread): nothing to learn
            self._check(seen)
            if last is not None and seen.frame == last.frame + 1 and seen.sent >= last.sent:
                self._transition(seen.frame, last.middle, seen.middle)
            self._learn_coarse(seen)
            if last is None or seen.received >= last.received:
                self._last = seen
            return False

    def note_applied(self, predicted_start: float, seen_by: float) -> None:
        """A command expected at the frame predicted to start at ``predicted_start`` was
        first seen applied in an answer received at ``seen_by``: how late the game
        applies commands after a predicted start (its loop's wake-up, a frame that runs
        long, a lock held by a request), learned for :meth:`apply_window`."""
        period = self._period
        if period is None:
            return
        late = min(max(0.0, seen_by - predicted_start), period)
        with self._lock:
            self._lateness.append(late)
            if len(self._lateness) > MAX_LATENESS:
                del self._lateness[0]

    def apply_window(self, default_s: float) -> float:
        """How long after a predicted frame start a command is applied in most recent
        confirmations (:data:`LATENESS_QUANTILE` of them), at least ``default_s`` and at
        most a quarter of a frame; ``default_s`` until a few have been seen."""
        period = self._period
        with self._lock:
            samples = sorted(self._lateness)
        if len(samples) < 4 or period is None:
            return default_s
        learned = samples[min(len(samples) - 1, int(LATENESS_QUANTILE * len(samples)))]
        return min(max(default_s, learned), period / 4)

    def next_frame_at(self, frame: int) -> float | None:
        """When frame ``frame + 1`` is predicted to start, or None when unknown."""
        with self._lock:
            return self._predict(frame + 1) if self._trusted else None

    # ------------------------------------------------------------------ learning
    def _predict(self, frame: int) -> float | None:
        if self._line is None or self._period is None:
            return None
        line_frame, start = self._line
        return start + (frame - line_frame) * self._period

    def _forget(self) -> None:
        self._lateness = []
        self._period = None
        self._period_is_fine = False
        self._anchors = []
        self._line = None
        self._trusted = False
        self._coarse = None

    def _tolerance(self) -> float:
        return max(TOLERANCE_S, TOLERANCE_FRACTION * (self._period or 0.0))

    def _check(self, seen: _Seen) -> None:
        """Stop predicting when the line contradicts what this answer proves."""
        starts = self._predict(seen.frame)
        if not self._trusted or starts is None or self._period is None:
            return
        tolerance = self._tolerance()
        # seen.frame had started before the answer came back; the next had not when it was asked.
        if starts > seen.received + tolerance or starts + self._period < seen.sent - tolerance:
            self._trusted = False

    def _transition(self, frame: int, before: float, after: float) -> None:
        width = after - before
        limit = ANCHOR_WIDTH_UNKNOWN_S if self._period is None else ANCHOR_WIDTH_FRACTION * self._period
        if width > limit:
            return
        start = (before + after) / 2
        anchors = self._anchors
        expected = self._predict(frame)
        if anchors and (frame <= anchors[-1][0] or (
                len(anchors) >= 2 and expected is not None
                and abs(start - expected) > max(self._tolerance(), width + anchors[-1][2]))):
            # Off the fitted line: the loop stalled or changed rate. A new line starts
            # here (with the old period until the next anchor gives a new one).
            anchors.clear()
        anchors.append((frame, start, width))
        if len(anchors) > MAX_ANCHORS:
            del anchors[1]  # keep the oldest: the longer the line, the more precise its period
        self._fit()
        self._trusted = self._line is not None and self._period is not None

    def _fit(self) -> None:
        """The line through the anchors (least squares): the period and an origin."""
        anchors = self._anchors
        frame, start, _width = anchors[-1]
        if len(anchors) < 2:
            self._line = (frame, start)
            return
        # Frames and starts counted from the first anchor: exact whatever the game's frame
        # numbers are (a float mean of numbers near 2**53 would lose the differences that
        # matter), and small numbers to sum. One pass: this runs for most answers.
        origin, first_start, _ = anchors[0]
        count = len(anchors)
        sum_x = sum_y = sum_xx = sum_xy = widest = 0.0
        for anchor_frame, anchor_start, anchor_width in anchors:
            x = anchor_frame - origin
            y = anchor_start - first_start
            sum_x += x
            sum_y += y
            sum_xx += x * x
            sum_xy += x * y
            if anchor_width > widest:
                widest = anchor_width
        mean_frame = sum_x / count
        spread = sum_xx - sum_x * mean_frame
        frames = anchors[-1][0] - origin
        if spread <= 0 or frames <= 0:
            self._line = (frame, start)
            return
        slope = (sum_xy - sum_x * sum_y / count) / spread
        error = widest / frames
        if slope > 0 and error <= PERIOD_ERROR_FRACTION * slope:
            mean_start = first_start + sum_y / count
            self._period = slope
            self._period_is_fine = True
            self._line = (origin + int(round(mean_frame)), mean_start + (round(mean_frame) - mean_frame) * slope)
        else:
            self._line = (frame, start)

    def _learn_coarse(self, seen: _Seen) -> None:
        if self._period_is_fine:
            return
        first = self._coarse
        if first is None:
            self._coarse = seen
            return
        frames = seen.frame - first.frame
        span = seen.middle - first.middle
        if frames >= 2 and span >= COARSE_SPAN_S:
            self._period = span / frames  # the span keeps growing: the estimate keeps improving
