"""The commands a game accepts: the table behind ``/tools``, and the queue behind ``/command``
that the game thread drains in order, both derived from the same registered
:class:`~.args.CommandSpec`."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import queue
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any, Callable

from .args import ArgumentError, CommandSpec, check_name, convert_query, spec_from_function
from .outcomes import Outcomes, Pending, error_text, failure, success
from ...contract import CMD, PROTOCOL

log = logging.getLogger(__name__)



def builtin_specs() -> list[CommandSpec]:
    """``close`` and ``noop``, which every kit game accepts (unlisted)."""

    def close() -> None:
        """Shut the game down through its normal teardown."""

    def noop() -> None:
        """Do nothing; completes on the next frame (for checks and latency probes)."""

    return [spec_from_function(builtin, toolset=None, listed=False) for builtin in (close, noop)]


class CommandTable:
    """The registered commands and toolset descriptions, and the manifest built from them."""

    def __init__(self, toolsets: Mapping[str, str] | None = None) -> None:
        self._specs: dict[str, CommandSpec] = {}
        self._toolset_text: dict[str, str] = dict(toolsets or {})
        self._lock = threading.Lock()

    def add(self, spec: CommandSpec) -> None:
        with self._lock:
            self._specs[spec.name] = spec

    def get(self, name: str) -> CommandSpec | None:
        with self._lock:
            return self._specs.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._specs)

    def functions(self) -> list[Any]:
        """The game's command functions (not the kit's own), in registration order."""
        with self._lock:
            return [spec.func for spec in self._specs.values()
                    if not getattr(spec.func, "__module__", "").startswith("game_bridge_mcp.game.kit")]

    def describe(self, name: str, description: str, *, replace: bool = True) -> None:
        check_name(name, "Toolset name")
        if replace or name not in self._toolset_text:
            self._toolset_text[name] = str(description)

    def manifest(self, game: dict[str, Any], passthrough: Mapping[str, Any] | None,
                 last: tuple[str, ...] = ()) -> dict[str, Any]:
        """The ``/tools`` document for ``game`` (its ``{name, version, ...}``); toolsets
        in the order their first command was registered, those named in ``last`` last."""
        with self._lock:
            specs = list(self._specs.values())
        toolsets: dict[str, list[CommandSpec]] = {}
        for spec in specs:
            if spec.listed and spec.toolset is not None:
                toolsets.setdefault(spec.toolset, []).append(spec)
        for name in last:
            if name in toolsets:
                toolsets[name] = toolsets.pop(name)
        unlisted = sorted(spec.name for spec in specs if not spec.listed)
        return {
            "game": {**game, "protocol": PROTOCOL},
            "toolsets": [{"name": name, "description": self._toolset_text.get(name, ""),
                          "tools": [spec.manifest() for spec in tools]}
                         for name, tools in toolsets.items()],
            "passthrough": dict(passthrough) if passthrough is not None else {
                "description": "Commands this game accepts without publishing them as tools.",
                "examples": unlisted},
        }


@dataclasses.dataclass(frozen=True)
class Queued:
    command_id: int
    spec: CommandSpec
    kwargs: dict[str, Any]


class CommandQueue:
    """Accepted commands waiting for the game thread, and their application.

    ``lock`` is the game's state lock (held while commands are applied and outcomes
    published); ``on_close`` runs when ``close`` is applied; ``after_frames`` is the
    clock's timer (for :meth:`Pending.complete_after_sim_frames`).
    """

    def __init__(self, table: CommandTable, outcomes: Outcomes, lock: threading.RLock,
                 on_close: Callable[[], None],
                 after_frames: Callable[[int, Callable[[], None]], None]) -> None:
        self.table = table
        self.outcomes = outcomes
        self.lock = lock
        self.on_close = on_close
        self.after_frames = after_frames
        self.closing = False
        self._queue: "queue.SimpleQueue[Queued]" = queue.SimpleQueue()
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()
        self._current: int | None = None  # the command being applied
        self._deferred: Pending | None = None  # its Pending, if it called defer()
        self._hold: Pending | None = None  # a Pending that holds the queue (a step)
        #: What a ``pause`` accepted while a step holds the queue does to it (the clock's
        #: interrupt), and whether one came in.
        self.interrupt: Callable[[], None] | None = None
        self._interrupting = False

    def accept(self, query: str, frame: int, refusing: bool) -> tuple[int, dict[str, Any]]:
        """Validate a ``/command`` query and queue it: ``(status, answer)``. Runs on the
        HTTP thread. ``refusing``: the game is closing, so nothing more is queued."""
        try:
            params = urllib.parse.parse_qs(query, keep_blank_values=True, max_num_fields=200)
        except ValueError as exc:
            return 400, {"accepted": False, "error": f"the query string cannot be read: {exc}",
                         "commands": self.table.names()}
        names = params.pop(CMD, [])
        if len(names) != 1 or not names[0]:
            problem = "no command: name it with cmd=..." if not names or not names[0] else \
                "cmd was given more than once"
            return 400, {"accepted": False, "error": problem, "commands": self.table.names()}
        name = names[0]
        spec = self.table.get(name)
        if spec is None:
            return 400, {"accepted": False, "error": f"unknown command {name[:100]!r}",
                         "commands": self.table.names()}
        if refusing:
            return 503, {"accepted": False, "error": "the game is closing", "command": name}
        try:
            kwargs = convert_query(spec, params)
        except ArgumentError as exc:
            return 400, {"accepted": False, "error": str(exc), "command": name,
                         "args": [arg.manifest() for arg in spec.args]}
        with self._id_lock:  # ids and queue order agree
            command_id = next(self._ids)
            self._queue.put(Queued(command_id, spec, kwargs))
        if name == "pause" and self._hold is not None:
            self._interrupting = True  # the step stops at the next frame, not after all of them
        return 200, {"accepted": True, "commandId": command_id, "frame": frame}

    def drain(self) -> int:
        """Apply queued commands in order (on the game thread), stopping behind one that
        holds the queue, and after ``close``. Returns how many ran."""
        applied = 0
        with self.lock:
            while not self.closing:
                if self._hold is not None:
                    if not self._hold.done and self._interrupting and self.interrupt is not None:
                        self.interrupt()
                    self._interrupting = False
                    if not self._hold.done:
                        break
                    self._hold = None
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                self._apply(item)
                applied += 1
        return applied

    def _apply(self, item: Queued) -> None:
        name = item.spec.name
        self._current, self._deferred = item.command_id, None
        try:
            if name == "close":
                self.closing = True
                self.on_close()
                value = None
            else:
                value = item.spec.func(**item.kwargs)
        except Exception as exc:
            text = error_text(exc)
            if isinstance(exc, ValueError):  # a refusal, said in the outcome
                log.debug("game-bridge kit: command %r refused: %s", name, text)
            else:
                log.warning("game-bridge kit: command %r failed: %s", name, text, exc_info=True)
            if self._deferred is not None:
                self._deferred.fail(text)
            else:
                self.outcomes.finish(failure(item.command_id, text))
            return
        finally:
            self._current = None
        deferred = self._deferred
        if deferred is None:
            if isinstance(value, Pending):  # another command's handle: not a result
                value = None
            self.outcomes.finish(success(item.command_id, value))
        elif deferred.hold and not deferred.done:
            self._hold = deferred

    def defer(self, hold: bool) -> Pending:
        """A handle that completes the command being applied later (see
        :meth:`GameBridge.defer`)."""
        if self._current is None:
            raise RuntimeError("defer() is for use inside a command, while the kit applies it")
        pending = Pending(self._current, hold, self._finish, self.after_frames)
        self._deferred = pending
        return pending

    def _finish(self, entry: dict[str, Any]) -> bool:
        with self.lock:
            return self.outcomes.finish(entry)
