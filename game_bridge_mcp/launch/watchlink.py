"""The launcher's pipe to the reaper watcher: started at the first record, kept alive, replaced
when it dies or stops reading, and never able to hold the launcher up
(docs/design.md, "The watcher"). A detached launcher uses :class:`NoWatcher`."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import parent, procs
from .procs import MARKER_KEY

log = logging.getLogger(__name__)

#: How often the writer thread checks that the watcher lives.
CHECK_S = 0.25
#: A watcher that takes no bytes for this long is stalled: killed and replaced.
WRITE_DEADLINE_S = 1.0
#: How often recorded children are checked for having exited.
PRUNE_S = 2.0
#: A ping is sent this long after the watcher last answered one ...
PING_S = 1.0
#: ... and a watcher that has not answered it within this is stalled: killed and replaced.
ANSWER_DEADLINE_S = 2.0


class NoWatcher:
    """The watcher's interface for a detached launcher, which must not reap at exit."""

    pid = None

    def send(self, record: dict[str, Any]) -> None:
        pass

    def close(self, timeout_s: float = 2.0) -> None:
        pass


class _Launch:
    """The records in force for one launch id: its base records and its live children."""

    def __init__(self) -> None:
        self.base: list[dict[str, Any]] = []
        self.children: dict[tuple[int, float], dict[str, Any]] = {}

    def records(self) -> list[dict[str, Any]]:
        return [*self.base, *self.children.values()]


