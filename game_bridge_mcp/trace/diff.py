"""The replay's verdict as text, for a terminal or a CI log: the step, the call, and each
differing path's recorded and replayed values one under the other."""

from __future__ import annotations

from typing import Iterable

from .replay import DIVERGED, FAILED, NOT_RUN, SAME, SKIPPED, ReplayResult, StepOutcome

MAX_SHOWN = 8


def _where(step: StepOutcome) -> str:
    if step.replay_port is None or step.call.port in (None, step.replay_port):
        return f"port {step.replay_port}"
    return f"port {step.call.port} in the recording, {step.replay_port} now"


def render_step(step: StepOutcome, total: int, *, heading: str = "DIVERGED") -> str:
    lines = [f"{heading} at step {step.call.step} of {total}: {step.call.label()} ({_where(step)})"]
    for diff in step.differences[:MAX_SHOWN]:
        lines.append(f"  {diff.path or '(the whole answer)'}")
        lines.append(f"    recorded: {diff.recorded_text()}")
        lines.append(f"    replayed: {diff.replayed_text()}")
    more = len(step.differences) - MAX_SHOWN
    if more > 0:
        lines.append(f"  ... and {more} more difference(s) at this step (see --report FILE.html)")
    return "\n".join(lines)


def _count(steps: Iterable[StepOutcome], status: str) -> int:
    return sum(1 for s in steps if s.status == status)


def render(result: ReplayResult, *, update: bool = False, ignore_hint: str = "--ignore PATH") -> str:
    """The whole verdict: the divergence (or failure), then a one-line tally. ``ignore_hint``
    is how the reader adds an ignored path where this is shown (the CLI's option by default)."""
    total = len(result.trace.calls)
    out: list[str] = []
    for note in result.notes:
        out.append(f"note: {note}")
    same, skipped, not_run = (_count(result.steps, s) for s in (SAME, SKIPPED, NOT_RUN))
    diverged = result.divergences
    if result.failure is not None and result.failed_step is not None:
        step = result.failed_step
        out.append(f"FAILED at step {step.call.step} of {total}: {step.call.label()} ({_where(step)})")
        out.append("  " + result.failure.render().replace("\n", "\n  "))
        out.append("  The recording had an answer at this step; the replay could not go on.")
    if update:
        for step in diverged:
            out.append(render_step(step, total, heading="UPDATED"))
    elif diverged:
        out.append(render_step(diverged[0], total))
    tally = f"{same} of {same + len(diverged) + _count(result.steps, FAILED) + not_run} replayed calls matched"
    if skipped:
        tally += f"; {skipped} session call(s) (launch, list, describe, stop) are not replayed"
    if not_run:
        tally += f"; {not_run} not run after the {'failure' if result.failure else 'divergence'}"
    out.append(tally + ".")
    if result.failure is None and not diverged:
        out.append("SAME: every replayed answer matches the recording.")
    elif update and result.failure is None:
        out.append(f"Accepted {len(diverged)} changed answer(s) into the new recording.")
    out.append("Ignored paths: " + ", ".join(result.rules.patterns) + f" (add more with {ignore_hint}).")
    return "\n".join(out) + "\n"


__all__ = ["render", "render_step", "DIVERGED"]
