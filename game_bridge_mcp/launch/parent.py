"""This process as the parent of what it launches: the default ``SIGCHLD`` restored, the child
subreaper, and adopted zombies reaped (only children this process did not start itself)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from typing import Iterator

from .procs import ProcRef, psutil

log = logging.getLogger(__name__)

#: prctl option numbers (linux/prctl.h).
_PR_SET_CHILD_SUBREAPER = 36

_lock = threading.RLock()
_own: set[int] = set()
_subreaper = False


def restore_sigchld() -> bool:
    """Put back the default ``SIGCHLD`` disposition if it is "ignore". True when the
    disposition is (now) one under which children wait to be reaped. Only the main
    thread may change it; elsewhere this reports what it found."""
    sigchld = getattr(signal, "SIGCHLD", None)
    if sigchld is None:
        return True
    if signal.getsignal(sigchld) != signal.SIG_IGN:
        return True
    try:
        signal.signal(sigchld, signal.SIG_DFL)
    except ValueError:  # not the main thread
        log.warning("SIGCHLD is ignored in this process and could not be restored here; launched "
                    "games' exit codes cannot be read and group signals are not used")
        return False
    log.info("SIGCHLD was ignored (inherited from the parent); restored the default")
    return True


def sigchld_ignored() -> bool:
    """Whether the kernel would reap this process's children by itself."""
    sigchld = getattr(signal, "SIGCHLD", None)
    return sigchld is not None and signal.getsignal(sigchld) == signal.SIG_IGN


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux); True when it is one now."""
    global _subreaper
    if _subreaper:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            log.info("PR_SET_CHILD_SUBREAPER failed: %s", os.strerror(ctypes.get_errno()))
            return False
    except (OSError, AttributeError) as exc:  # pragma: no cover - no libc / no prctl
        log.info("cannot become a child subreaper: %s", exc)
        return False
    _subreaper = True
    return True


def is_subreaper() -> bool:
    return _subreaper


def prepare_parent() -> None:
    """What a process that launches games does at start-up (the server, ``call``,
    ``check``; ``cli/main.py`` does it as the command's entry point): restore ``SIGCHLD``
    and become a child subreaper. Not for a process that embeds a launcher among other
    children of its own (a test runner): a subreaper adopts every orphan below it."""
    restore_sigchld()
    become_subreaper()


@contextlib.contextmanager
def spawning() -> Iterator[set[int]]:
    """Hold while starting a child and add its pid to the yielded set, so
    :func:`reap_adopted` can never collect a child of ours before it is registered."""
    with _lock:
        yield _own


def disown(pid: int) -> None:
    """The child ``pid`` has been reaped by its owner: forget it."""
    with _lock:
        _own.discard(pid)


def _direct_children() -> list["psutil.Process"]:
    if psutil is None:
        return []
    try:
        return list(psutil.Process().children(recursive=False))
    except (psutil.Error, OSError):
        return []


def adopted() -> list[ProcRef]:
    """Live children this process adopted as a subreaper (not ones it started)."""
    if not _subreaper or psutil is None:
        return []
    found: list[ProcRef] = []
    with _lock:
        own = set(_own)
    for child in _direct_children():
        try:
            if child.pid in own or child.status() == psutil.STATUS_ZOMBIE:
                continue
            found.append(ProcRef(child.pid, child.create_time()))
        except (psutil.Error, OSError):
            continue
    return found


def reap_adopted() -> int:
    """Collect adopted children that have exited (zombies nobody else will wait for);
    return how many. Does nothing unless this process is a subreaper."""
    if not _subreaper or psutil is None or not hasattr(os, "waitpid"):
        return 0
    reaped = 0
    with _lock:
        for child in _direct_children():
            if child.pid in _own:
                continue
            try:
                if child.status() != psutil.STATUS_ZOMBIE:
                    continue
                pid, _status = os.waitpid(child.pid, os.WNOHANG)
            except (psutil.Error, ChildProcessError, OSError):
                continue
            reaped += 1 if pid else 0
    return reaped


__all__ = ["adopted", "become_subreaper", "disown", "is_subreaper", "prepare_parent", "reap_adopted",
           "restore_sigchld", "sigchld_ignored", "spawning"]
