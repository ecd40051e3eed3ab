"""Per-port ``flock`` locks shared by every bridge of this user, so two launches never pick one
port (docs/design.md, "Port locks")."""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from ..paths import make_dirs

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process port locks
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)



class UnusableLock(Exception):
    """The lock path for a port holds something that is not our lock file (a symlink, a
    directory, a FIFO, another user's file, a hard link): the port is skipped, and the
    thing at that path is left exactly as it is."""

    def __init__(self, path: Path, port: int, what: str) -> None:
        super().__init__(f"port {port} skipped: its lock path {path} {what}; remove it to use the port again")
        self.path = path
        self.port = port
        self.what = what


def _what_is_there(path: Path) -> str:
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or exc})"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link (not followed)"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    return "cannot be opened"


class PortLock:
    """An exclusive, non-blocking lock on one port, held until :meth:`release`."""

    def __init__(self, path: Path, port: int, fd: int | None) -> None:
        self.path = path
        self.port = port
        self._fd = fd
        #: Ports passed over on the way to this one, each with why (for the launch result).
        self.skipped: list[str] = []

    @property
    def held(self) -> bool:
        return self._fd is not None

    @classmethod
    def try_acquire(cls, locks_dir: Path, port: int) -> "PortLock | None":
        """Take the lock for ``port`` or return None when another process (or another
        lock object in this one) holds it. Raises :class:`UnusableLock` when the lock
        path holds something else (never following, truncating or writing it), and
        OSError when the directory is unusable."""
        make_dirs(locks_dir)
        path = locks_dir / f"port-{int(port)}.lock"
        if fcntl is None:  # pragma: no cover
            return cls(path, port, None)
        flags = (os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_NONBLOCK", 0))
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EACCES, errno.EPERM, errno.EMLINK):
                raise UnusableLock(path, port, _what_is_there(path)) from None
            raise
        try:
            info = os.fstat(fd)
            problem = None
            if not stat.S_ISREG(info.st_mode):
                problem = "is not a regular file"
            elif hasattr(os, "getuid") and info.st_uid != os.getuid():
                problem = f"belongs to another user (uid {info.st_uid})"
            elif info.st_nlink != 1:
                problem = "is a hard link to another file"
            if problem is not None:
                raise UnusableLock(path, port, problem)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            raise
        except UnusableLock:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        except OSError:  # the pid is only a courtesy for error messages
            pass
        return cls(path, port, fd)

    def release(self) -> None:
        """Drop the lock (idempotent). The file stays for the next holder."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"PortLock(port={self.port}, held={self.held})"


def holder_pid(locks_dir: Path, port: int) -> int | None:
    """The pid written by whoever holds (or last held) the lock for ``port``."""
    try:
        with open(locks_dir / f"port-{int(port)}.lock", "rb") as handle:
            text = handle.read(32).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


__all__ = ["PortLock", "UnusableLock", "holder_pid"]
