"""Starting game instances on claimed ports, watching them boot, and ending them completely:
the :class:`Launcher` is the one owner of every process the bridge starts (docs/launching.md)."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, NoReturn

from . import parent, procs
from .capture import LOG_CAP_BYTES, TailReader, open_log_file, prune_logs
from ..wire.client import GameClient
from ..config import Config, check_port
from ..errors import BridgeError, BridgeUsageError, GameOffline, NotAGameSurface
from .instance import LaunchedInstance, how_exited
from .portclaim import claim_port, lost_notes, lost_port
from .portlock import PortLock
from .procs import MARKER_KEY
from .declaration import LaunchDeclaration, required_declaration
from ..paths import ENV_INSTANCES, check_home, locks_dir, log_dir, make_dirs, package_path_dir, registry_dir
from ..polling import Deadline, poll_until
from ..wire.transport import Opener
from .trust import check_command
from .hold.contain import Containment
from .monitor import Monitor
from .watchlink import NoWatcher, WatcherLink

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int, str], None]

PYTHONPATH = "PYTHONPATH"

#: Seconds between progress reports while waiting for /health.
PROGRESS_INTERVAL_S = 0.3
#: The /health poll interval grows from the first to the last value.
POLL_FIRST_S = 0.005
POLL_MAX_S = 0.025
#: After SIGTERM, how long ``stop`` waits before SIGKILL (``shutdown`` uses less).
STOP_TERM_S = 1.5
SHUTDOWN_TERM_S = 0.7
#: Launches again on another port when a game loses the one it was given (to another process,
#: between the bridge's claim and the game's bind), this many times.
PORT_RETRIES = 2
#: Largest graceMs accepted by stop (ten minutes).
MAX_GRACE_MS = 600_000
#: After the tree is gone, how long ``stop`` waits for the leader's exit status.
EXIT_STATUS_S = 1.0
#: Upper bound for a launch timeout given as an argument (a day).
MAX_TIMEOUT_MS = 86_400_000
#: Stopped instances whose output ``log`` still reads (each until the next launch on its port).
ENDED_KEPT = 32


def _whole(value: Any) -> Any:
    """An integer-valued float (JSON may deliver 12.0) as an int; anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None if value is None else (value if not isinstance(value, bool) else str(value))


#: Environment variables that are the bridge's secrets: a launched game does not inherit them
#: (``GAME_BRIDGE_TOKEN``: the bearer token of ``--http``).
BRIDGE_SECRETS = frozenset({"GAME_BRIDGE_TOKEN"})

