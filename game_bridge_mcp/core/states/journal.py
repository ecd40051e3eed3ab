"""What the bridge sent a game it launched paused, in order, and at which simulation frame:
the record re-execution replays to bring a fresh instance to the same frame (docs/states.md).

The port's GameClient tells the journal of every command the game accepted
(``GameClient.on_sent``), so a command reaches it whichever tool sent it: a game's own
command, ``advance``'s steps and timed inputs, ``raw_command``. A journal is of one
generation of the game: a restart, a snapshot the bridge did not load or too long a record
ends it, and the reason is kept to be told."""

from __future__ import annotations

import json
import threading
from itertools import islice
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...contract import ENV_DATE, ENV_SEED, SNAPSHOT_COMMANDS

#: What a paused launch fixes in the game's environment, and re-execution repeats: the
#: browser wrapper's start date (its page's ``Date``; digits, Unix milliseconds) and the
#: wrappers' seed (digits). Nothing else is ever taken from a state: a state file cannot set
#: a launched game's environment.
REPEATED_ENV = (ENV_DATE, ENV_SEED)


def repeatable_env(values: Mapping[str, Any]) -> dict[str, str]:
    """The part of ``values`` a launch may repeat (:data:`REPEATED_ENV`, digits only)."""
    return {k: str(v) for k, v in values.items() if k in REPEATED_ENV and isinstance(v, str) and v.isdigit()
            and len(v) <= 16}


#: The most commands one journal keeps (a session of a million single steps is not
#: re-executed: the journal ends, and says so, instead of growing without bound).
MAX_ENTRIES = 200_000
#: The most bytes of arguments one journal keeps.
MAX_ARG_BYTES = 16 * 1024 * 1024
#: Commands replay leaves out: the clock's own pause and resume (a replay stays paused and
#: steps to each frame), ``close``, and ``snapshot``'s (the bridge's saves and loads).
NOT_REPLAYED = frozenset({"pause", "resume", "close", *SNAPSHOT_COMMANDS})


@dataclass(frozen=True)
class Sent:
    """One command the game accepted: its name and arguments, and the simulation frame
    the game was known to be at when it was sent (None: not known yet)."""

    cmd: str
    args: Mapping[str, Any]
    sim_frame: int | None

    def to_json(self) -> list[Any]:
        return [self.sim_frame, self.cmd, dict(self.args)]

    @classmethod
    def from_json(cls, item: Any) -> "Sent":
        """One entry of a state file's journal; ValueError when it is not one."""
        if (not isinstance(item, list) or len(item) != 3 or not isinstance(item[1], str) or not item[1]
                or not isinstance(item[2], dict)
                or not (item[0] is None or (isinstance(item[0], int) and not isinstance(item[0], bool)
                                            and item[0] >= 0))):
            raise ValueError("a journal entry is [simFrame, command, {arguments}]")
        return cls(item[1], item[2], item[0])


class Journal:
    """The commands of one launched paused instance, since its launch (or since the state
    it was restored to, whose journal it continues). Thread-safe; the GameClient's
    ``on_sent`` is :meth:`record`."""

    def __init__(self, generation: int, entries: Sequence[Sent] = (), *, free_since: int | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        #: The GameClient generation it records (a restart ends it).
        self.generation = generation
        if isinstance(entries, Prefix):  # another journal's record: its size is known
            self._entries: list[Sent] = entries.copy()
            self._arg_bytes = entries.arg_bytes
        else:
            self._entries = list(entries)
            self._arg_bytes = sum(_size(e.args) for e in self._entries)
        self._lock = threading.Lock()
        #: Why it can no longer bring a new instance here (None: it can).
        self.ended: str | None = None
        #: The simulation frame from which the game ran on its own clock (``resume``), if it did:
        #: what it did then depended on time, so re-execution may not come out the same.
        self.free_since: int | None = free_since
        #: What the launch set in the game's environment that a re-execution must set alike
        #: (:data:`REPEATED_ENV`: the browser wrapper's start date).
        self.env: dict[str, str] = dict(env or {})

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def record(self, cmd: str, args: dict[str, Any], sim_frame: int | None, _command_id: int | None) -> None:
        with self._lock:
            if self.ended is not None:
                return
            if cmd == "resume" and self.free_since is None:
                self.free_since = sim_frame if sim_frame is not None else -1
            if cmd in SNAPSHOT_COMMANDS and cmd != "snapshot_save" and cmd != "snapshot_drop":
                # A load the bridge makes replaces this journal with the state's (core/saving.py);
                # one sent any other way leaves the game where no record leads.
                self.ended = "the game loaded a snapshot the bridge did not make"
                return
            size = _size(args)
            if len(self._entries) >= MAX_ENTRIES or self._arg_bytes + size > MAX_ARG_BYTES:
                self.ended = (f"the session sent more than {MAX_ENTRIES:,} commands (or {MAX_ARG_BYTES // 2**20} MiB "
                              "of arguments), more than re-execution replays")
                return
            self._entries.append(Sent(cmd, dict(args), sim_frame))
            self._arg_bytes += size

    def end(self, reason: str) -> None:
        with self._lock:
            if self.ended is None:
                self.ended = reason

    def entries(self) -> "Prefix":
        """What was recorded so far, as it stays: later commands do not change it (the
        record is only ever appended to, so a state shares it rather than copying it)."""
        with self._lock:
            return Prefix(self._entries, len(self._entries), self._arg_bytes)


class Prefix(Sequence[Sent]):
    """The first ``length`` entries of an append-only list, without a copy, and the size
    of their arguments (a journal that continues them does not measure them again: a
    restore would, every entry, every time)."""

    def __init__(self, entries: list[Sent], length: int, arg_bytes: int) -> None:
        self._entries = entries
        self._length = length
        #: The JSON size of their arguments, as :class:`Journal` counts it.
        self.arg_bytes = arg_bytes

    def copy(self) -> list[Sent]:
        return self._entries[:self._length]

    def __iter__(self) -> Iterator[Sent]:
        return islice(self._entries, self._length)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._entries[i] for i in range(*index.indices(self._length))]
        if not -self._length <= index < self._length:
            raise IndexError(index)
        return self._entries[index % self._length]


def _size(args: Mapping[str, Any]) -> int:
    try:
        return len(json.dumps(args, default=str))
    except (TypeError, ValueError):
        return 64


__all__ = ["Journal", "MAX_ENTRIES", "NOT_REPLAYED", "Prefix", "REPEATED_ENV", "Sent", "repeatable_env"]
