"""``check``: an advertised ``clock``: pause holds ``simFrame``, ``step`` runs exactly its
frames, resume, and starting paused; the clock is left as it was found."""

from __future__ import annotations

import time
from typing import Any, Callable

from ..contract import ENV_START_PAUSED, MAX_HOLD_MS
from .base import FAIL, PASS, SKIP, CheckSession, is_int, show_value

#: Frames watched while paused.
PAUSED_FRAMES = 3
STEP_FRAMES = 5


class ClockChecks(CheckSession):
    """pause / step / resume against ``simFrame``, ``paused`` and ``completedCommandId``."""

    def _clock_command(self, cmd: str, args: dict[str, str] | None = None,
                       *, after: bool = False) -> tuple[dict[str, Any] | None, str]:
        """Send and return the first snapshot in which it completed."""
        command_id, problem = self.send(cmd, args)
        if command_id is None:
            return None, problem
        if after:  # held by the game: the snapshot of the very frame it completed in
            wait_ms = min(MAX_HOLD_MS, int(self.timeout_s * 1000))
            doc, problem = self.read(f"/state?after={command_id}&waitMs={wait_ms}", timeout_s=self.timeout_s + 1)
            done = doc.get("completedCommandId") if doc is not None else None
            if doc is not None and is_int(done) and done >= command_id:
                return doc, ""
        return self.completed(command_id)

    def check_clock(self, *, use_after: bool = False) -> None:
        missing = [name for name in ("pause", "resume", "step") if name not in self.known_commands]
        if missing:
            self.report(FAIL, f"clock: advertised, but the game does not list {', '.join(missing)}",
                        "The clock is the commands pause, resume and step {frames}.")
            return
        before, problem = self.read("/state")
        if before is None:
            self.report(FAIL, f"clock: {problem}")
            return
        was_paused = before.get("paused") is True
        try:
            self._pause_step_resume(use_after)
        finally:  # leave the clock as it was found, whatever failed
            self.send("pause" if was_paused else "resume")

    def _pause_step_resume(self, use_after: bool) -> None:
        snap, problem = self._clock_command("pause")
        if snap is None:
            self.report(FAIL, f"clock: pause: {problem}")
            return
        if snap.get("paused") is not True:
            self.report(FAIL, f"clock: after pause completed, /state paused is {show_value(snap.get('paused'))}",
                        "/state.paused is true while the game is paused.")
            return
        start = snap.get("simFrame")
        if not is_int(start):
            self.report(FAIL, f"clock: /state has no whole-number simFrame ({show_value(start)})",
                        "simFrame counts simulated frames: it is how an agent sees that time stands still.")
            return
        advanced, ms = self.wait_frames(PAUSED_FRAMES)
        held, problem = self.read("/state")
        if held is None:
            self.report(FAIL, f"clock: {problem}")
            return
        if advanced < PAUSED_FRAMES:
            self.report(FAIL, f"clock: frame advanced only {advanced} in {ms:.0f} ms while paused",
                        "While paused the game keeps running its loop, answering and counting frame; only the "
                        "simulation stops.")
            return
        if held.get("simFrame") != start:
            self.report(FAIL, f"clock: simFrame ran while paused ({start} -> {show_value(held.get('simFrame'))} "
                              f"over {advanced} frames)",
                        "While paused the simulation does not advance except by step.")
            return
        self.report(PASS, f"clock: pause holds simFrame at {start} over {advanced} frames while frame counts on")
        self._step(int(start), use_after)
        snap, problem = self._clock_command("resume")
        if snap is None:
            self.report(FAIL, f"clock: resume: {problem}")
            return
        if snap.get("paused") is not False:
            self.report(FAIL, f"clock: after resume completed, /state paused is {show_value(snap.get('paused'))}")
            return
        first = snap.get("simFrame")
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            now, _ = self.read("/state")
            if now is not None and is_int(now.get("simFrame")) and is_int(first) and now["simFrame"] > first:
                self.report(PASS, f"clock: resume restarts simFrame ({first} -> {now['simFrame']})")
                return
            time.sleep(0.005)
        self.report(FAIL, f"clock: resume completed but simFrame stayed at {show_value(first)} for "
                          f"{self.timeout_s * 1000:.0f} ms")

    def _step(self, start: int, use_after: bool) -> None:
        snap, problem = self._clock_command("step", {"frames": str(STEP_FRAMES)}, after=use_after)
        if snap is None:
            self.report(FAIL, f"clock: step: {problem}")
            return
        at = snap.get("simFrame")
        if at != start + STEP_FRAMES:
            moved = at - start if is_int(at) else show_value(at)
            self.report(FAIL, f"clock: step {{frames: {STEP_FRAMES}}} completed with simFrame {show_value(at)} "
                              f"({moved} frames from {start}, not {STEP_FRAMES})",
                        "step's completion (completedCommandId reaching its id) is published only after exactly "
                        "its frames have run, so an agent reads the state after them.")
            return
        self.wait_frames(2)
        later, _ = self.read("/state")
        if later is None or later.get("simFrame") != at or later.get("paused") is not True:
            self.report(FAIL, "clock: after step the game did not stay paused "
                              f"(simFrame {show_value(later and later.get('simFrame'))}, paused "
                              f"{show_value(later and later.get('paused'))})")
            return
        self.report(PASS, f"clock: step {{frames: {STEP_FRAMES}}} advances simFrame by exactly {STEP_FRAMES} "
                          f"({start} -> {at}) and completes only then")

    def check_start_paused(self, launch: Callable[[dict[str, str]], Any] | None) -> None:
        """``launch(extra_env)`` starts a second instance and returns ``(port, stop)``."""
        if launch is None:
            self.report(SKIP, "clock: GAME_BRIDGE_START_PAUSED: checked only with --launch")
            return
        try:
            port, stop = launch({ENV_START_PAUSED: "1"})
        except Exception as exc:  # a BridgeError rendered, or an OS error
            render = getattr(exc, "render", None)
            self.report(FAIL, "clock: the game did not start with GAME_BRIDGE_START_PAUSED=1",
                        str(render()) if callable(render) else str(exc))
            return
        base, self.base = self.base, f"http://127.0.0.1:{port}"
        try:
            first, problem = self.read("/state")
            advanced, _ms = self.wait_frames(PAUSED_FRAMES)
            second, problem2 = self.read("/state")
        finally:
            self.base = base
            stop()
        if first is None or second is None:
            self.report(FAIL, f"clock: started paused: {problem or problem2}")
        elif first.get("paused") is not True or second.get("simFrame") != first.get("simFrame"):
            self.report(FAIL, "clock: GAME_BRIDGE_START_PAUSED=1 is not honoured",
                        f"Launched with it, /state said paused {show_value(first.get('paused'))} and simFrame went "
                        f"{show_value(first.get('simFrame'))} -> {show_value(second.get('simFrame'))} over "
                        f"{advanced} frames. A game started with it in its environment starts paused.")
        else:
            self.report(PASS, f"clock: launched with GAME_BRIDGE_START_PAUSED=1 it starts paused "
                              f"(simFrame {first.get('simFrame')} over {advanced} frames)")


__all__ = ["ClockChecks", "PAUSED_FRAMES", "STEP_FRAMES"]
