"""Files beside a trace: its private ``FILE.files/`` folder for screenshot copies, and the only
files a report or an update reads back (docs/reliability.md, "Files beside a trace")."""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path, PurePosixPath

#: The largest screenshot copied beside a trace or shown in a report.
MAX_FILE_BYTES = 16 * 1024 * 1024
_ALTERNATIVES = 100
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _private_dir_fd(path: Path) -> int | None:
    """An open descriptor of ``path`` when it is a real directory of this user's that
    neither group nor others can write to; None otherwise."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        os.close(fd)
        return None
    return fd


def _read_fd(fd: int, max_bytes: int) -> bytes | None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
        return None
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            return None


def read_inside(folder: Path, relative: object, *, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of ``folder/relative`` when ``relative`` is a plain relative path that stays
    inside ``folder`` through real directories to a regular file of at most ``max_bytes``;
    None for anything else (absolute, ``..``, a link on the way, missing, too large)."""
    if not isinstance(relative, str) or not relative or "\0" in relative or "\\" in relative:
        return None
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(p in (".", "..") for p in parts):
        return None
    fds: list[int] = []
    try:
        fds.append(os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for part in parts[:-1]:
            fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], _READ_FLAGS, dir_fd=fds[-1]))
        return _read_fd(fds[-1], max_bytes)
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def read_in_folder(folder: Path | None, path: object, *, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of ``path`` when it names a file directly in ``folder`` (which the bridge
    owns: its screenshot copies); None for a path anywhere else, or no folder."""
    if folder is None or not isinstance(path, str) or not path or "\0" in path:
        return None
    candidate = Path(path)
    try:
        if not candidate.is_absolute() or os.path.realpath(candidate.parent) != os.path.realpath(folder):
            return None
    except (OSError, ValueError):
        return None
    return read_inside(folder, candidate.name, max_bytes=max_bytes)


class CopyFolder:
    """The private ``FILE.files`` folder of one trace, made on first use. Thread-safe."""

    def __init__(self, trace_path: Path) -> None:
        self.trace_path = trace_path
        self.path: Path | None = None
        self._fd: int | None = None
        self._lock = threading.Lock()

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        wanted = self.trace_path.with_name(self.trace_path.name + ".files")
        wanted.parent.mkdir(parents=True, exist_ok=True)  # as the trace's writer does
        try:
            os.mkdir(wanted, 0o700)
        except FileExistsError:
            pass
        fd = _private_dir_fd(wanted)
        path = wanted
        if fd is None:  # someone else's, a link, or open to others: never reused
            path = Path(tempfile.mkdtemp(prefix=wanted.name + "-", dir=wanted.parent))
            fd = _private_dir_fd(path)
            if fd is None:
                raise PermissionError(f"{path} could not be made a private folder")
        self._fd, self.path = fd, path
        return fd

    def write(self, name: str, data: bytes) -> str:
        """Create a new file ``name`` (or ``stem-N.ext`` when that name is taken, by a file
        or a link: never opened) holding ``data``; returns the path to record, relative
        to the trace's folder (``FILE.files/name``)."""
        if not name or "/" in name or name in (".", "..") or "\0" in name:
            raise ValueError(f"not a plain file name: {name!r}")
        stem, dot, ext = name.rpartition(".")
        stem, ext = (stem, dot + ext) if stem else (name, "")
        with self._lock:
            dir_fd = self._open()
            for attempt in range(1, _ALTERNATIVES + 1):
                name = f"{stem}{ext}" if attempt == 1 else f"{stem}-{attempt}{ext}"
                try:
                    fd = os.open(name, _NEW_FLAGS, 0o600, dir_fd=dir_fd)
                    break
                except FileExistsError:
                    continue
            else:
                raise FileExistsError(f"{self.path}: {stem}{ext} and {_ALTERNATIVES - 1} alternatives all exist")
            assert self.path is not None
            folder = self.path.name
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return f"{folder}/{name}"

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


__all__ = ["CopyFolder", "MAX_FILE_BYTES", "read_in_folder", "read_inside"]
