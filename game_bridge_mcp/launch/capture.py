"""A launched game's output, pumped from its pipe to a private, capped log file and a ring of
numbered lines that ``instance_log`` reads by cursor."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any, Iterable

from ..paths import LOG_KEEP, prune_files

log = logging.getLogger(__name__)

#: Lines held in memory per instance.
RING_LINES = 200
#: A "line" longer than this is split (a game printing a megabyte with no newline).
MAX_LINE_BYTES = 64 * 1024
#: Lines kept in memory are cut to this many characters (the file keeps them whole).
MAX_RING_CHARS = 4000
#: The most one launched game's log takes on disk: when the file reaches half of this it
#: becomes ``<name>.1`` (replacing the older half) and a new file starts under the same
#: name, so the newest output is always in the log file and never more than this is kept.
LOG_CAP_BYTES = 64 * 1024 * 1024
ROTATED_SUFFIX = ".1"


def is_log_name(name: str) -> bool:
    """Whether ``name`` is a launched game's log (current or rotated), as the launcher names them."""
    return name.startswith("instance-") and (name.endswith(".log") or name.endswith(".log" + ROTATED_SUFFIX))


def prune_logs(directory: Path, *, keep: Iterable[Path] = ()) -> int:
    """Prune launched games' logs by age, count and total size (:data:`..paths.LOG_KEEP`,
    through the one pruning function); ``keep`` are files still being written."""
    return prune_files(directory, LOG_KEEP, match=is_log_name, keep=list(keep))


def open_log_file(directory: Path, port: int) -> tuple[Path, int]:
    """Create ``instance-<port>-<ms>.log`` readable only by this user; ``(path, fd)``."""
    stamp = int(time.time() * 1000)
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    for attempt in range(100):
        suffix = "" if attempt == 0 else f"-{attempt}"
        path = directory / f"instance-{port}-{stamp}{suffix}.log"
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        try:
            os.fchmod(fd, 0o600)  # in case a umask or ACL widened it
        except (OSError, AttributeError):
            pass
        return path, fd
    raise OSError(f"could not create a log file in {directory}")


class TailReader:
    """``readline`` over a file another process appends to: blocks (polling) for a
    complete line until ``stop()``; used when a detached game writes its log itself."""

    def __init__(self, path: Path, poll_s: float = 0.02) -> None:
        self._file = open(path, "rb")
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._partial = b""

    def stop(self) -> None:
        self._stop.set()

    def readline(self, limit: int = -1) -> bytes:
        while True:
            chunk = self._file.readline(limit if limit > 0 else -1)
            if chunk:
                self._partial += chunk
                if self._partial.endswith(b"\n") or 0 < limit <= len(self._partial):
                    line, self._partial = self._partial, b""
                    return line
                continue
            if self._stop.wait(self._poll_s):
                line, self._partial = self._partial, b""
                return line

    def close(self) -> None:
        self._stop.set()
        self._file.close()


class OutputCapture:
    """Pumps one pipe into a log file and a numbered ring of the last lines."""

    def __init__(self, pipe: IO[bytes], log_path: Path, log_fd: int | None, *,
                 ring_lines: int = RING_LINES, cap_bytes: int = LOG_CAP_BYTES) -> None:
        self.log_path = log_path
        self._pipe = pipe
        self._fd = log_fd
        self._cap = max(2, int(cap_bytes))
        self._written = 0
        self._ring: deque[tuple[int, str]] = deque(maxlen=ring_lines)
        self._total = 0
        self._lock = threading.Lock()
        self._eof = threading.Event()
        self._thread = threading.Thread(target=self._pump, name=f"game-log-{log_path.name}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            while True:
                try:
                    raw = self._pipe.readline(MAX_LINE_BYTES)
                except (OSError, ValueError):
                    break
                if not raw:
                    break
                self._write_file(raw)
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                if "\r" in text:  # a progress bar redrawn in place: keep its last state
                    text = text.rsplit("\r", 1)[-1] or text
                with self._lock:
                    self._ring.append((self._total, text[:MAX_RING_CHARS]))
                    self._total += 1
        finally:
            try:
                self._pipe.close()
            except OSError:
                pass
            fd, self._fd = self._fd, None
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._eof.set()

    @property
    def files(self) -> list[Path]:
        """The log file and its rotated older part (which may not exist)."""
        return [self.log_path, self.log_path.with_name(self.log_path.name + ROTATED_SUFFIX)]

    def _write_file(self, raw: bytes) -> None:
        if self._fd is None:
            return
        if self._written and self._written + len(raw) > self._cap // 2:
            self._rotate()
            if self._fd is None:
                return
        try:
            os.write(self._fd, raw)
            self._written += len(raw)
        except OSError as exc:  # a full disk must not stop the ring or the game
            log.warning("cannot write %s any more: %s", self.log_path, exc)
            self._stop_writing()

    def _rotate(self) -> None:
        """The current file becomes ``<name>.1`` (the older half); a new one starts under
        the log's name. If that cannot be done, writing stops (the cap holds)."""
        older = self.files[1]
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        try:
            os.replace(self.log_path, older)
            fd = os.open(self.log_path, flags, 0o600)
        except OSError as exc:
            log.warning("cannot rotate %s (%s); its output is no longer written to disk", self.log_path, exc)
            self._stop_writing()
            return
        old, self._fd = self._fd, fd
        self._written = 0
        if old is not None:
            try:
                os.close(old)
            except OSError:
                pass
        try:
            note = f"[game-bridge: the log reached {self._cap // 2} bytes; older output is in {older.name}]\n"
            self._written += os.write(fd, note.encode())
        except OSError:
            pass

    def _stop_writing(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    @property
    def total(self) -> int:
        """Lines seen so far (the cursor value after the newest line)."""
        with self._lock:
            return self._total

    def wait_eof(self, timeout_s: float) -> bool:
        """Wait until every writer closed the pipe (all output is in)."""
        return self._eof.wait(timeout_s)

    def last_line(self) -> str:
        """The newest non-blank line (for progress reports)."""
        with self._lock:
            for _seq, text in reversed(self._ring):
                if text.strip():
                    return text.strip()[:300]
        return ""

    def tail(self, count: int) -> list[str]:
        with self._lock:
            return [text for _seq, text in list(self._ring)[-count:]] if count > 0 else []

    def read(self, count: int, since: int | None) -> dict[str, Any]:
        """``{"lines", "next", "dropped", "more"}``: without ``since`` the last ``count``
        lines; with it, up to ``count`` lines from line number ``since`` on, ``dropped``
        true when some of those had already left the ring. A cursor from the future (an
        earlier instance on the same port) reads from the oldest line held."""
        with self._lock:
            total = self._total
            held = list(self._ring)
        oldest = held[0][0] if held else total
        if since is None:
            chosen = [text for _seq, text in held[-count:]] if count > 0 else []
            return {"lines": chosen, "next": total, "dropped": False, "more": False}
        start = 0 if since > total else since
        dropped = start < oldest
        start = max(start, oldest)
        chosen = [text for seq, text in held if seq >= start][:max(0, count)]
        next_line = start + len(chosen)
        return {"lines": chosen, "next": next_line, "dropped": dropped, "more": next_line < total}


__all__ = ["LOG_CAP_BYTES", "MAX_LINE_BYTES", "OutputCapture", "RING_LINES", "is_log_name", "open_log_file",
           "prune_logs"]
