"""Starting game instances on free ports, watching them boot, and ending them completely.

The Launcher is the one owner of every process the bridge starts; nothing else in the
bridge signals a process. What it promises:

* **Ports** are claimed, never guessed: an exclusive per-port lock shared by every bridge
  of this user (:mod:`.portlock`), then "nothing bound" (a bind test) and "nothing
  answering" (``GET /health``). The lock is held for the instance's life. A full range
  falls back to an OS-assigned port; an explicit port is checked the same way and a
  refusal says what holds it.
* **Launch returns only when ``/health`` answers** ``ok``, polled at a short adaptive
  interval, reporting progress (elapsed, timeout, last output line) on the way. A child
  that exits while booting fails at once with its own last output; one that does not
  answer in time is reaped and reported the same way.
* **Output** goes to a pipe (never the bridge's stdio), pumped to a 0600 log file and a
  200-line ring (:mod:`.capture`).
* **Stopping** asks the game to ``close`` first, waits for the port to go quiet and the
  process to exit, then terminates the whole tree and finally kills it (:mod:`.procs`),
  every signal guarded against pid reuse. The direct child is deliberately left
  unreaped until the end (exit is observed with ``waitid(WNOWAIT)``), so its pid and
  process-group id cannot be recycled while we may still signal the group.
* **Reaping** on the bridge's exit: :meth:`Launcher.shutdown` stops everything at once
  within a short bound; and a watcher process (:mod:`.watcher`), started at the first
  launch, reaps the launched trees if the bridge dies without running any cleanup.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from . import procs
from .capture import OutputCapture, TailReader, default_log_dir, open_log_file, prune_old_logs
from .client import GameClient
from .config import Config, check_port
from .errors import BridgeError, BridgeUsageError, GameOffline, NotAGameSurface
from .portlock import LOCKS_DIRNAME, PortLock, holder_pid
from .procs import MARKER_KEY, ProcRef, Tree
from .project import EXAMPLE, LaunchDeclaration
from .registry import registry_home
from .transport import Opener

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int, str], None]

#: Seconds between progress reports while waiting for /health.
PROGRESS_INTERVAL_S = 0.3
#: The /health poll interval grows from the first to the last value.
POLL_FIRST_S = 0.005
POLL_MAX_S = 0.025
#: Lines of output quoted in a launch failure.
FAILURE_TAIL_LINES = 20
#: After SIGTERM, how long ``stop`` waits before SIGKILL (``shutdown`` uses less).
STOP_TERM_S = 1.5
SHUTDOWN_TERM_S = 0.7
#: After the game closed its port and its first process exited, how long stragglers in
#: its tree get to exit on their own before they are terminated.
STRAGGLER_GRACE_S = 0.5
#: Largest graceMs accepted by stop (ten minutes).
MAX_GRACE_MS = 600_000
#: Upper bound for a launch timeout given as an argument (a day).
MAX_TIMEOUT_MS = 86_400_000

_HAS_WAITID = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")


def _listening_inodes(port: int) -> set[str] | None:
    """``{"socket:[inode]"}`` of TCP sockets listening on ``port``, from /proc/net
    (None where there is no /proc/net/tcp)."""
    found: set[str] = set()
    seen_any = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        seen_any = True
        for row in rows:
            cols = row.split()
            # local_address is HEXIP:HEXPORT; state 0A is LISTEN; column 9 is the inode
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                found.add(f"socket:[{cols[9]}]")
    return found if seen_any else None


def _whole(value: Any) -> Any:
    """An integer-valued float (JSON may deliver 12.0) as an int; anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None if value is None else (value if not isinstance(value, bool) else str(value))


