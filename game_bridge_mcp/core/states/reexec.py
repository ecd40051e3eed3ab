"""Re-execution: a game launched paused is brought to a saved frame by sending it, in order,
what its journal says was sent, each at the simulation frame it was sent at, stepping the
clock in between (docs/states.md). Then what it shows is compared with what was saved:
``exact``, or what differed."""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Mapping, Sequence
from typing import Any

from ... import polling
from ...contract import MAX_STEP_FRAMES, SCREENSHOT_FEATURE
from ...errors import BridgeError, CommandFailed, CommandRejected, CommandTimeout, NotAGameSurface
from ...jsonio import as_int
from ...polling import Deadline, poll_until
from ...wire.client import GameClient
from .journal import NOT_REPLAYED, Sent
from .store import Seen, comparable

#: How long one step may take beyond the command timeout, per frame.
STEP_ALLOWANCE_S = 0.05
#: The screenshot a state keeps the SHA-256 of (get_screenshot's default size).
SHOT_SIDE = 768
#: The most differing paths an answer names.
MAX_DIFFERENCES = 8


def sim_frame_of(state: Mapping[str, Any], client: GameClient) -> int:
    frame = as_int(state.get("simFrame"), minimum=0)
    if frame is None:
        raise NotAGameSurface(client.port, "advertises clock but its /state has no simFrame, which "
                              "re-execution counts frames by", path="/state")
    return frame


def step(client: GameClient, frames: int, at: int, *, timeout_ms: int) -> int:
    """Step a paused game ``frames`` frames from simulation frame ``at``: in steps of at most
    :data:`~game_bridge_mcp.contract.MAX_STEP_FRAMES` (what a game's ``step`` takes; a stretch
    the game ran on its own clock can be longer), each waited on. Returns the new frame."""
    target = at + frames
    while at < target:
        polling.check_cancelled()
        if target - at > MAX_STEP_FRAMES:
            polling.report_progress(at, target, f"re-executing: stepping to simFrame {target} (at {at})")
        at = _step_once(client, min(target - at, MAX_STEP_FRAMES), at, timeout_ms=timeout_ms)
    return at


def _step_once(client: GameClient, frames: int, at: int, *, timeout_ms: int) -> int:
    """One ``step`` of ``frames`` (at most MAX_STEP_FRAMES) and wait until the game's
    ``simFrame`` shows them run (a step's own completion may wait behind an input that is
    still held, so the frame is what is waited on)."""
    target = at + frames
    client.command("step", {"frames": frames}, timeout_ms=timeout_ms)
    deadline = Deadline(timeout_ms / 1000 + frames * STEP_ALLOWANCE_S)

    def reached() -> int | None:
        health = client.health(timeout_ms=deadline.remaining_ms())
        frame = as_int(health.get("simFrame"), minimum=0)
        if frame is None:
            frame = sim_frame_of(client.state(digest=True, timeout_ms=deadline.remaining_ms()), client)
        if frame > target:
            raise NotAGameSurface(client.port, f"advertises clock but a step of {frames} from simFrame {at} ran "
                                  f"to {frame}: its simulation runs on while paused, so nothing can be "
                                  "replayed on it", path="/command")
        return frame if frame == target else None

    done = poll_until(reached, deadline, first_s=0.0002, growth=2, max_s=0.01)
    if done is None:
        raise CommandTimeout(client.port, "step", timeout_ms, message=(
            f"Re-execution stepped the game on port {client.port} {frames} frames from simFrame {at}, but its "
            f"simFrame did not reach {target} in time: the game is stuck or far slower than when it was saved."))
    return done


def replay(client: GameClient, entries: Sequence[Sent], until: int | None, *, timeout_ms: int) -> dict[str, Any]:
    """Send ``entries`` to the paused game on ``client`` as they were sent, then step it to
    simulation frame ``until``; the state then. A command the game refuses now as it did
    then is replayed as it was (its refusal is part of the session)."""
    state = client.state()
    at = sim_frame_of(state, client)
    for index, entry in enumerate(entries):
        polling.check_cancelled()
        if index % 50 == 0:
            polling.report_progress(index, len(entries), f"re-executing: command {index + 1} of {len(entries)}")
        if entry.cmd in NOT_REPLAYED:
            continue
        if entry.sim_frame is not None and entry.sim_frame > at:  # it ran on its own clock then
            at = step(client, entry.sim_frame - at, at, timeout_ms=timeout_ms)
        if entry.cmd == "step":
            frames = ran(entries, index, as_int(entry.args.get("frames", 1), minimum=1) or 1, at, until)
            if frames:
                at = step(client, frames, at, timeout_ms=timeout_ms)
            continue
        try:
            client.command_and_sync(entry.cmd, entry.args, timeout_ms=timeout_ms, pending_ok=True, digest=True)
        except (CommandRejected, CommandFailed):
            continue  # refused then too, or the game says why now: the comparison will tell
    if until is not None and until > at:
        at = step(client, until - at, at, timeout_ms=timeout_ms)
    return client.state()


