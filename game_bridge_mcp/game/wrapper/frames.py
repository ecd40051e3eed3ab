"""When a wrapper's input reaches its engine: at once or before the next frame (``soon``),
and after a number of frames (``after_frames``, a key's release), counted at each frame's
end. Owned by the thread that runs the engine's frames."""

from __future__ import annotations

import logging
from typing import Any, Callable

log = logging.getLogger(__name__)


class Schedule:
    """The input waiting for its moment. ``at_once``: :meth:`soon` runs the action there and
    then (the commands are applied on the engine's own thread, between its frames);
    otherwise :meth:`deliver` runs what waits, once the commands being applied are done."""

    def __init__(self, *, at_once: bool, name: str) -> None:
        self.at_once = at_once
        self.name = name
        self._due: list[list[Any]] = []   # [frames left, action]
        self._soon: list[Callable[[], None]] = []

    def soon(self, action: Callable[[], None]) -> None:
        """Run ``action`` now (``at_once``) or at the next :meth:`deliver`, before the next frame."""
        if self.at_once:
            action()
        else:
            self._soon.append(action)

    def deliver(self, on_error: Callable[[Exception], None]) -> None:
        """Run what :meth:`soon` kept, in order; an action that raises goes to ``on_error``."""
        actions, self._soon = self._soon, []
        for action in actions:
            try:
                action()
            except Exception as exc:
                on_error(exc)

    def after_frames(self, frames: int, action: Callable[[], None]) -> None:
        """Run ``action`` at the end of the ``frames``-th frame from now."""
        self._due.append([int(frames), action])

    def frames_to_due(self, default: int) -> int:
        """Frames until the next action is due (``default`` when none waits): a run of frames
        longer than this would deliver it late."""
        return min((entry[0] for entry in self._due), default=default)

    def let_go(self, release_held: Callable[[], None]) -> None:
        """A step was cut short: what was timed to happen after more frames (a press's
        release, a click's) and ``release_held`` (whatever the devices still hold) run
        before the next frame, as :meth:`soon` does."""
        due, self._due = [entry[1] for entry in self._due], []
        for action in due:
            self.soon(action)
        self.soon(release_held)

    def frame_ended(self) -> None:
        """One frame ended: run the actions due at its end."""
        if not self._due:
            return
        for entry in self._due:
            entry[0] -= 1
        ready = [entry[1] for entry in self._due if entry[0] <= 0]
        self._due = [entry for entry in self._due if entry[0] > 0]
        for action in ready:
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - the engine went; the command already completed or will
                log.warning("game-bridge %s: delayed input failed: %s", self.name, exc)
