"""Appending to a trace: one ``os.write`` per line under ``O_APPEND``, and never a reason for a
call to fail (the first failure is reported once, then writing stops)."""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable

from .format import FORMAT, dumps, header

Warn = Callable[[str], None]


def _stderr(message: str) -> None:
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class TraceWriter:
    """Append-only JSON Lines writer for one trace file. Thread-safe."""

    def __init__(self, path: str | Path, *, recorder: str, bridge_version: str,
                 warn: Warn | None = None) -> None:
        self.path = Path(path)
        self._recorder = recorder
        self._bridge_version = bridge_version
        self._warn = warn or _stderr
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._failed = False

    @property
    def failed(self) -> bool:
        return self._failed

    def fail(self, what: str) -> None:
        """Stop recording, saying why once on stderr (the calls themselves go on)."""
        if not self._failed:
            self._failed = True
            self._warn(f"game-bridge-mcp: warning: not recording to {self.path}: {what}. "
                       "Tool calls go on unrecorded; fix the path (--record FILE or GAME_BRIDGE_RECORD).")
        self._close_fd()

    def _open(self) -> int | None:
        if self._fd is not None or self._failed:
            return self._fd
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NONBLOCK: a FIFO planted under the name must not hang the call that records
            # O_NOFOLLOW: a link planted under the name must not choose the file written.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.fail("it is a symbolic link (give the file itself)")
            else:
                self.fail(f"cannot open it ({exc.strerror or exc})")
            return None
        self._fd = fd
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISCHR(info.st_mode)):
            self.fail("it is not a regular file")
            return None
        if stat.S_ISREG(info.st_mode) and info.st_uid != os.geteuid():
            self.fail(f"it belongs to another user (uid {info.st_uid}), who could read or change it")
            return None
        os.set_blocking(fd, True)
        try:
            if os.fstat(fd).st_size == 0:
                self._write_line(header(self._recorder, self._bridge_version))
            elif not self._is_trace():
                self.fail("it exists and is not a game-bridge trace (its first line does not name "
                           f"the format {FORMAT!r}); give a new file")
                return None
        except OSError as exc:
            self.fail(f"cannot write it ({exc.strerror or exc})")
            return None
        return self._fd

    def _is_trace(self) -> bool:
        try:
            with open(self.path, "rb") as handle:
                first = handle.readline(64 * 1024)
        except OSError:
            return False
        return f'"format":"{FORMAT}"'.encode() in first.replace(b" ", b"")

    def _write_line(self, record: Mapping[str, Any]) -> None:
        assert self._fd is not None
        data = (dumps(record) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def write(self, record: Mapping[str, Any]) -> bool:
        """Append one line. Returns whether it was written; never raises."""
        with self._lock:
            if self._failed:
                return False
            try:
                if self._open() is None:
                    return False
                self._write_line(record)
                return True
            except (OSError, ValueError, TypeError, RecursionError) as exc:
                self.fail(f"cannot write it ({getattr(exc, 'strerror', None) or exc})")
                return False

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._close_fd()
