"""Commands that wait for a paused game's clock: answered at once as pending, kept per port,
and listed as delivered by the next ``advance`` (docs/clock.md)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BridgeUsageError
from ..jsonio import as_int
from .outcome import command_outcome

#: The most commands that may wait for one port's clock at once; another is refused
#: before it is sent.
MAX_PENDING = 16
#: The clock's own commands: ``step`` completes only after its frames, which is not a
#: command waiting for the clock but the clock moving.
CLOCK_COMMANDS = frozenset({"pause", "resume", "step"})


@dataclass(frozen=True)
class Waiting:
    """One command answered as pending."""

    command_id: int
    tool: str
    generation: int


class PendingCommands:
    """The commands of one port that wait for its clock. Thread-safe."""

    def __init__(self) -> None:
        self._waiting: list[Waiting] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)

    @property
    def newest_id(self) -> int | None:
        """The newest waiting command's id (None: none waits)."""
        with self._lock:
            return max((w.command_id for w in self._waiting), default=None)

    def check_room(self, port: int, completed: int | None, generation: int) -> None:
        """Refuse another command while :data:`MAX_PENDING` wait (those ``completed``
        already, or of another generation, no longer count)."""
        with self._lock:
            live = [w for w in self._waiting if w.generation == generation
                    and (completed is None or w.command_id > completed)]
            if len(live) < MAX_PENDING:
                return
            shown = ", ".join(f"{w.tool} ({w.command_id})" for w in live[:5])
        raise BridgeUsageError(
            f"{len(live)} commands on port {port} are waiting for the game's clock ({shown}, ...): the game is "
            "paused, so nothing more is sent until they are delivered. Deliver them with call_tool advance "
            "(or let the game run with call_tool resume), then send the next one.",
            port=port, pending=len(live))

    def add(self, command_id: int, tool: str, generation: int) -> None:
        with self._lock:
            self._waiting.append(Waiting(command_id, tool, generation))

    def settle(self, state: Mapping[str, Any], generation: int, *, exclude: int | None = None) -> dict[str, Any]:
        """What an answer whose state is ``state`` says of the waiting commands, which
        are forgotten once delivered: ``delivered`` (each with its outcome),
        ``stillPending``, and a ``pendingNote`` for commands a restart lost. ``exclude``:
        the command this very answer is about."""
        completed = as_int(state.get("completedCommandId"))
        delivered: list[dict[str, Any]] = []
        lost: list[Waiting] = []
        with self._lock:
            keep: list[Waiting] = []
            for waiting in self._waiting:
                if waiting.generation != generation:
                    lost.append(waiting)
                elif completed is not None and waiting.command_id <= completed:
                    delivered.append(_delivered(waiting, state))
                else:
                    keep.append(waiting)
            self._waiting = keep
            still = [{"commandId": w.command_id, "tool": w.tool} for w in keep if w.command_id != exclude]
        out: dict[str, Any] = {}
        if delivered:
            out["delivered"] = delivered
        if still:
            out["stillPending"] = still
        if lost:
            out["pendingNote"] = (
                f"{len(lost)} command(s) that waited for the clock ({', '.join(w.tool for w in lost[:5])}) were "
                "lost: the game restarted before they were delivered. Send them again if they still matter.")
        return out


def _delivered(waiting: Waiting, state: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"commandId": waiting.command_id, "tool": waiting.tool}
    done = command_outcome(state, waiting.command_id)
    entry["ok"] = done.ok is not False
    if done.ok is False:
        entry["error"] = done.reason
    elif done.has_result:
        entry["result"] = done.result
    return entry


def pending_note(port: int, tool: str, command_id: Any, state: Mapping[str, Any], until: str | None) -> str:
    """The note of a command answered as pending: why, and the call that delivers it."""
    note = (f"The game on port {port} is paused (simFrame {state.get('simFrame')}): '{tool}' (commandId "
            f"{command_id}) was queued and is delivered only when its clock moves, so it was not waited "
            "for. call_tool advance delivers it (its answer lists it under delivered); do not send it again.")
    if until is not None:
        note += (f" The until was not waited for either: call_tool {{\"name\": \"advance\", \"arguments\": "
                 f"{{\"until\": {until}}}}} delivers it and waits for the condition.")
    return note


__all__ = ["CLOCK_COMMANDS", "MAX_PENDING", "PendingCommands", "pending_note"]
