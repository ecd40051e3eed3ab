"""The states a session saved (``save_state``): named, kept in the bridge's home, bounded in
count and bytes, and dropped with the session unless kept (docs/states.md).

A state is what the bridge needs to bring a game back to a frame: the game's own snapshot
(a live copy in the game, its id; or its bytes, in a file here), or the journal that
re-executes it, or both; and what the game showed then (its ``/state`` and screenshot), to
say whether a restore is ``exact``. One :class:`StateStore` per session (per Bridge): each
MCP session of an HTTP server has its own, and refuses another's names."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...contract import NOT_RESTORED_KEYS
from ...errors import BridgeUsageError
from ...paths import KeepRule, prune_files, states_dir
from . import file as statefile
from .journal import Sent, repeatable_env

log = logging.getLogger(__name__)

#: Per session: the most states, and the most bytes of them on disk. Past either, the
#: oldest state that is not kept is dropped (the answer that dropped it says so).
MAX_STATES = 64
MAX_BYTES = 512 * 1024 * 1024
#: Kept states (``keep: true``), over all sessions: in ``<home>/states/kept``, pruned by this rule.
KEPT_RULE = KeepRule(max_files=200, max_bytes=2 * 1024 * 1024 * 1024, max_age_s=90 * 24 * 3600)
KEPT_DIRNAME = "kept"
#: ``/state``'s keys a restore does not give back (they go on counting, or are not part of a
#: snapshot): left out of what ``exact`` compares.
NOT_COMPARED = NOT_RESTORED_KEYS
#: The most of a state's ``/state`` kept to name what differed (bigger: its SHA-256 only).
KEEP_STATE_BYTES = 1024 * 1024
#: A label: what an agent calls a state.
_LABEL_CHARS = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
_SESSION_DIR = re.compile(r"session-(\d+)-[0-9a-f]+")

_STORES: "weakref.WeakSet[StateStore]" = weakref.WeakSet()


def comparable(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` without what a restore does not give back (:data:`NOT_COMPARED`)."""
    return {key: value for key, value in state.items() if key not in NOT_COMPARED}


