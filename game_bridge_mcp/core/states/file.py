"""A saved state as a file (``.gbstate``): one line of JSON saying what it is (the game, the
frame, the state it showed, the journal that re-executes it), then the game's own snapshot
bytes, opaque, exactly as many as the line says. docs/states.md describes it; a state file
travels beside a trace and into a test, so every reader checks it whole."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from ...contract import SNAPSHOT_MAX_BYTES
from ...jsonio import FileProblem, decode_json, read_capped
from .journal import Sent

FORMAT = "game-bridge-state"
VERSION = 1
SUFFIX = ".gbstate"
#: The most the header line may hold (the state it showed, the journal).
MAX_HEADER_BYTES = 48 * 1024 * 1024
#: The most a state file may hold.
MAX_FILE_BYTES = MAX_HEADER_BYTES + SNAPSHOT_MAX_BYTES


@dataclass
class StateFile:
    """What a state file holds (``snapshot``: the game's bytes, b"" when it has none)."""

    header: dict[str, Any]
    snapshot: bytes = b""
    journal: list[Sent] | None = field(default=None)


def write(path: Path, header: dict[str, Any], snapshot: bytes = b"", journal: Sequence[Sent] | None = None) -> int:
    """Write a state file at ``path`` (0600, under a temporary name, then renamed, so no
    half-written file ever has its name); returns its size. Raises OSError."""
    doc = {"format": FORMAT, "version": VERSION, **header,
           "journal": None if journal is None else [entry.to_json() for entry in journal],
           "snapshotBytes": len(snapshot),
           "snapshotSha256": hashlib.sha256(snapshot).hexdigest() if snapshot else None}
    line = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=str).encode("utf-8")
    if len(line) > MAX_HEADER_BYTES:
        raise OSError(f"the state's description is {len(line):,} bytes, over {MAX_HEADER_BYTES:,}")
    fd, tmp = tempfile.mkstemp(prefix=".partial-", suffix=SUFFIX, dir=path.parent)
    try:
        try:
            os.fchmod(fd, 0o600)
            for part in (line, b"\n", snapshot):
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(line) + 1 + len(snapshot)


def read(path: str | Path) -> StateFile:
    """A state file, checked whole. Raises ValueError saying what is wrong with it."""
    try:
        data = read_capped(path, MAX_FILE_BYTES, regular_only=True)
    except FileProblem as exc:
        raise ValueError(f"{path} {exc}") from None
    return parse(data, str(path))


def parse(data: bytes, where: str = "the state") -> StateFile:
    """A state file's bytes, checked whole (ValueError says what is wrong)."""
    end = data.find(b"\n")
    if end < 0 or end > MAX_HEADER_BYTES:
        raise ValueError(f"{where} is not a game-bridge state file (no header line)")
    try:
        header = decode_json(data[:end], strict=True)
    except ValueError as exc:
        raise ValueError(f"{where} is not a game-bridge state file (its first line {exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{where} is not a game-bridge state file (format is not {FORMAT!r})")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"{where} has no usable version")
    if version > VERSION:
        raise ValueError(f"{where} is of version {version}, newer than this bridge reads ({VERSION}); "
                         "update game-bridge-mcp")
    snapshot = data[end + 1:]
    size = header.get("snapshotBytes")
    if not isinstance(size, int) or isinstance(size, bool) or size != len(snapshot):
        raise ValueError(f"{where} is cut off or padded: its header says {size!r} bytes of snapshot, "
                         f"{len(snapshot)} follow")
    if snapshot and header.get("snapshotSha256") != hashlib.sha256(snapshot).hexdigest():
        raise ValueError(f"{where} is damaged: its snapshot bytes do not match their SHA-256")
    journal_doc = header.get("journal")
    journal: list[Sent] | None = None
    if journal_doc is not None:
        if not isinstance(journal_doc, list):
            raise ValueError(f"{where}'s journal is not a list")
        try:
            journal = [Sent.from_json(item) for item in journal_doc]
        except ValueError as exc:
            raise ValueError(f"{where}'s journal: {exc}") from None
    game = header.get("game")
    if not isinstance(game, dict) or not isinstance(game.get("name"), str):
        raise ValueError(f"{where} does not name its game")
    sim_frame = header.get("simFrame")
    if sim_frame is not None and (not isinstance(sim_frame, int) or isinstance(sim_frame, bool) or sim_frame < 0):
        raise ValueError(f"{where}'s simFrame is not a frame number")
    if sim_frame is not None and journal:
        past = next((e for e in journal if e.sim_frame is not None and e.sim_frame > sim_frame), None)
        if past is not None:  # a record is of the frames up to its state's: this one was changed
            raise ValueError(f"{where}'s journal has {past.cmd!r} sent at simFrame {past.sim_frame}, past the "
                             f"state's simFrame {sim_frame}")
    if not snapshot and journal is None:
        raise ValueError(f"{where} holds neither snapshot bytes nor a journal to re-execute")
    return StateFile(header, snapshot, journal)


__all__ = ["FORMAT", "MAX_FILE_BYTES", "StateFile", "SUFFIX", "VERSION", "parse", "read", "write"]
