"""Files a game writes for an agent, in a directory private to this user, each created new
(``O_EXCL | O_NOFOLLOW``) so no name planted there is ever opened."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

#: How many numbered alternatives are tried when a name is taken.
MAX_ALTERNATIVES = 1000


class PrivateDir:
    """A directory of one's own, made or checked on first use.

    ``path`` None: a fresh ``mkdtemp`` directory (``prefix``) in the temp dir, removed
    with the files written into it by :meth:`close`. Otherwise ``path`` is created 0700
    when missing; an existing one must be a real directory (not a symlink) owned by this
    user and not writable by group or others.
    """

    def __init__(self, path: Path | None = None, *, prefix: str = "game-files-") -> None:
        self._path = path
        self._prefix = prefix
        self._fd: int | None = None
        self._temporary = False
        self._written: list[str] = []

    @property
    def path(self) -> Path | None:
        """The directory (None until first used when it is a fresh temp directory)."""
        return self._path

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        if self._path is None:
            self._path = Path(tempfile.mkdtemp(prefix=self._prefix))
            self._temporary = True
        else:
            try:
                os.mkdir(self._path, 0o700)
            except FileExistsError:
                pass
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise OSError(exc.errno, f"{self._path} is not a directory of its own (a symlink, or "
                                     f"not a directory): {exc.strerror}") from None
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISDIR(info.st_mode):
            problem = "is not a directory"
        elif info.st_uid != os.geteuid():
            problem = f"belongs to another user (uid {info.st_uid})"
        elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            problem = "is writable by other users; give a private directory"
        if problem is not None:
            os.close(fd)
            raise PermissionError(f"{self._path} {problem}")
        self._fd = fd
        return fd

    def write_new(self, stem: str, suffix: str, data: bytes) -> Path:
        """Create a new file ``stem + suffix`` (or ``stem-N + suffix`` when taken) holding
        ``data``, mode 0600; returns its path. ``stem`` must be a plain name (no ``/``)."""
        if not stem or "/" in stem or stem in (".", "..") or "\0" in stem:
            raise ValueError(f"not a plain file name: {stem!r}")
        dir_fd = self._open()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for attempt in range(1, MAX_ALTERNATIVES + 1):
            name = f"{stem}{suffix}" if attempt == 1 else f"{stem}-{attempt}{suffix}"
            try:
                fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            if self._temporary:
                self._written.append(name)
            assert self._path is not None
            return self._path / name
        raise FileExistsError(f"{self._path}: {stem}{suffix} and {MAX_ALTERNATIVES - 1} numbered "
                              "alternatives all exist")

    def close(self) -> None:
        """Let the directory go; a temporary one (made here) is removed, with the files
        written into it (by name, relative to the open directory: never through a link)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self._temporary and self._path is not None:
                for name in self._written:
                    try:
                        os.unlink(name, dir_fd=fd)
                    except OSError:
                        pass
                self._written.clear()
                try:
                    os.rmdir(self._path)
                except OSError:  # something else is in it: left as it is
                    pass
        finally:
            os.close(fd)
