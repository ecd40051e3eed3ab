"""The launcher's pipe to the reaper watcher: started lazily, restarted if it dies.

Why this module exists: the watcher (:mod:`.watcher`) reaps launched games when the
bridge dies without running any cleanup, and it only knows what the bridge told it. This
is the bridge's side of that conversation: it starts the watcher at the first record
(in its own session, stdout and stderr to /dev/null, the launch marker removed from its
environment), writes JSON-line records (``expect``, ``launch``, ``child``, ``forget``)
into its stdin, keeps every record still in force so a restarted watcher gets them all
again, and closes the pipe on a clean shutdown, which lets the watcher exit. The
watcher script is started by file path, so it works when the package is vendored under
another name. A detached launcher (``call launch_instance --keep``) uses
:class:`NoWatcher`, because its games must outlive it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

from . import parent, procs
from .procs import MARKER_KEY

log = logging.getLogger(__name__)


def _hang_up(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Close the watcher's pipe (its cue to reap what is recorded and exit) and wait for
    it a little, so it is not left a zombie. True when it exited in time."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    parent.disown(proc.pid)
    return True


class NoWatcher:
    """The watcher's interface for a detached launcher, which must not reap at exit."""

    pid = None

    def send(self, record: dict) -> None:
        pass

    def close(self, timeout_s: float = 2.0) -> None:
        pass


class WatcherLink:
    """The pipe to the watcher process, started lazily, restarted if it dies, closed on
    shutdown. Keeps the records it sent, so a restarted watcher gets them all again."""

    def __init__(self, log_path: Path | None) -> None:
        self._log_path = log_path
        self._proc: subprocess.Popen | None = None
        self._records: dict[str, list[dict]] = {}
        self._lock = threading.Lock()
        self._disabled = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        script = Path(__file__).with_name("watcher.py")
        if not sys.executable or not script.is_file():
            log.warning("cannot start the reaper watcher (no Python executable or %s missing); "
                        "launched games will not be reaped if this process is killed", script)
            self._disabled = True
            return
        me = procs.ref_for(os.getpid())
        args = [sys.executable, str(script), "--bridge-pid", str(os.getpid())]
        if me is not None:
            args += ["--bridge-ctime", repr(me.create_time)]
        if self._log_path is not None:
            args += ["--log", str(self._log_path)]
        env = {k: v for k, v in os.environ.items() if k != MARKER_KEY}
        try:
            with parent.spawning() as own:
                self._proc = subprocess.Popen(
                    args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    cwd=os.path.abspath(os.sep), env=env, close_fds=True, start_new_session=True)
                own.add(self._proc.pid)
        except OSError as exc:
            log.warning("cannot start the reaper watcher (%s); launched games will not be reaped "
                        "if this process is killed", exc)
            self._disabled = True
            self._proc = None

    def _write(self, records: list[dict]) -> bool:
        if self._proc is None or self._proc.stdin is None:
            return False
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def send(self, record: dict) -> None:
        """Deliver one record (starting or restarting the watcher as needed)."""
        with self._lock:
            ident = str(record.get("id"))
            if record.get("op") == "forget":
                self._records.pop(ident, None)
            else:
                self._records.setdefault(ident, []).append(record)
            if self._disabled:
                return
            if self._proc is None:
                self._start()
                if self._proc is None:
                    return
                if record.get("op") != "forget":
                    self._write([r for rs in self._records.values() for r in rs])
                return
            if not self._write([record]):
                log.warning("the reaper watcher (pid %s) went away; starting a new one", self._proc.pid)
                self._reap_old()
                self._start()
                self._write([r for rs in self._records.values() for r in rs])

    def _reap_old(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _hang_up(proc, 0.5)

    def close(self, timeout_s: float = 2.0) -> None:
        """Close the pipe: the watcher reaps what is still recorded (normally nothing)
        and exits. Waits a little for it so it is not left as a zombie."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and not _hang_up(proc, timeout_s):
            log.warning("the reaper watcher (pid %d) did not exit within %.1fs", proc.pid, timeout_s)


__all__ = ["NoWatcher", "WatcherLink"]