def ran(entries: Sequence[Sent], index: int, frames: int, at: int, until: int | None) -> int:
    """How many of the ``frames`` of the step ``entries[index]`` (from simulation frame ``at``)
    ran: all of them, unless a ``pause`` was sent before it ended (a cancelled advance sends
    one), which ends a running step where it is: then as far as the frame the game was next
    known to be at (the next command's, or the state's ``until``), a step that ran to its end
    being known past it. A pause sent once the step was seen done changes nothing."""
    if index + 1 >= len(entries) or entries[index + 1].cmd != "pause":
        return frames
    sent_at = entries[index + 1].sim_frame
    if sent_at is not None and sent_at >= at + frames:
        return frames
    bound = until
    for later in range(index + 2, len(entries)):
        if entries[later].cmd != "pause" and entries[later].sim_frame is not None:
            bound = entries[later].sim_frame
            break
    return frames if bound is None else max(0, min(frames, bound - at))


def screenshot_sha(client: GameClient, *, timeout_ms: int | None = None) -> str | None:
    """The SHA-256 of the game's screenshot at the default size, None when it serves none
    or cannot now."""
    if not client.has_feature(SCREENSHOT_FEATURE):
        return None
    try:
        shot = client.screenshot(SHOT_SIDE, SHOT_SIDE, timeout_ms=timeout_ms)
    except BridgeError:
        return None
    return hashlib.sha256(shot.body).hexdigest()


def compare(saved: Seen, state: Mapping[str, Any], shot: str | None) -> tuple[bool, list[str]]:
    """Whether ``state`` (and ``shot``) are what ``saved`` recorded; the paths that differ."""
    differed: list[str] = []
    # The same document has the same SHA-256: known without making its canonical JSON.
    same = saved.state is not None and identical(comparable(state), saved.state)
    now = None if same else Seen.of(state, shot)
    if now is not None and now.sha256 != saved.sha256:
        if saved.state is not None and now.state is not None:
            differed = differences(saved.state, now.state)
        differed = differed or ["state (too large to keep whole: its SHA-256 differs)"]
    if saved.screenshot is not None and shot != saved.screenshot:
        differed.append("screenshot" if shot is not None else "screenshot (none could be taken now)")
    return not differed, differed


def identical(doc: Any, other: Any) -> bool:
    """Whether two JSON documents are the same to the letter: every value of the same type
    (1, 1.0 and true are not), every object's keys in the same order. Then their canonical
    JSON, and so their SHA-256, are the same too; False says nothing (keys in another
    order, or a document marshal cannot write: the SHA-256 decides). marshal's format 2
    writes no back-references, so the same document is always the same bytes; it costs a
    fifth of the canonical JSON (a restore of the demo compares its whole state)."""
    try:
        return marshal.dumps(doc, 2) == marshal.dumps(other, 2)
    except ValueError:  # nested too deep, or not plain data
        return False


def differences(before: Any, after: Any, path: str = "", out: list[str] | None = None) -> list[str]:
    """Dotted paths where ``after`` differs from ``before`` (at most :data:`MAX_DIFFERENCES`),
    each with the two values when they are short."""
    out = [] if out is None else out
    if len(out) >= MAX_DIFFERENCES:
        return out
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            differences(before.get(key, _MISSING), after.get(key, _MISSING), f"{path}.{key}" if path else str(key), out)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (a, b) in enumerate(zip(before, after)):
            differences(a, b, f"{path}.{index}" if path else str(index), out)
        return out
    if before != after or type(before) is not type(after):
        if len(out) < MAX_DIFFERENCES:
            out.append(f"{path or '(root)'}: {_short(before)} -> {_short(after)}")
    return out


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


_MISSING = _Missing()


def _short(value: Any) -> str:
    if isinstance(value, _Missing):
        return "(absent)"
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["MAX_DIFFERENCES", "SHOT_SIDE", "compare", "differences", "ran", "replay", "screenshot_sha", "step"]