def fingerprint(doc: Any) -> tuple[str, int]:
    """The SHA-256 of ``doc`` as canonical JSON, and its size."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    data = text.encode("utf-8")
    return hashlib.sha256(data).hexdigest(), len(data)


@dataclass(frozen=True)
class Seen:
    """What the game showed when a state was saved: its comparable ``/state`` (whole when
    small, else only its SHA-256) and the SHA-256 of its screenshot, when one was taken."""

    sha256: str
    state: dict[str, Any] | None
    screenshot: str | None = None

    @classmethod
    def of(cls, state: Mapping[str, Any], screenshot: str | None = None) -> "Seen":
        doc = comparable(state)
        digest, size = fingerprint(doc)
        return cls(digest, doc if size <= KEEP_STATE_BYTES else None, screenshot)

    def to_json(self) -> dict[str, Any]:
        return {"stateSha256": self.sha256, "state": self.state, "screenshotSha256": self.screenshot}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Seen":
        sha = doc.get("stateSha256")
        state = doc.get("state")
        shot = doc.get("screenshotSha256")
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise ValueError("the state file has no stateSha256")
        return cls(sha, state if isinstance(state, dict) else None, shot if isinstance(shot, str) else None)


@dataclass
class SavedState:
    """One saved state (see the module docstring)."""

    name: str
    label: str | None
    port: int
    #: The GameClient generation of ``port`` it was saved in (a live copy lives only there).
    generation: int
    game: dict[str, Any]
    sim_frame: int | None
    seen: Seen
    journal: Sequence[Sent] | None = None
    free_since: int | None = None
    created: float = field(default_factory=time.time)
    #: The game's id of its live copy (in the game on ``port``, this generation), if it keeps one.
    game_id: str | None = None
    #: Why the game's snapshot cannot leave its process (its 409), when it said so.
    not_portable: str | None = None
    #: The file holding the state (its bytes, or its journal); None while it is only in the game.
    file: Path | None = None
    #: The size of the game's snapshot bytes (as ``snapshot_save`` said), and of the file.
    snapshot_bytes: int = 0
    file_bytes: int = 0
    kept: bool = False
    journal_bytes: int | None = None
    #: What the game's launch fixed that its re-execution repeats (journal.REPEATED_ENV).
    launch_env: dict[str, str] = field(default_factory=dict)

    @property
    def how(self) -> str:
        """How it comes back: ``snapshot`` (the game's own) or ``re-execution``."""
        return "snapshot" if self.game_id is not None or self.snapshot_bytes else "re-execution"

    @property
    def size(self) -> int:
        """Its size: the game's snapshot bytes, or its journal's (as JSON: the same for the
        same session, unlike its file, which says when it was made)."""
        if self.snapshot_bytes or self.journal is None:
            return self.snapshot_bytes
        if self.journal_bytes is None:
            self.journal_bytes = sum(len(json.dumps(entry.to_json(), separators=(",", ":"), default=str)) + 1
                                     for entry in self.journal)
        return self.journal_bytes

    def header(self) -> dict[str, Any]:
        """The state file's header (statefile.py adds the format, journal and bytes)."""
        return {"name": self.name, "label": self.label, "created": self.created, "game": self.game,
                "simFrame": self.sim_frame, "freeSince": self.free_since, "notPortable": self.not_portable,
                "launchEnv": self.launch_env,
                **self.seen.to_json()}

    def describe(self) -> dict[str, Any]:
        """What list_states shows of it."""
        out: dict[str, Any] = {"state": self.name, "port": self.port, "simFrame": self.sim_frame,
                               "game": self.game.get("name"), "version": self.game.get("version"),
                               "how": self.how, "bytes": self.size, "kept": self.kept}
        if self.label:
            out["label"] = self.label
        if self.file is not None:
            out["file"] = str(self.file)
        if self.journal is not None:
            out["journal"] = len(self.journal)
        return out


def from_file(data: statefile.StateFile, name: str, port: int) -> SavedState:
    """A state read from a file (``restore_state {file}``), under ``name``."""
    header = data.header
    sim_frame = header.get("simFrame")
    free = header.get("freeSince")
    label = header.get("label")
    return SavedState(name, label if isinstance(label, str) else None, port, -1, dict(header["game"]),
                      sim_frame if isinstance(sim_frame, int) else None, Seen.from_json(header),
                      journal=data.journal, free_since=free if isinstance(free, int) else None,
                      snapshot_bytes=len(data.snapshot),
                      launch_env=repeatable_env(env) if isinstance(env := header.get("launchEnv"), dict) else {})


def clean_label(label: Any) -> str | None:
    if label is None:
        return None
    text = " ".join(_UNSAFE.sub(" ", str(label)).split())[:_LABEL_CHARS]
    return text or None


class StateStore:
    """The states of one session (see the module docstring). Thread-safe."""

    def __init__(self, *, environ: Mapping[str, str] | None = None, registry_dir: Any = None,
                 max_states: int = MAX_STATES, max_bytes: int = MAX_BYTES) -> None:
        self._environ = environ
        self._registry_dir = registry_dir
        self.max_states = max_states
        self.max_bytes = max_bytes
        self._states: dict[str, SavedState] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.RLock()
        self._root: Path | None = None
        self._dir: Path | None = None
        self._closed = False
        _STORES.add(self)

    # ------------------------------------------------------------------ names
    def new_name(self) -> str:
        with self._lock:
            while True:
                name = f"s{next(self._numbers)}"
                if name not in self._states:
                    return name

    def get(self, name: Any) -> SavedState:
        """The state called ``name`` (its name, or a label only it has). BridgeUsageError
        for one this session does not have, saying when another session has it."""
        if not isinstance(name, str) or not name.strip():
            raise BridgeUsageError("state: give a state's name as save_state answered it (list_states shows them).")
        with self._lock:
            found = self._states.get(name)
            if found is None:
                labelled = [s for s in self._states.values() if s.label == name]
                if len(labelled) == 1:
                    found = labelled[0]
                elif len(labelled) > 1:
                    raise BridgeUsageError(
                        f"state: {len(labelled)} states are labelled {name!r} "
                        f"({', '.join(s.name for s in labelled)}); give one by its name.")
            known = ", ".join(list(self._states)[-10:]) or "none yet"
        if found is not None:
            return found
        if any(other is not self and other.has(name) for other in list(_STORES)):
            raise BridgeUsageError(
                f"state: {name!r} belongs to another session of this bridge, not to this one, so it is not "
                "yours to restore. Save your own with save_state (a kept state's file can be restored by "
                "anyone with restore_state {file}).", state=name, belongsTo="another session")
        raise BridgeUsageError(f"state: no state called {name!r} in this session (its states: {known}). "
                               "list_states shows them; one from a file is restored with restore_state {file}.",
                               state=name)

    def has(self, name: str) -> bool:
        with self._lock:
            return name in self._states

    def all(self, port: int | None = None) -> list[SavedState]:
        with self._lock:
            return [s for s in self._states.values() if port is None or s.port == port]

    def totals(self) -> tuple[int, int]:
        with self._lock:
            return len(self._states), self._bytes()

    # ------------------------------------------------------------------ adding, bounding
    def add(self, state: SavedState) -> list[SavedState]:
        """Add ``state``; the states dropped to stay within the bounds (oldest unkept
        first; never ``state`` itself), whose files are gone and whose live copies in a
        game the caller drops."""
        with self._lock:
            self._states[state.name] = state
            dropped: list[SavedState] = []
            for old in list(self._states.values()):
                count, size = len(self._states), self._bytes()
                if count <= self.max_states and size <= self.max_bytes:
                    break
                if old is state or old.kept:
                    continue
                self._remove(old)
                dropped.append(old)
            return dropped

    def _bytes(self) -> int:
        """The bytes of this session's own files (a kept state's is in ``kept``, and not counted)."""
        return sum(s.file_bytes for s in self._states.values() if not s.kept)

    def drop(self, state: SavedState) -> None:
        with self._lock:
            self._remove(state)

    def _remove(self, state: SavedState) -> None:
        self._states.pop(state.name, None)
        if state.file is not None and not state.kept:
            try:
                os.unlink(state.file)
            except OSError:
                pass

    # ------------------------------------------------------------------ files
    def _session_dir(self) -> Path:
        """This session's folder, ``<home>/states/session-<pid>-<random>`` (made once)."""
        with self._lock:
            if self._dir is None:
                root = states_dir(self._environ, self._registry_dir)
                if root is None:
                    raise BridgeUsageError("No private folder for states could be made in the bridge's home "
                                           "(GAME_BRIDGE_HOME) or the temp dir; the state was not saved.")
                _prune_sessions(root)
                made = root / f"session-{os.getpid()}-{os.urandom(4).hex()}"
                os.mkdir(made, 0o700)
                self._root, self._dir = root, made
            return self._dir

    def write(self, state: SavedState, snapshot: bytes = b"", *, kept: bool = False) -> Path:
        """Write ``state`` (with the game's ``snapshot`` bytes) to a file: this session's
        folder, or ``<home>/states/kept`` for a kept one. Raises BridgeUsageError."""
        try:
            folder = self._session_dir()
            if kept:
                assert self._root is not None
                folder = self._root / KEPT_DIRNAME
                if not folder.is_dir():
                    os.mkdir(folder, 0o700)
                stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(state.created))
                tag = re.sub(r"[^A-Za-z0-9_-]+", "-", state.label or "")[:40].strip("-")
                path = folder / f"{state.name}{'-' + tag if tag else ''}-{stamp}-{os.urandom(2).hex()}{statefile.SUFFIX}"
            else:
                path = folder / f"{state.name}{statefile.SUFFIX}"
            size = statefile.write(path, state.header(), snapshot, state.journal)
        except OSError as exc:
            raise BridgeUsageError(f"The state could not be written in the bridge's home: {exc}") from None
        with self._lock:
            old = state.file
            state.file, state.file_bytes = path, size
            if kept:
                state.kept = True
            if old is not None and old != path:
                try:
                    os.unlink(old)
                except OSError:
                    pass
        if kept:
            prune_files(path.parent, KEPT_RULE, match=lambda name: name.endswith(statefile.SUFFIX), keep=(path,))
        return path

    def close(self) -> list[SavedState]:
        """End the session: its folder goes (kept states stay, in ``kept``); the states
        that had live copies in a game are returned, for the caller to drop there."""
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            states = list(self._states.values())
            self._states.clear()
            folder, self._dir = self._dir, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return [s for s in states if s.game_id is not None]


def _prune_sessions(root: Path) -> None:
    """Folders of sessions whose bridge has exited (it was killed before it could remove its own)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        match = _SESSION_DIR.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        if _alive(int(match.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        import psutil
    except ImportError:
        return os.path.exists(f"/proc/{pid}")
    return bool(psutil.pid_exists(pid))


__all__ = ["KEPT_RULE", "MAX_BYTES", "MAX_STATES", "NOT_COMPARED", "SavedState", "Seen", "StateStore",
           "clean_label", "comparable", "fingerprint", "from_file"]