class Launcher:
    """Starts, tracks, reads and stops the game instances this bridge launches."""

    def __init__(self, config: Config, *, opener: Opener | None = None,
                 environ: Mapping[str, str] | None = None, log_dir: Path | None = None,
                 watcher_log: Path | None = None, detached: bool = False,
                 log_cap_bytes: int = LOG_CAP_BYTES, containment: str = "auto") -> None:
        parent.restore_sigchld()  # a no-op off the main thread; entry points did it already
        self.config = config
        self._opener = opener
        self._environ: Mapping[str, str] = dict(environ if environ is not None else config.environ)
        self._log_dir_arg = log_dir
        self._log_dir: Path | None = None
        self._instances: dict[int, LaunchedInstance] = {}
        self._ended: dict[int, LaunchedInstance] = {}  # stopped: their output, until the port's next launch
        self._lock = threading.Lock()
        self._closed = False
        #: Detached (``call launch_instance --keep``): the game outlives this process, so it
        #: writes its own log file, no watcher is started and shutdown leaves it running.
        self.detached = detached
        #: Most bytes of output kept on disk per launched instance (a detached game writes
        #: its log itself, so it is not capped).
        self.log_cap_bytes = log_cap_bytes
        self._watcher: Any = NoWatcher() if detached else WatcherLink(watcher_log)
        #: How each launched tree is held together so it ends with the bridge (.hold.contain):
        #: its own cgroup, else a keeper; a detached game is meant to outlive this process.
        self._containment = Containment("none" if detached else containment)
        #: Once a second: new descendants, adopted orphans, adopted zombies (.monitor).
        self._monitor = Monitor(self._tracked, self._watcher)

    # ------------------------------------------------------------------ public
    @property
    def watcher_pid(self) -> int | None:
        """The reaper watcher's pid (None until the first launch)."""
        pid: int | None = self._watcher.pid
        return pid

    @property
    def locks_dir(self) -> Path:
        return locks_dir(self._environ, self.config.registry_dir)

    def is_launched(self, port: int) -> bool:
        """Whether this bridge launched (and still tracks) an instance on ``port``."""
        with self._lock:
            return port in self._instances

    def has_output(self, port: int) -> bool:
        """Whether ``log`` reads output for ``port`` (a tracked instance, or one stopped since)."""
        with self._lock:
            return port in self._instances or port in self._ended

    def launched_ports(self) -> list[int]:
        with self._lock:
            return sorted(self._instances)

    def info(self, port: int) -> dict[str, Any] | None:
        """What the launcher knows of a tracked instance (for list_instances), or None."""
        with self._lock:
            inst = self._instances.get(port)
        return None if inst is None else inst.info()

    def launch(self, *, port: int | None = None, timeout_ms: int | None = None,
               progress: ProgressCallback | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Start the declared game on a free (or the given) port and return once
        ``GET /health`` answers ok: ``{"port", "pid", "name", "version", "cwd",
        "readyInMs", "logFile"}``. ``env``: variables for this launch only, over the
        declaration's (``GAME_BRIDGE_START_PAUSED`` for a paused start). Raises
        BridgeUsageError on every failure."""
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
        # The program and script it runs must be out of other users' reach, like the
        # declaration (the files do not depend on the port: the first one stands in).
        probe_port = port if port is not None else decl.port_range[0]
        check_command(decl.path, *decl.render(probe_port), decl.cwd,
                      {**self._environ, **decl.render_env(probe_port), **(env or {})})
        self._check_open()
        # Port locks, logs and the Python path a launched game imports live in the home:
        # one another user could change is refused, naming it (docs/reliability.md).
        check_home(self._environ, self.config.registry_dir)
        lost: dict[int, str] = {}  # ports a game lost to another process before it bound them
        started = time.monotonic()
        while True:
            lock = claim_port(port, decl, locks_dir=self.locks_dir, opener=self._opener,
                              is_launched=self.is_launched, avoid=lost)
            try:
                inst = self._spawn(decl, lock, env or {})
            except BaseException:
                lock.release()
                raise
            try:
                answer = self._wait_ready(inst, timeout_ms, progress, since=started)
            except BaseException as exc:
                if self._is_tracked(inst):  # not already cleaned up by a failure path
                    self._discard(inst, term_s=STOP_TERM_S)
                why = lost_port(exc) if isinstance(exc, BridgeUsageError) and port is None and \
                    len(lost) < PORT_RETRIES else None
                if why is None:
                    raise
                log.warning("port %d was taken while the game started (%s); launching on another", inst.port, why)
                lost[inst.port] = why
                continue
            if lost:
                answer["notes"] = [*answer.get("notes", ()), *lost_notes(lost, inst.port)]
            return answer

    def stop(self, port: int, *, grace_ms: int = 3000) -> dict[str, Any]:
        """Close, then terminate, then kill the instance this bridge launched on ``port``:
        ``{"port", "stopped", "how", "pid", "exitCode", "stoppedInMs", "logFile"}`` with
        ``how`` one of "closed cleanly", "terminated", "killed" (or "already exited")."""
        grace_ms = _whole(grace_ms)
        if not isinstance(grace_ms, int) or not 0 <= grace_ms <= MAX_GRACE_MS:
            raise BridgeUsageError(f"graceMs must be a whole number of milliseconds between 0 and {MAX_GRACE_MS}, not {grace_ms!r}.")
        return self._stop_port(port, grace_ms=grace_ms, term_s=STOP_TERM_S)

    def log(self, port: int, *, lines: int = 50, since: int | None = None) -> dict[str, Any]:
        """The captured output of a launched instance: ``{"port", "lines", "next",
        "dropped", "more", "logFile", "running", "exitCode"}``. Pass ``since=<next>`` from
        a previous answer to read only what is new."""
        lines = _whole(lines)
        if not isinstance(lines, int) or lines < 0:
            raise BridgeUsageError(f"lines must be a whole number of 0 or more, not {lines!r}.")
        since = _whole(since)
        if since is not None and (not isinstance(since, int) or since < 0):
            raise BridgeUsageError(f"since must be a line number from a previous 'next' (0 or more), not {since!r}.")
        with self._lock:
            inst = self._instances.get(port)
            ended = self._ended.get(port) if inst is None else None
            ports = sorted(self._instances)
        if ended is not None:  # stopped: what it wrote, and that it has stopped
            return ended.log_answer(lines, since, stopped=True)
        if inst is None:
            held = f" Instances launched here: {', '.join(map(str, ports))}." if ports else ""
            raise BridgeUsageError(
                f"No instance launched by this bridge is on port {port}, so there is no captured "
                "output: instance_log reads only games started with launch_instance (output of a "
                f"game started elsewhere goes wherever that process writes it).{held}", port=port)
        return inst.log_answer(lines, since)

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
            self._monitor.stop()
            return
        threads = [threading.Thread(target=self._stop_quietly, args=(inst, grace_ms),
                                    name=f"stop-{inst.port}", daemon=True) for inst in instances]
        for thread in threads:
            thread.start()
        bound = time.monotonic() + grace_ms / 1000.0 + SHUTDOWN_TERM_S + 4.0
        for thread in threads:
            thread.join(timeout=max(0.0, bound - time.monotonic()))
        self._monitor.stop()
        with self._lock:
            leftover = bool(self._instances)
        self._monitor.reap_strays(term_s=SHUTDOWN_TERM_S)
        if not leftover:
            self._watcher.close()
        else:  # a stop did not finish in time: keep the pipe, the watcher reaps at exit
            log.warning("shutdown: instances on ports %s did not stop in time", self.launched_ports())

    # ------------------------------------------------------------------ launch parts
    def _declaration(self) -> LaunchDeclaration:
        return required_declaration(self.config)

    def _check_open(self) -> None:
        if self._closed:
            raise BridgeUsageError("The bridge is shutting down; it launches no more instances.")

    def _child_env(self, decl: LaunchDeclaration, port: int, launch_id: str,
                   extra: Mapping[str, str]) -> dict[str, str]:
        # The bridge's own secrets stay its own: a game (and what it starts) never sees them,
        # unless its declaration sets them itself.
        env = {key: value for key, value in self._environ.items() if key not in BRIDGE_SECRETS}
        declared = decl.render_env(port)
        env.update(declared)
        env.update(extra)
        if PYTHONPATH not in declared and PYTHONPATH not in extra:
            # A Python game using the kit imports the bridge's own package, whatever its own
            # environment has installed (a declaration's PYTHONPATH is the project's choice).
            entry = package_path_dir(self._environ, self.config.registry_dir)
            if entry is not None:
                env[PYTHONPATH] = os.pathsep.join(p for p in (env.get(PYTHONPATH, ""), str(entry)) if p)
        if self.config.registry_dir is not None and ENV_INSTANCES not in declared and ENV_INSTANCES not in extra:
            # The game registers where this bridge reads (--registry-dir), not in the default home.
            env[ENV_INSTANCES] = str(registry_dir(self._environ, self.config.registry_dir).absolute())
        env[MARKER_KEY] = procs.marker_value(self._environ.get(MARKER_KEY), launch_id)
        return env

    def _ensure_log_dir(self) -> Path:
        if self._log_dir is None:
            if self._log_dir_arg is not None:
                make_dirs(self._log_dir_arg)
                self._log_dir = self._log_dir_arg
            else:
                self._log_dir = log_dir(self._environ, self.config.registry_dir)
        with self._lock:
            in_use = [path for inst in self._instances.values() for path in inst.capture.files]
        prune_logs(self._log_dir, keep=in_use)  # at every launch: age, count and size
        return self._log_dir

    def _spawn(self, decl: LaunchDeclaration, lock: PortLock, extra_env: Mapping[str, str]) -> LaunchedInstance:
        port = lock.port
        command, use_shell = decl.render(port)
        display = decl.display(port)
        launch_id = f"{os.getpid()}-{uuid.uuid4().hex}"
        env = self._child_env(decl, port, launch_id, extra_env)
        log_path, log_fd = open_log_file(self._ensure_log_dir(), port)
        # The watcher learns the marker before the spawn, so a bridge killed in between
        # still leaves something findable.
        plan = self._containment.plan(launch_id)  # its cgroup is made now, before the spawn
        self._watcher.send({"op": "expect", "id": launch_id, "marker": launch_id, "cgroup": plan.cgroup})
        try:
            with self._lock:
                self._check_open()
                inst = LaunchedInstance.start(decl, lock, command=command, use_shell=use_shell, display=display,
                                      launch_id=launch_id, env=env, log_path=log_path, log_fd=log_fd,
                                      log_cap_bytes=self.log_cap_bytes,
                                      detached=self.detached, plan=plan, containment=self._containment)
                self._instances[port] = inst
                self._ended.pop(port, None)
        except OSError as exc:
            os.close(log_fd)
            Containment.release(plan)
            self._watcher.send({"op": "forget", "id": launch_id})
            raise BridgeUsageError(
                f"Launch failed on port {port}: the command could not be started "
                f"({exc.strerror or exc}{': ' + repr(exc.filename) if getattr(exc, 'filename', None) else ''}).\n"
                f"Command: {display}\nWorking directory: {decl.cwd}",
                port=port, command=display, cwd=str(decl.cwd)) from None
        except BaseException:
            os.close(log_fd)
            Containment.release(plan)
            self._watcher.send({"op": "forget", "id": launch_id})
            raise
        self._watcher.send({"op": "launch", "id": launch_id, "pid": inst.leader.pid,
                            "ctime": inst.leader.create_time, "pgid": inst.proc.pid, "marker": launch_id,
                            "spare": list(decl.spare), **inst.plan.record()})
        self._monitor.start()
        log.info("launched %s on port %d (pid %d), log %s", display, port, inst.proc.pid, log_path)
        return inst

    def _wait_ready(self, inst: LaunchedInstance, timeout_ms: int, progress: ProgressCallback | None, *,
                    since: float) -> dict[str, Any]:  # (timeout_ms counted from since: the first attempt)
        client = GameClient(inst.port, opener=self._opener, timeout_ms=1000)
        deadline = Deadline(timeout_ms / 1000.0, start=since)
        next_report = inst.started + PROGRESS_INTERVAL_S
        last_problem = "nothing answered yet"

        def ready() -> dict[str, Any] | None:
            """One look: the launch failed (raises), the game answers (its details), or not yet."""
            nonlocal last_problem, next_report
            if inst.stopping:
                raise BridgeUsageError(
                    f"Launch on port {inst.port} was cancelled: the instance was stopped while it "
                    "was booting.", port=inst.port)
            if inst.leader_exited() and not inst.wrapper_exited:
                code = inst.exit_code
                # A wrapper that exits 0 and leaves the game running (a start script that
                # backgrounds it) is not a failure; any other exit during boot is. (An exit
                # whose status was lost counts as a wrapper while its tree still runs.)
                if code in (0, None) and inst.tree.live():
                    inst.wrapper_left_running()
                    log.info("port %d: the launch command exited 0 but left processes running; "
                             "still waiting for /health", inst.port)
                else:
                    self._fail_launch(inst, how_exited(code), exit_code=code)
            try:
                client.health(timeout_ms=int(max(0.05, min(1.0, deadline.remaining_s())) * 1000))
                return self._ready(inst, client)
            except GameOffline as exc:
                last_problem = "connection refused" if exc.cause == "refused" else exc.message.split("\n")[0]
            except NotAGameSurface as exc:
                last_problem = exc.detail
            now = time.monotonic()
            if progress is not None and now >= next_report and not deadline.expired:
                next_report = now + PROGRESS_INTERVAL_S
                try:
                    progress(int((now - inst.started) * 1000), timeout_ms, inst.capture.last_line())
                except Exception:  # a broken progress sink must not break the launch
                    log.debug("progress callback failed", exc_info=True)
            return None

        details = poll_until(ready, deadline, first_s=POLL_FIRST_S, max_s=POLL_MAX_S, sleep=inst.wait_leader)
        if details is None:
            self._fail_launch(inst, f"the game did not answer GET /health within {timeout_ms}ms "
                                    f"(last check: {last_problem})", timed_out=True)
        return details

    def _ready(self, inst: LaunchedInstance, client: GameClient) -> dict[str, Any]:
        ready_ms = int((time.monotonic() - inst.started) * 1000)
        self._note_descendants(inst)
        holder, _pid = inst.port_holder()
        if holder == "foreign":
            self._fail_launch(inst, f"GET /health on port {inst.port} was answered by a process outside the "
                                    "launched tree (something else took the port while the game was starting)",
                              port_taken=True)
        try:
            manifest = client.tools(timeout_ms=2000)
        except BridgeError:
            manifest = None
        game = manifest.get("game") if isinstance(manifest, dict) else None
        game = game if isinstance(game, dict) else {}
        self._note_descendants(inst)
        inst.mark_ready(name=game.get("name"), version=game.get("version"))
        result: dict[str, Any] = {"port": inst.port, "pid": inst.game_pid, "name": inst.name, "version": inst.version,
                                  "cwd": str(inst.declaration.cwd), "readyInMs": ready_ms,
                                  "logFile": str(inst.capture.log_path)}
        if inst.lock.skipped:  # ports passed over because of what was at their lock paths
            result["notes"] = list(inst.lock.skipped)
        return result

    def _fail_launch(self, inst: LaunchedInstance, what: str, *, exit_code: int | None = None,
                     timed_out: bool = False, port_taken: bool = False) -> NoReturn:
        """Reap the tree, forget the instance and raise the boot-failure error docs/launching.md describes."""
        self._discard(inst, term_s=STOP_TERM_S)
        raise inst.boot_failure(what, exit_code=exit_code, timed_out=timed_out, port_taken=port_taken)

    # ------------------------------------------------------------------ stop parts
    def _is_tracked(self, inst: LaunchedInstance) -> bool:
        with self._lock:
            return self._instances.get(inst.port) is inst

    def _stop_port(self, port: int, *, grace_ms: int, term_s: float) -> dict[str, Any]:
        with self._lock:
            inst = self._instances.get(port)
        if inst is None:
            raise BridgeUsageError(
                f"Port {port} is not an instance this bridge launched, so stop_instance will not "
                "touch it: it only ends games it started (and still tracks). To end that game, "
                f"ask it to close itself: call_tool {{\"port\": {port}, \"name\": \"close\"}}.",
                port=port)
        return self._stop_instance(inst, grace_ms=grace_ms, term_s=term_s)

    def _stop_quietly(self, inst: LaunchedInstance, grace_ms: int) -> None:
        try:
            self._stop_instance(inst, grace_ms=grace_ms, term_s=SHUTDOWN_TERM_S)
        except Exception:  # shutdown must go on with the others
            log.exception("stopping the instance on port %d failed", inst.port)

    def _stop_instance(self, inst: LaunchedInstance, *, grace_ms: int, term_s: float) -> dict[str, Any]:
        def stop() -> dict[str, Any]:
            t0 = time.monotonic()
            how, survivors, note = inst.end_tree(opener=self._opener, grace_ms=grace_ms, term_s=term_s)
            if not survivors:
                # The tree is gone, but a leader whose main thread ended first is reported
                # exited only once its last thread has: wait briefly for its status. Not
                # cancellable: a cancelled stop still ends its bookkeeping below.
                waited = Deadline(EXIT_STATUS_S)
                while not inst.leader_exited() and not waited.expired:
                    inst.wait_leader(min(POLL_MAX_S, waited.remaining_s()))
            result: dict[str, Any] = {
                "port": inst.port, "stopped": not survivors, "how": how,
                "pid": inst.game_pid or inst.leader.pid,
                "exitCode": inst.exit_code if inst.leader_exited() else None,
                "stoppedInMs": int((time.monotonic() - t0) * 1000),
                "logFile": str(inst.capture.log_path)}
            inst.describe_exit(result)
            if note is not None:
                result["note"] = note
            if survivors:
                result["survivors"] = [ref.pid for ref in survivors]
                result["message"] = (
                    f"Processes {result['survivors']} are still running and no signal could reach them: "
                    "nothing here proves those pids still belong to the launched game (psutil is not "
                    "installed and this system has no pidfds), so they were left alone; end them yourself "
                    "if they are the game's. They hold no port lock any more."
                    if how == procs.NOT_SIGNALLED else
                    f"Processes {result['survivors']} survived SIGKILL (probably stuck "
                    "in the kernel); they hold no port lock any more.")
            self._forget(inst)
            if not self.launched_ports():  # the last one: what double-forked away goes too
                self._monitor.reap_strays(term_s=term_s)
            return result

        return inst.stop_once(stop)

    def _discard(self, inst: LaunchedInstance, *, term_s: float) -> None:
        """End a tree without asking it to close (a failed or cancelled launch)."""
        def discard() -> dict[str, Any]:
            procs.reap_tree(inst.tree, term_s=term_s, kill_s=1.0)
            self._forget(inst)
            return {"port": inst.port, "stopped": True, "how": "terminated"}

        inst.stop_once(discard)

    def _forget(self, inst: LaunchedInstance) -> None:
        """Release everything held for an ended instance: the child's exit status, the
        pidfd, the port lock, the watcher's record."""
        with self._lock:
            if self._instances.get(inst.port) is inst:
                del self._instances[inst.port]
                self._ended[inst.port] = inst
                while len(self._ended) > ENDED_KEPT:
                    self._ended.pop(next(iter(self._ended)))
        inst.release()
        self._watcher.send({"op": "forget", "id": inst.launch_id})

    # ------------------------------------------------------------------ monitor
    def _tracked(self) -> list[LaunchedInstance]:
        with self._lock:
            return list(self._instances.values())

    def _note_descendants(self, inst: LaunchedInstance) -> None:
        self._monitor.note_descendants(inst)


__all__ = ["Launcher", "ProgressCallback"]
