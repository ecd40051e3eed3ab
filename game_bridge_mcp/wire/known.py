""":class:`Known`: what one generation of a port's answers taught (advertised and broken
extensions, what ``/health`` carries, the last ``completedCommandId`` and ``paused``, what
requests cost). The GameClient is its one writer; the confirmation strategies read it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..contract import VIEW_FEATURE
from ..jsonio import as_int

log = logging.getLogger(__name__)


def counter(value: Any) -> int | None:
    """A counter the game reports (``frame``, ``commandId``, ``completedCommandId``): a
    whole number from 0 to 2**53, else None (unknown), so an absurd one (``1e400``, a
    400-digit number, -5) is never arithmetic's problem or a port's for good."""
    return as_int(value, minimum=0)


@dataclass(frozen=True, slots=True)
class Look:
    """One ``/state`` answer's counters, all of them there: its loop ``frame``, ``simFrame``,
    ``paused`` and ``completedCommandId`` (every command up to it had run when it was made)."""

    frame: int
    sim_frame: int
    paused: bool
    completed_id: int

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> "Look | None":
        frame, sim_frame = counter(doc.get("frame")), counter(doc.get("simFrame"))
        completed, paused = counter(doc.get("completedCommandId")), doc.get("paused")
        if frame is None or sim_frame is None or completed is None or not isinstance(paused, bool):
            return None
        return cls(frame, sim_frame, paused, completed)


class Known:
    """What is known of one port's game in this generation (see the module docstring)."""

    def __init__(self, port: int) -> None:
        self.port = port
        #: Which generation of the game this is: one more at each :meth:`reset`.
        self.generation = 0
        self._forget()

    def reset(self) -> None:
        """Forget it all and start a new generation: another process answers (or may
        answer) on the port now."""
        self._forget()
        self.generation += 1

    def _forget(self) -> None:
        #: Does /health carry completedCommandId? (None: not asked yet.)
        self.health_has_completed_id: bool | None = None
        #: The completedCommandId of the newest answer that carried one (None: unknown): a
        #: command whose commandId is not above it cannot be confirmed by its id.
        self.completed_id: int | None = None
        #: ``paused`` in the newest answer that carried it (None: unknown): a command on a
        #: paused game with ``clock`` may wait for its clock (see wire/confirm.py).
        self.paused: bool | None = None
        #: ``simFrame`` in the newest answer that carried it (None: unknown).
        self.sim_frame: int | None = None
        #: The newest ``/state`` answer with all of :class:`Look`'s counters (None: none yet).
        self.look: Look | None = None
        #: The newest ``commandId`` the game gave this client for a command (None: none yet).
        self.sent_id: int | None = None
        #: Commands this client did not send ran between two of its looks (or the game's ids
        #: skip): what it last saw cannot stand for what is there now (core/clock.py).
        self.others_command = False
        #: ``snapshot``: ``/health``'s ``snapshotMaxBytes`` (None: not said, the contract's default).
        self.snapshot_max_bytes: int | None = None
        #: What the last /state, /state?view=digest and /health cost (seconds).
        self.state_cost_s = 0.0
        self.digest_cost_s = 0.0
        self.health_cost_s = 0.0
        #: Does it apply commands between frames (so a frame need not be waited for)?
        self.applies_between_frames = False
        #: The extensions the game advertises in ``/health`` ``features`` (docs/contract.md),
        #: learned from every /health answer; None until one has been read.
        self.features: frozenset[str] | None = None
        #: Advertised extensions the game was caught breaking (an ``after`` answered early
        #: without the command, a digest without ``completedCommandId``): not used again
        #: until the game restarts. See :meth:`uses`.
        self.broken_features: set[str] = set()

    def has_feature(self, name: str) -> bool:
        """Whether the game advertised ``name`` in the last ``/health`` read."""
        features = self.features
        return features is not None and name in features

    def uses(self, name: str) -> bool:
        """Whether the bridge may rely on extension ``name`` with this game: advertised,
        and not caught broken since the game started. The only gate for sending a
        parameter an extension defines (a game is never sent one it did not advertise)."""
        return self.has_feature(name) and name not in self.broken_features

    def broken(self, name: str, why: str) -> None:
        """The game advertises ``name`` but ``why``: not used again until it restarts."""
        if name not in self.broken_features:
            log.warning("port %s advertises %r but %s; not using it until the game restarts", self.port, name, why)
            self.broken_features.add(name)

    def saw(self, doc: Mapping[str, Any]) -> None:
        """A ``/state`` answer: the newest :class:`Look` when it is one and not older than
        the one kept (answers on other threads may arrive out of order)."""
        look = Look.of(doc)
        kept = self.look
        if look is not None and (kept is None or (look.frame, look.completed_id) >= (kept.frame, kept.completed_id)):
            self.look = look

    def paused_look(self) -> Look | None:
        """The newest look, when it can stand for the game now as far as this client knows:
        the game was paused in it, every command this client sent had run by then, and no
        command of another client was caught running since an earlier one. Whether another
        client's command ran since is for the caller to read in its own command's id (the
        look's ``completed_id`` + 1: none did)."""
        look = self.look
        if (look is None or not look.paused or self.others_command
                or (self.sent_id is not None and self.sent_id > look.completed_id)):
            return None
        return look

    def sent(self, command_id: int | None) -> None:
        """The game accepted a command from this client as ``command_id``."""
        if command_id is not None and (self.sent_id is None or command_id > self.sent_id):
            self.sent_id = command_id

    def poll_cost(self, digest: bool = False) -> float:
        """What the last ``/state`` of the kind ``state(digest=digest)`` asks cost (seconds)."""
        return self.digest_cost_s if digest and self.uses(VIEW_FEATURE) else self.state_cost_s


__all__ = ["Known", "Look", "counter"]