def _encode(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()


class WatcherLink:
    """The pipe to the watcher process: started at the first record, replaced when it
    dies or stalls, closed on shutdown. Keeps the records in force, so a new watcher
    gets them all again."""

    def __init__(self, log_path: Path | None) -> None:
        self._log_path = log_path
        self._cond = threading.Condition()
        self._launches: dict[str, _Launch] = {}
        self._pending: list[bytes] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._ref: procs.ProcRef | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._disabled = False
        self._next_prune = 0.0
        self._ping_seq = 0
        self._ping_sent: float | None = None  # when the unanswered ping went, if one is out
        self._answered_at = 0.0
        self._answers = b""
        #: How many watchers were started (a replacement counts).
        self.started = 0

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    # ------------------------------------------------------------------ the launcher's side
    def send(self, record: dict[str, Any]) -> None:
        """Record ``record`` and queue it for the watcher (starting one at the first
        record). Never blocks on the watcher."""
        ident = str(record.get("id"))
        with self._cond:
            if record.get("op") == "forget":
                self._launches.pop(ident, None)
            elif record.get("op") == "child":
                if ident not in self._launches:
                    return
                key = (int(record.get("pid", 0)), float(record.get("ctime", 0.0)))
                self._launches[ident].children[key] = record
            else:
                self._launches.setdefault(ident, _Launch()).base.append(record)
            if self._disabled or self._closing:
                return
            self._pending.append(_encode([record]))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="watcher-link", daemon=True)
                self._thread.start()
            self._cond.notify()

    def held_records(self) -> int:
        """How many records are kept for a new watcher (bounded by what is alive)."""
        with self._cond:
            return sum(len(launch.records()) for launch in self._launches.values())

    def close(self, timeout_s: float = 2.0) -> None:
        """Deliver what is queued (within the deadline), then close the pipe: the watcher
        reaps what is still recorded (normally nothing) and exits. A watcher that does
        not take the last records is killed instead. Waits a little for it."""
        with self._cond:
            self._closing = True
            thread = self._thread
            self._cond.notify()
        if thread is not None:
            thread.join(timeout=WRITE_DEADLINE_S + 1.0)
        with self._cond:
            proc, self._proc = self._proc, None
            ref, self._ref = self._ref, None
            flushed = not self._pending
        if proc is None:
            return
        if not flushed:  # it would wake and reap on records it never got to forget
            self._kill(proc, ref)
            return
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=timeout_s)
            parent.disown(proc.pid)
        except subprocess.TimeoutExpired:
            log.warning("the reaper watcher (pid %d) did not exit within %.1fs", proc.pid, timeout_s)

    # ------------------------------------------------------------------ the writer thread
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._pending and not self._closing:
                    self._cond.wait(CHECK_S)
                data = b"".join(self._pending)
                self._pending.clear()
                closing = self._closing
            try:
                self._tend(data)
            except Exception:  # pragma: no cover - the link must never take the launcher down
                log.exception("the watcher link failed")
            if closing:
                return

    def _tend(self, data: bytes) -> None:
        """Make sure a live watcher has ``data`` (or, after a replacement, everything)."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            log.warning("the reaper watcher (pid %d) died; starting a new one", proc.pid)
            parent.disown(proc.pid)
            proc = self._proc = None
        if proc is None:
            if self._disabled or not self._has_records():
                return
            if not self._start():  # told everything in force, the queued records included
                return
            data = b""
        if not self._answering():
            log.warning("the reaper watcher (pid %s) has not answered for %.1fs; replacing it",
                        self.pid, ANSWER_DEADLINE_S)
            self._replace()
        elif (data or self._ping_due()) and not self._write(data + self._ping()):
            log.warning("the reaper watcher (pid %s) stopped taking records; replacing it", self.pid)
            self._replace()
        if time.monotonic() >= self._next_prune:
            self._next_prune = time.monotonic() + PRUNE_S
            self._drop_dead_children()

    def _replace(self) -> None:
        """Kill the current watcher (it can be told nothing, so it must reap nothing) and
        start a new one, told everything in force."""
        old, ref = self._proc, self._ref
        if old is not None:
            self._kill(old, ref)
        self._proc = None
        self._start()

    def _answering(self) -> bool:
        """Read the watcher's answers; False when a ping has waited past its deadline."""
        proc = self._proc
        if proc is None or proc.stdout is None or self._ping_sent is None:
            return True
        try:
            self._answers += os.read(proc.stdout.fileno(), 4096)
        except OSError:  # nothing yet (EAGAIN), or its end is gone: the deadline decides
            pass
        lines = self._answers.split(b"\n")
        self._answers = lines[-1][-64:]
        for line in lines[:-1]:
            if line.strip() == str(self._ping_seq).encode():
                self._ping_sent = None
                self._answered_at = time.monotonic()
                return True
        return time.monotonic() - self._ping_sent <= ANSWER_DEADLINE_S

    def _ping_due(self) -> bool:
        return self._ping_sent is None and time.monotonic() - self._answered_at >= PING_S

    def _ping(self) -> bytes:
        """A ping record (when one is due and none is out), to be answered on stdout."""
        if not self._ping_due():
            return b""
        self._ping_seq += 1
        self._ping_sent = time.monotonic()
        return _encode([{"op": "ping", "seq": self._ping_seq}])

    def _has_records(self) -> bool:
        with self._cond:
            return bool(self._launches)

    def _snapshot(self) -> bytes:
        with self._cond:
            self._pending.clear()
            return _encode([r for launch in self._launches.values() for r in launch.records()])

    def _drop_dead_children(self) -> None:
        with self._cond:
            children = [(ident, key) for ident, launch in self._launches.items() for key in launch.children]
        dead = [(ident, key) for ident, key in children if not procs.is_alive(procs.ProcRef(*key))]
        if dead:
            with self._cond:
                for ident, key in dead:
                    launch = self._launches.get(ident)
                    if launch is not None:
                        launch.children.pop(key, None)

    def _start(self) -> bool:
        """Start a watcher and tell it everything in force. The records are in its pipe
        before it exists, so a bridge killed the moment after still leaves them with it."""
        script = Path(__file__).with_name("watcher.py")
        if not sys.executable or not script.is_file():
            log.warning("cannot start the reaper watcher (no Python executable or %s missing); "
                        "launched games will not be reaped if this process is killed", script)
            self._disabled = True
            return False
        me = procs.ref_for(os.getpid())
        args = [sys.executable, str(script), "--bridge-pid", str(os.getpid())]
        if me is not None:
            args += ["--bridge-ctime", repr(me.create_time)]
        if self._log_path is not None:
            args += ["--log", str(self._log_path)]
        env = {k: v for k, v in os.environ.items() if k != MARKER_KEY}
        snapshot = self._snapshot()
        try:
            read_end, write_end = os.pipe()
        except OSError as exc:
            log.warning("cannot start the reaper watcher (%s); launched games will not be reaped "
                        "if this process is killed", exc)
            return False
        first = _prefill(write_end, snapshot)
        try:
            with parent.spawning() as own:
                proc = subprocess.Popen(
                    args, stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    cwd=os.path.abspath(os.sep), env=env, close_fds=True, start_new_session=True)
                own.add(proc.pid)
        except OSError as exc:
            os.close(write_end)
            log.warning("cannot start the reaper watcher (%s); launched games will not be reaped "
                        "if this process is killed", exc)
            self._disabled = True
            return False
        finally:
            os.close(read_end)
        proc.stdin = open(write_end, "wb", buffering=0)  # our pipe, as Popen would have made it
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        self._proc, self._ref = proc, procs.ref_for(proc.pid)
        self._ping_sent, self._answered_at, self._answers = None, time.monotonic(), b""
        self.started += 1
        return first == len(snapshot) or self._write(snapshot[first:])

    def _write(self, data: bytes) -> bool:
        """Write ``data`` to the current watcher, never blocking: False when the pipe is
        broken, or when no byte could be written for :data:`WRITE_DEADLINE_S`."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            return False
        fd = proc.stdin.fileno()
        view = memoryview(data)
        stalled_since = time.monotonic()
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                written = 0
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                return False  # EPIPE: it is gone
            if written:
                view = view[written:]
                stalled_since = time.monotonic()
                continue
            left = WRITE_DEADLINE_S - (time.monotonic() - stalled_since)
            if left <= 0:
                return False
            try:
                select.select([], [fd], [], min(left, CHECK_S))
            except (OSError, ValueError):
                return False
        return True

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes], ref: Any) -> None:
        """End a watcher that cannot be talked to (SIGKILL: it reaps nothing on the way)."""
        if ref is not None:
            procs.send_signal(ref, signal.SIGKILL)
        try:
            proc.wait(timeout=2.0)
            parent.disown(proc.pid)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL always ends it
            log.warning("the stalled reaper watcher (pid %d) did not die", proc.pid)
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


def _prefill(fd: int, data: bytes) -> int:
    """Put as much of ``data`` into a new pipe as it holds (made larger if need be,
    within what the system allows), never blocking; how many bytes went in."""
    os.set_blocking(fd, False)
    size_op = getattr(fcntl, "F_SETPIPE_SZ", None)
    if size_op is not None and len(data) > 65536:
        try:
            fcntl.fcntl(fd, size_op, min(len(data), 1 << 20))
        except OSError:
            pass
    done = 0
    while done < len(data):
        try:
            written = os.write(fd, memoryview(data)[done:])
        except OSError:  # full (BlockingIOError), or closed
            break
        if not written:
            break
        done += written
    return done


__all__ = ["ANSWER_DEADLINE_S", "CHECK_S", "NoWatcher", "PING_S", "WRITE_DEADLINE_S", "WatcherLink"]