def _how_exited(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the process was killed by {name}"
    return f"the process exited with code {code}"


@dataclass
class _Instance:
    """One launched process tree and everything the launcher owns about it."""

    port: int
    launch_id: str
    declaration: LaunchDeclaration
    command: str
    proc: subprocess.Popen
    leader: ProcRef
    tree: Tree
    lock: PortLock
    capture: OutputCapture
    started: float
    pidfd: int | None = None
    ready: bool = False
    stopping: bool = False
    wrapper_exited: bool = False
    name: str | None = None
    version: str | None = None
    game_pid: int | None = None
    exit_code: int | None = None
    reaped_elsewhere: bool = False
    stop_result: dict | None = None
    stop_lock: threading.Lock = field(default_factory=threading.Lock)

    def leader_exit(self) -> int | None:
        """The direct child's exit code (negative: a signal), or None while it runs.
        Observed without reaping it, so its pid stays ours."""
        if self.exit_code is not None:
            return self.exit_code
        if self.proc.returncode is not None:
            self.exit_code = self.proc.returncode
            return self.exit_code
        if not _HAS_WAITID:  # pragma: no cover - platforms without waitid: reap normally
            self.exit_code = self.proc.poll()
            return self.exit_code
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # someone else reaped it
            self.reaped_elsewhere = True
            self.exit_code = self.proc.poll() if self.proc.returncode is None else self.proc.returncode
            if self.exit_code is None:
                self.exit_code = -1
            return self.exit_code
        if info is None or info.si_pid == 0:
            return None
        self.exit_code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        return self.exit_code

    def leader_unreaped(self) -> bool:
        """True while the direct child's pid (and so its group id) cannot be reused."""
        return _HAS_WAITID and self.proc.returncode is None and not self.reaped_elsewhere

    def wait_leader(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s``, waking at once if the direct child exits."""
        if timeout_s <= 0:
            return
        # A pidfd is readable once the process has exited, so it is a sleep that ends at
        # the exit; after the exit it would return at once, so sleep plainly then.
        if self.pidfd is not None and self.leader_exit() is None:
            try:
                select.select([self.pidfd], [], [], timeout_s)
                return
            except (OSError, ValueError):
                pass
        time.sleep(timeout_s)


class _NoWatcher:
    """The watcher's interface for a detached launcher, which must not reap at exit."""

    pid = None

    def send(self, record: dict) -> None:
        pass

    def close(self, timeout_s: float = 2.0) -> None:
        pass


class _WatcherLink:
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
            self._proc = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=os.path.abspath(os.sep), env=env, close_fds=True, start_new_session=True)
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
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass

    def close(self, timeout_s: float = 2.0) -> None:
        """Close the pipe: the watcher reaps what is still recorded (normally nothing)
        and exits. Waits a little for it so it is not left as a zombie."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("the reaper watcher (pid %d) did not exit within %.1fs", proc.pid, timeout_s)


class Launcher:
    """Starts, tracks, reads and stops the game instances this bridge launches."""

    def __init__(self, config: Config, *, opener: Opener | None = None,
                 environ: Mapping[str, str] | None = None, log_dir: Path | None = None,
                 watcher_log: Path | None = None, detached: bool = False) -> None:
        self.config = config
        self._opener = opener
        self._environ: Mapping[str, str] = dict(environ if environ is not None else config.environ)
        self._log_dir_arg = log_dir
        self._log_dir: Path | None = None
        self._instances: dict[int, _Instance] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: Detached (``call launch_instance --keep``): the game outlives this process, so it
        #: writes its own log file, no watcher is started and shutdown leaves it running.
        self.detached = detached
        self._watcher: Any = _NoWatcher() if detached else _WatcherLink(watcher_log)
        self._monitor: threading.Thread | None = None
        self._monitor_stop = threading.Event()

    # ------------------------------------------------------------------ public
    @property
    def watcher_pid(self) -> int | None:
        """The reaper watcher's pid (None until the first launch)."""
        return self._watcher.pid

    @property
    def locks_dir(self) -> Path:
        return registry_home(self._environ, self.config.registry_dir) / LOCKS_DIRNAME

    def is_launched(self, port: int) -> bool:
        """Whether this bridge launched (and still tracks) an instance on ``port``."""
        with self._lock:
            return port in self._instances

    def launched_ports(self) -> list[int]:
        with self._lock:
            return sorted(self._instances)

    def info(self, port: int) -> dict | None:
        """What the launcher knows of a tracked instance (for list_instances), or None."""
        with self._lock:
            inst = self._instances.get(port)
        if inst is None:
            return None
        return {"port": inst.port, "pid": inst.game_pid or inst.leader.pid, "name": inst.name,
                "version": inst.version, "cwd": str(inst.declaration.cwd), "ready": inst.ready,
                "running": inst.leader_exit() is None or inst.wrapper_exited,
                "logFile": str(inst.capture.log_path)}

    def launch(self, *, port: int | None = None, timeout_ms: int | None = None,
               progress: ProgressCallback | None = None) -> dict:
        """Start the declared game on a free (or the given) port and return once
        ``GET /health`` answers ok: ``{"port", "pid", "name", "version", "cwd",
        "readyInMs", "logFile"}``. Raises BridgeUsageError on every failure."""
        decl = self._declaration()
        timeout_ms = _whole(timeout_ms)
        if timeout_ms is None:
            timeout_ms = decl.ready_timeout_ms
        elif not isinstance(timeout_ms, int) or not 1 <= timeout_ms <= MAX_TIMEOUT_MS:
            raise BridgeUsageError(f"timeoutMs must be a whole number of milliseconds between 1 and {MAX_TIMEOUT_MS}, not {timeout_ms!r}.")
        if port is not None:
            port = check_port(port)
        if not decl.cwd.is_dir():
            raise BridgeUsageError(
                f"Launch declaration {decl.path}: field 'launch.cwd' resolves to {decl.cwd}, which is "
                "not a directory. It is relative to the gamebridge.json file.",
                file=str(decl.path), field="launch.cwd")
        self._check_open()
        lock = self._claim_port(port, decl)
        try:
            inst = self._spawn(decl, lock)
        except BaseException:
            lock.release()
            raise
        try:
            return self._wait_ready(inst, timeout_ms, progress)
        except BaseException:
            if self._is_tracked(inst):  # not already cleaned up by a failure path
                self._discard(inst, term_s=STOP_TERM_S)
            raise

    def stop(self, port: int, *, grace_ms: int = 3000) -> dict:
        """Close, then terminate, then kill the instance this bridge launched on ``port``:
        ``{"port", "stopped", "how", "pid", "exitCode", "stoppedInMs", "logFile"}`` with
        ``how`` one of "closed cleanly", "terminated", "killed" (or "already exited")."""
        grace_ms = _whole(grace_ms)
        if not isinstance(grace_ms, int) or not 0 <= grace_ms <= MAX_GRACE_MS:
            raise BridgeUsageError(f"graceMs must be a whole number of milliseconds between 0 and {MAX_GRACE_MS}, not {grace_ms!r}.")
        return self._stop_port(port, grace_ms=grace_ms, term_s=STOP_TERM_S)

    def log(self, port: int, *, lines: int = 50, since: int | None = None) -> dict:
        """The captured output of a launched instance: ``{"port", "lines", "next",
        "dropped", "more", "logFile", "running", "exitCode"}``. Pass ``since=<next>`` from
        a previous answer to read only what is new."""
        lines = _whole(lines)  # type: ignore[assignment]
        if not isinstance(lines, int) or lines < 0:
            raise BridgeUsageError(f"lines must be a whole number of 0 or more, not {lines!r}.")
        since = _whole(since)  # type: ignore[assignment]
        if since is not None and (not isinstance(since, int) or since < 0):
            raise BridgeUsageError(f"since must be a line number from a previous 'next' (0 or more), not {since!r}.")
        with self._lock:
            inst = self._instances.get(port)
            ports = sorted(self._instances)
        if inst is None:
            held = f" Instances launched here: {', '.join(map(str, ports))}." if ports else ""
            raise BridgeUsageError(
                f"No instance launched by this bridge is on port {port}, so there is no captured "
                "output: instance_log reads only games started with launch_instance (output of a "
                f"game started elsewhere goes wherever that process writes it).{held}", port=port)
        result = inst.capture.read(lines, since)
        code = inst.leader_exit()
        running = code is None or (inst.wrapper_exited and bool(inst.tree.live(marker_scan=False)))
        return {"port": port, **result, "logFile": str(inst.capture.log_path),
                "running": running, "exitCode": None if running else code}

    def shutdown(self, *, grace_ms: int = 1000) -> None:
        """Stop every launched instance at once (close first, then escalation), then
        let the watcher go. Idempotent; bounded (about grace + 2 s); callable from any
        thread. (From a signal handler, raise instead and call it after unwinding, as the
        server does: the handler may have interrupted a launcher call holding its lock.)"""
        with self._lock:
            self._closed = True
            instances = list(self._instances.values())
            if self.detached:  # the games are meant to outlive this process
                self._instances.clear()
        if self.detached:
            for inst in instances:
                reader = getattr(inst.capture, "_pipe", None)
                if isinstance(reader, TailReader):
                    reader.stop()
            self._monitor_stop.set()
            return
        threads = [threading.Thread(target=self._stop_quietly, args=(inst, grace_ms),
                                    name=f"stop-{inst.port}", daemon=True) for inst in instances]
        for thread in threads:
            thread.start()
        bound = time.monotonic() + grace_ms / 1000.0 + SHUTDOWN_TERM_S + 4.0
        for thread in threads:
            thread.join(timeout=max(0.0, bound - time.monotonic()))
        self._monitor_stop.set()
        with self._lock:
            leftover = bool(self._instances)
        if not leftover:
            self._watcher.close()
        else:  # a stop did not finish in time: keep the pipe, the watcher reaps at exit
            log.warning("shutdown: instances on ports %s did not stop in time", self.launched_ports())

    # ------------------------------------------------------------------ launch parts
    def _declaration(self) -> LaunchDeclaration:
        decl = getattr(self.config, "declaration", None)
        if decl is None:
            raise BridgeUsageError(
                "launch_instance needs a launch declaration, and none was found: put a "
                "gamebridge.json in your project root (the bridge looks in its working "
                "directory and every directory above it), or point --config / "
                "GAME_BRIDGE_CONFIG at one. It says how to start the game, with {port} where "
                "the debug port goes:\n" + EXAMPLE + "\nUse \"argv\": [\"./run-game\", "
                "\"--port\", \"{port}\"] instead of \"command\" to run without a shell.")
        return decl

    def _check_open(self) -> None:
        if self._closed:
            raise BridgeUsageError("The bridge is shutting down; it launches no more instances.")

    def _locks_dir(self) -> Path:
        primary = self.locks_dir
        try:
            primary.mkdir(mode=0o700, parents=True, exist_ok=True)
            return primary
        except OSError as exc:
            fallback = default_log_dir().parent / f"game-bridge-locks-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
            log.warning("cannot use %s for port locks (%s); using %s", primary, exc, fallback)
            return fallback

    def _port_problem(self, port: int) -> str | None:
        """None when nothing is bound to 127.0.0.1:port and nothing answers there;
        otherwise what holds it, in words."""
        bind_error: OSError | None = None
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            bind_error = exc
        finally:
            probe.close()
        client = GameClient(port, opener=self._opener, timeout_ms=300)
        try:
            health = client.health(timeout_ms=300)
            frame = health.get("frame")
            return ("a game is already running there (GET /health answered ok"
                    + (f", frame {frame}" if isinstance(frame, int) else "") + ")")
        except NotAGameSurface as exc:
            return f"something else is listening there, not a game ({exc.detail})"
        except GameOffline:
            pass
        except BridgeError as exc:  # pragma: no cover - any other answer means "taken"
            return f"something else answers there ({exc.message})"
        if bind_error is not None:
            return (f"another process has bound 127.0.0.1:{port} "
                    f"({bind_error.strerror or bind_error}) and does not answer HTTP")
        return None

    def _claim_port(self, port: int | None, decl: LaunchDeclaration) -> PortLock:
        locks = self._locks_dir()
        if port is not None:
            lock = PortLock.try_acquire(locks, port)
            if lock is None:
                if self.is_launched(port):
                    raise BridgeUsageError(
                        f"Port {port} already runs an instance this bridge launched. Use it, or "
                        f"stop_instance {{\"port\": {port}}} first; leave out 'port' to get a free one.",
                        port=port)
                holder = holder_pid(locks, port)
                raise BridgeUsageError(
                    f"Port {port} is taken: another game-bridge"
                    + (f" (pid {holder})" if holder else "")
                    + " holds the lock on it, for a game it launched or is launching there. "
                    "Leave out 'port' and launch_instance picks a free one.", port=port)
            problem = self._port_problem(port)
            if problem is not None:
                lock.release()
                low, high = decl.port_range
                raise BridgeUsageError(
                    f"Port {port} is taken: {problem}. Leave out 'port' and launch_instance "
                    f"picks a free one from {low}-{high}.", port=port)
            return lock
        low, high = decl.port_range
        for candidate in range(low, high + 1):
            lock = PortLock.try_acquire(locks, candidate)
            if lock is None:
                continue
            problem = self._port_problem(candidate)
            if problem is None:
                return lock
            log.debug("port %d skipped: %s", candidate, problem)
            lock.release()
        for _attempt in range(20):  # the declared range is full: let the OS pick
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("127.0.0.1", 0))
                candidate = probe.getsockname()[1]
            lock = PortLock.try_acquire(locks, candidate)
            if lock is None:
                continue
            if self._port_problem(candidate) is None:
                log.info("ports %d-%d are all taken; using OS-assigned port %d", low, high, candidate)
                return lock
            lock.release()
        raise BridgeUsageError(
            f"No free port: every port in {low}-{high} is taken and no OS-assigned port could be "
            "claimed. Stop instances you no longer need, or widen launch.portRange in "
            f"{decl.path}.")

    def _child_env(self, decl: LaunchDeclaration, port: int, launch_id: str) -> dict[str, str]:
        env = dict(self._environ)
        env.update(decl.render_env(port))
        env[MARKER_KEY] = procs.marker_value(self._environ.get(MARKER_KEY), launch_id)
        return env

    def _ensure_log_dir(self) -> Path:
        if self._log_dir is None:
            if self._log_dir_arg is not None:
                self._log_dir_arg.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._log_dir = self._log_dir_arg
            else:
                self._log_dir = default_log_dir()
                prune_old_logs(self._log_dir)
        return self._log_dir

    def _spawn(self, decl: LaunchDeclaration, lock: PortLock) -> _Instance:
        port = lock.port
        command, use_shell = decl.render(port)
        display = decl.display(port)
        launch_id = f"{os.getpid()}-{uuid.uuid4().hex}"
        env = self._child_env(decl, port, launch_id)
        log_path, log_fd = open_log_file(self._ensure_log_dir(), port)
        # The watcher learns the marker before the spawn, so a bridge killed in between
        # still leaves something findable.
        self._watcher.send({"op": "expect", "id": launch_id, "marker": launch_id})
        try:
            with self._lock:
                self._check_open()
                started = time.monotonic()
                proc = subprocess.Popen(
                    command, shell=use_shell, cwd=str(decl.cwd), env=env,
                    stdin=subprocess.DEVNULL, stdout=log_fd if self.detached else subprocess.PIPE,
                    stderr=subprocess.STDOUT, close_fds=True, start_new_session=True)
                leader = procs.ref_for(proc.pid) or ProcRef(proc.pid, 0.0)
                pidfd = None
                if hasattr(os, "pidfd_open"):
                    try:
                        pidfd = os.pidfd_open(proc.pid)
                    except OSError:
                        pidfd = None
                if self.detached:
                    os.close(log_fd)  # the game holds it now; we only tail the file
                    capture = OutputCapture(TailReader(log_path), log_path, None)  # type: ignore[arg-type]
                else:
                    assert proc.stdout is not None
                    capture = OutputCapture(proc.stdout, log_path, log_fd)
                inst = _Instance(port=port, launch_id=launch_id, declaration=decl, command=display,
                                 proc=proc, leader=leader,
                                 tree=Tree(leader=leader, pgid=proc.pid, marker=launch_id, known=set()),
                                 lock=lock, capture=capture, started=started, pidfd=pidfd,
                                 name=decl.name)
                inst.tree.leader_guard = inst.leader_unreaped
                self._instances[port] = inst
        except OSError as exc:
            os.close(log_fd)
            self._watcher.send({"op": "forget", "id": launch_id})
            raise BridgeUsageError(
                f"Launch failed on port {port}: the command could not be started "
                f"({exc.strerror or exc}{': ' + repr(exc.filename) if getattr(exc, 'filename', None) else ''}).\n"
                f"Command: {display}\nWorking directory: {decl.cwd}",
                port=port, command=display, cwd=str(decl.cwd)) from None
        except BaseException:
            os.close(log_fd)
            self._watcher.send({"op": "forget", "id": launch_id})
            raise
        self._watcher.send({"op": "launch", "id": launch_id, "pid": leader.pid,
                            "ctime": leader.create_time, "pgid": proc.pid, "marker": launch_id})
        self._start_monitor()
        log.info("launched %s on port %d (pid %d), log %s", display, port, proc.pid, log_path)
        return inst

    def _wait_ready(self, inst: _Instance, timeout_ms: int, progress: ProgressCallback | None) -> dict:
        client = GameClient(inst.port, opener=self._opener, timeout_ms=1000)
        deadline = inst.started + timeout_ms / 1000.0
        next_report = inst.started + PROGRESS_INTERVAL_S
        interval = POLL_FIRST_S
        last_problem = "nothing answered yet"
        while True:
            if inst.stopping:
                raise BridgeUsageError(
                    f"Launch on port {inst.port} was cancelled: the instance was stopped while it "
                    "was booting.", port=inst.port)
            code = inst.leader_exit()
            if code is not None and not inst.wrapper_exited:
                # A wrapper that exits 0 and leaves the game running (a start script that
                # backgrounds it) is not a failure; any other exit during boot is.
                if code == 0 and inst.tree.live():
                    inst.wrapper_exited = True
                    log.info("port %d: the launch command exited 0 but left processes running; "
                             "still waiting for /health", inst.port)
                else:
                    self._fail_launch(inst, _how_exited(code), exit_code=code)
            try:
                client.health(timeout_ms=int(max(0.05, min(1.0, deadline - time.monotonic())) * 1000))
                return self._ready(inst, client)
            except GameOffline as exc:
                last_problem = "connection refused" if "No game is answering" in exc.message else exc.message.split("\n")[0]
            except NotAGameSurface as exc:
                last_problem = exc.detail
            now = time.monotonic()
            if now >= deadline:
                self._fail_launch(inst, f"the game did not answer GET /health within {timeout_ms}ms "
                                        f"(last check: {last_problem})", timed_out=True)
            if progress is not None and now >= next_report:
                next_report = now + PROGRESS_INTERVAL_S
                try:
                    progress(int((now - inst.started) * 1000), timeout_ms, inst.capture.last_line())
                except Exception:  # a broken progress sink must not break the launch
                    log.debug("progress callback failed", exc_info=True)
            inst.wait_leader(min(interval, max(0.0, deadline - now)))
            interval = min(interval * 1.5, POLL_MAX_S)

    def _ready(self, inst: _Instance, client: GameClient) -> dict:
        ready_ms = int((time.monotonic() - inst.started) * 1000)
        try:
            manifest = client.tools(timeout_ms=2000)
        except BridgeError:
            manifest = None
        game = manifest.get("game") if isinstance(manifest, dict) else None
        if isinstance(game, dict):
            if isinstance(game.get("name"), str) and game["name"].strip():
                inst.name = game["name"][:200]
            version = game.get("version")
            if isinstance(version, (str, int, float)) and not isinstance(version, bool):
                inst.version = str(version)[:100]
        self._note_descendants(inst)
        inst.game_pid = self._listener_pid(inst) or inst.leader.pid
        inst.ready = True
        return {"port": inst.port, "pid": inst.game_pid, "name": inst.name, "version": inst.version,
                "cwd": str(inst.declaration.cwd), "readyInMs": ready_ms,
                "logFile": str(inst.capture.log_path)}

    def _listener_pid(self, inst: _Instance) -> int | None:
        """The pid in the tree that listens on the port (the game itself, when the
        command is a shell or a build tool); None if it cannot be told."""
        live = inst.tree.live(marker_scan=False)
        if len(live) <= 1:
            return live[0].pid if live else None
        inodes = _listening_inodes(inst.port)
        if inodes is not None:  # Linux: match the socket's inode among the tree's fds
            for ref in live:
                try:
                    fds = os.listdir(f"/proc/{ref.pid}/fd")
                except OSError:
                    continue
                for fd in fds:
                    try:
                        if os.readlink(f"/proc/{ref.pid}/fd/{fd}") in inodes:
                            return ref.pid
                    except OSError:
                        continue
            return None
        if procs.psutil is None:  # pragma: no cover
            return None
        for ref in live:  # pragma: no cover - other platforms
            try:
                proc = procs.psutil.Process(ref.pid)
                conns = getattr(proc, "net_connections", None) or proc.connections
                for conn in conns(kind="tcp"):
                    if conn.status == procs.psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == inst.port:
                        return ref.pid
            except (procs.psutil.Error, OSError):
                continue
        return None

    def _fail_launch(self, inst: _Instance, what: str, *, exit_code: int | None = None,
                     timed_out: bool = False) -> None:
        """Reap the tree, forget the instance and raise the spec's boot-failure error."""
        self._discard(inst, term_s=STOP_TERM_S)
        inst.capture.wait_eof(0.5)
        tail = inst.capture.tail(FAILURE_TAIL_LINES)
        output = "\n".join(tail) if tail else "(the process printed nothing)"
        message = (f"Launch failed on port {inst.port}: {what}.\n"
                   f"Command: {inst.command}\n"
                   f"Working directory: {inst.declaration.cwd}\n"
                   f"Full log: {inst.capture.log_path}\n\n"
                   f"Last output:\n{output}")
        raise BridgeUsageError(message, port=inst.port, exitCode=exit_code, timedOut=timed_out,
                               command=inst.command, cwd=str(inst.declaration.cwd),
                               logFile=str(inst.capture.log_path), lastOutput=tail)

    # ------------------------------------------------------------------ stop parts
    def _is_tracked(self, inst: _Instance) -> bool:
        with self._lock:
            return self._instances.get(inst.port) is inst

    def _stop_port(self, port: int, *, grace_ms: int, term_s: float) -> dict:
        with self._lock:
            inst = self._instances.get(port)
        if inst is None:
            raise BridgeUsageError(
                f"Port {port} is not an instance this bridge launched, so stop_instance will not "
                "touch it: it only ends games it started (and still tracks). To end that game, "
                f"ask it to close itself: call_tool {{\"port\": {port}, \"name\": \"close\"}}.",
                port=port)
        return self._stop_instance(inst, grace_ms=grace_ms, term_s=term_s)

    def _stop_quietly(self, inst: _Instance, grace_ms: int) -> None:
        try:
            self._stop_instance(inst, grace_ms=grace_ms, term_s=SHUTDOWN_TERM_S)
        except Exception:  # shutdown must go on with the others
            log.exception("stopping the instance on port %d failed", inst.port)

    def _stop_instance(self, inst: _Instance, *, grace_ms: int, term_s: float) -> dict:
        inst.stopping = True
        with inst.stop_lock:
            if inst.stop_result is not None:  # a concurrent stop finished it
                return dict(inst.stop_result)
            t0 = time.monotonic()
            how, survivors = self._end_tree(inst, grace_ms=grace_ms, term_s=term_s)
            result: dict[str, Any] = {
                "port": inst.port, "stopped": not survivors, "how": how,
                "pid": inst.game_pid or inst.leader.pid, "exitCode": inst.leader_exit(),
                "stoppedInMs": int((time.monotonic() - t0) * 1000),
                "logFile": str(inst.capture.log_path)}
            if survivors:
                result["survivors"] = [ref.pid for ref in survivors]
                result["message"] = (f"Processes {result['survivors']} survived SIGKILL (probably stuck "
                                     "in the kernel); they hold no port lock any more.")
            self._forget(inst)
            inst.stop_result = result
            return dict(result)

    def _end_tree(self, inst: _Instance, *, grace_ms: int, term_s: float) -> tuple[str, list[ProcRef]]:
        if not inst.tree.live():
            return "already exited", []
        client = GameClient(inst.port, opener=self._opener, timeout_ms=max(100, min(grace_ms, 1000)))
        deadline = time.monotonic() + grace_ms / 1000.0
        if not client.port_is_quiet(timeout_ms=200):
            try:
                client.command("close", timeout_ms=max(100, min(grace_ms, 1000)))
            except BridgeError as exc:  # a game dropping the connection while closing is closing
                log.debug("close on port %d: %s", inst.port, exc)
            quiet_since: float | None = None
            interval = 0.01
            while True:
                now = time.monotonic()
                quiet = client.port_is_quiet(timeout_ms=100)
                if quiet and not inst.tree.live(marker_scan=False):
                    break
                if quiet and inst.leader_exit() is not None:
                    quiet_since = quiet_since or now
                    if now - quiet_since >= STRAGGLER_GRACE_S:
                        break
                if now >= deadline:
                    break
                inst.wait_leader(min(interval, max(0.0, deadline - now)))
                interval = min(interval * 1.5, 0.1)
        how, survivors = procs.reap_tree(inst.tree, term_s=term_s, kill_s=1.0)
        return how or "closed cleanly", survivors

    def _discard(self, inst: _Instance, *, term_s: float) -> None:
        """End a tree without asking it to close (a failed or cancelled launch)."""
        inst.stopping = True
        with inst.stop_lock:
            if inst.stop_result is None:
                procs.reap_tree(inst.tree, term_s=term_s, kill_s=1.0)
                self._forget(inst)
                inst.stop_result = {"port": inst.port, "stopped": True, "how": "terminated"}

    def _forget(self, inst: _Instance) -> None:
        """Release everything held for an ended instance: the child's exit status, the
        pidfd, the port lock, the watcher's record."""
        with self._lock:
            if self._instances.get(inst.port) is inst:
                del self._instances[inst.port]
        inst.leader_exit()
        try:
            inst.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if SIGKILL failed
            log.warning("pid %d did not exit; left unreaped", inst.proc.pid)
        if inst.pidfd is not None:
            try:
                os.close(inst.pidfd)
            except OSError:
                pass
            inst.pidfd = None
        inst.lock.release()
        self._watcher.send({"op": "forget", "id": inst.launch_id})

    # ------------------------------------------------------------------ monitor
    def _start_monitor(self) -> None:
        with self._lock:
            if self._monitor is not None and self._monitor.is_alive():
                return
            self._monitor = threading.Thread(target=self._monitor_loop, name="launcher-monitor", daemon=True)
            self._monitor.start()

    def _monitor_loop(self) -> None:
        """Once a second, record new descendants of every instance (and tell the
        watcher), so a grandchild that later escapes the group is still known."""
        while not self._monitor_stop.wait(1.0):
            with self._lock:
                instances = list(self._instances.values())
            for inst in instances:
                if not inst.stopping:
                    self._note_descendants(inst)

    def _note_descendants(self, inst: _Instance) -> None:
        try:
            for ref in inst.tree.refresh():
                self._watcher.send({"op": "child", "id": inst.launch_id, "pid": ref.pid,
                                    "ctime": ref.create_time})
        except Exception:  # pragma: no cover - monitoring is best effort
            log.debug("descendant refresh failed", exc_info=True)


__all__ = ["Launcher", "ProgressCallback"]
