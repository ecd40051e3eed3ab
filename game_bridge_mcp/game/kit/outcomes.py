"""What became of each command: ``completedCommandId`` (reached in queue order),
``commandResults``, and the ``after`` waits that end when a command completes."""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Any, Callable

from .state import RawJson, encode_plain, encode_state

#: Outcomes kept in ``/state.commandResults`` (docs/contract.md asks for at least ``RESULTS_KEPT``).
RESULTS_KEPT = 32
#: A result's encoded size above which it is replaced by a note saying so.
RESULT_LIMIT = 16 * 1024
#: An error text is cut to this many characters.
ERROR_LIMIT = 500


def error_text(exc: BaseException) -> str:
    """What an agent reads when a command raised: the message alone for a ``ValueError``
    (the way games say "not allowed", "out of range"), ``Type: message`` for anything
    else (a bug in the game, which the type names)."""
    message = str(exc).strip()
    if isinstance(exc, ValueError) and message:
        text = message
    else:
        text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text[:ERROR_LIMIT]


def success(command_id: int, value: Any) -> dict[str, Any]:
    """``{id, ok: true[, result]}``; a result that is not JSON or is too large becomes a
    short note that says so (the command itself was carried out)."""
    entry: dict[str, Any] = {"id": command_id, "ok": True}
    if value is None:
        return entry
    try:
        body = encode_plain(value)
    except (TypeError, ValueError) as exc:
        entry["result"] = f"(result left out: {str(exc)[:200]})"
        return entry
    if len(body) > RESULT_LIMIT:
        entry["result"] = (f"(result left out: {len(body)} bytes of JSON, over the kit's "
                           f"{RESULT_LIMIT}-byte limit for a command result)")
    else:
        entry["result"] = RawJson(body)
    return entry


def entry_json(entry: dict[str, Any]) -> str:
    """An outcome's JSON as :func:`encode_state` writes it: a success's written directly
    (its result is JSON already), anything else encoded."""
    command_id, result = entry["id"], entry.get("result")
    if type(command_id) is int and entry["ok"] is True:
        if len(entry) == 2:
            return f'{{"id":{command_id},"ok":true}}'
        if len(entry) == 3 and isinstance(result, RawJson):
            return f'{{"id":{command_id},"ok":true,"result":{result.text}}}'
    return encode_state(entry).decode("utf-8")


def failure(command_id: int, error: str) -> dict[str, Any]:
    return {"id": command_id, "ok": False, "error": str(error)[:ERROR_LIMIT] or "failed"}


class Outcomes:
    """Completion in queue order, the recent outcomes, and the waits on them."""

    def __init__(self, keep: int = RESULTS_KEPT) -> None:
        self._cv = threading.Condition()
        self._completed = 0
        self._finished: dict[int, dict[str, Any]] = {}  # done, waiting for an earlier command
        self._recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=max(16, keep))
        #: The recent entries' JSON, oldest first (an entry never changes once published), and
        #: the whole list's, as of ``_encoded_at`` (``completed`` then): every ``/state``
        #: carries the list, which encoding afresh cost most of a small game's answer.
        self._texts: collections.deque[str] = collections.deque(maxlen=self._recent.maxlen)
        self._encoded: RawJson = RawJson("[]")
        self._encoded_at = 0
        self._stopped = False

    @property
    def completed(self) -> int:
        return self._completed

    def finish(self, entry: dict[str, Any]) -> bool:
        """Record a command's outcome; publish it and any later ones already done once
        every earlier command is done. Returns False if that id had finished already.
        The kit calls this with its state lock held, so a snapshot sees the id and its
        entry together."""
        with self._cv:
            command_id = int(entry["id"])
            if command_id <= self._completed or command_id in self._finished:
                return False
            self._finished[command_id] = entry
            published = False
            while self._completed + 1 in self._finished:
                self._recent.append(self._finished.pop(self._completed + 1))
                self._completed += 1
                published = True
            if published:
                self._cv.notify_all()
            return True

    def recent(self) -> list[dict[str, Any]]:
        """``commandResults``: the newest outcomes, oldest first."""
        with self._cv:
            return list(self._recent)

    def recent_encoded(self) -> RawJson:
        """``commandResults`` already encoded: the JSON :func:`encode_state` writes for
        :meth:`recent`, each entry encoded once, when first asked for."""
        with self._cv:
            fresh = self._completed - self._encoded_at  # (each completion published one entry)
            if fresh:
                recent, texts = self._recent, self._texts
                for entry in itertools.islice(recent, max(0, len(recent) - fresh), None):
                    texts.append(entry_json(entry))
                self._encoded = RawJson("[" + ",".join(texts) + "]")
                self._encoded_at = self._completed
            return self._encoded

    def wait(self, after: int, timeout_s: float) -> bool:
        """Block until ``completedCommandId >= after``, ``timeout_s`` passed or the game
        stopped. Returns whether the command completed."""
        with self._cv:
            self._cv.wait_for(lambda: self._completed >= after or self._stopped, timeout_s)
            return self._completed >= after

    def stop(self) -> None:
        """Release every held wait (the game is stopping)."""
        with self._cv:
            self._stopped = True
            self._cv.notify_all()


class Pending:
    """A command that completes later: what a command function returns after calling
    :meth:`GameBridge.defer`. Call :meth:`complete` (with the command's result) or
    :meth:`fail` (with the reason) when it is done, from the game thread. Later commands
    still run meanwhile unless the handle holds the queue (``hold=True``); their
    completion is published after this one's."""

    def __init__(self, command_id: int, hold: bool, finish: Callable[[dict[str, Any]], bool],
                 after_frames: Callable[[int, Callable[[], None]], None]) -> None:
        self.command_id = command_id
        self.hold = hold
        self._finish = finish
        self._after_frames = after_frames
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def complete(self, result: Any = None) -> None:
        """The command is done; ``result`` (JSON-encodable, optional) is its result."""
        if not self._done:
            self._done = True
            self._finish(success(self.command_id, result))

    def fail(self, error: str | BaseException) -> None:
        """The command could not be carried out; ``error`` says why, for the agent."""
        if not self._done:
            self._done = True
            text = error_text(error) if isinstance(error, BaseException) else str(error)
            self._finish(failure(self.command_id, text))

    def complete_after_sim_frames(self, frames: int = 1,
                                  result: Callable[[], Any] | None = None) -> None:
        """Complete once ``frames`` more simulation frames have run (on a paused game:
        once they have been stepped), with ``result()`` as the result if given."""
        if frames < 1:
            raise ValueError(f"frames must be at least 1, got {frames}")
        self._after_frames(int(frames), lambda: self.complete(result() if result else None))
