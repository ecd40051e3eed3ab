"""One launched game: the :class:`LaunchedInstance` record that owns its process tree, and what
is done to that one tree (start it, observe its child's exit without reaping it, find its listener,
report a boot failure, end it)."""

from __future__ import annotations

import logging
import os
import select
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from . import parent, procs
from .. import listeners
from .capture import LOG_CAP_BYTES, OutputCapture, TailReader
from ..wire.client import GameClient
from ..errors import BridgeError, BridgeUsageError
from ..polling import Cancelled, Deadline, cancel_requested, poll_until
from .hold.contain import Containment, Plan, check_startable
from .portlock import PortLock
from .procs import ProcRef, Tree
from .declaration import LaunchDeclaration
from ..wire.transport import Opener

log = logging.getLogger(__name__)

#: After the game closed its port and its first process exited, how long stragglers in
#: its tree get to exit on their own before they are terminated.
STRAGGLER_GRACE_S = 0.5
#: Lines of output quoted in a launch failure.
FAILURE_TAIL_LINES = 20

_HAS_WAITID = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def signal_name(code: int | None) -> str | None:
    """The signal that ended a process with exit status ``code`` (negative), else None."""
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def how_exited(code: int | None) -> str:
    """A child's exit status in words (negative: killed by that signal; None: unknown)."""
    if code is None:
        return ("the process exited, with an exit status the bridge could not read (it was "
                "collected by someone else; does the bridge's parent ignore SIGCHLD?)")
    name = signal_name(code)
    if name is not None:
        return f"the process was killed by {name}"
    return f"the process exited with code {code}"


@dataclass
class LaunchedInstance:
    """One launched process tree and everything the launcher owns about it."""

    port: int
    launch_id: str
    declaration: LaunchDeclaration
    command: str
    proc: subprocess.Popen[bytes]
    leader: ProcRef
    tree: Tree
    lock: PortLock
    capture: OutputCapture
    started: float
    pidfd: int | None = None
    #: When it was started, as an ISO 8601 UTC time (what list_instances shows).
    started_at: str = ""
    ready: bool = False
    stopping: bool = False
    wrapper_exited: bool = False
    name: str | None = None
    version: str | None = None
    game_pid: int | None = None
    #: The direct child's exit status once it has exited (negative: the signal); None
    #: while it runs, and also when it exited but its status was lost (``reaped_elsewhere``).
    exit_code: int | None = None
    exited: bool = False
    reaped_elsewhere: bool = False
    stop_result: dict[str, Any] | None = None
    stop_lock: threading.Lock = field(default_factory=threading.Lock)
    #: How the tree is held together (its cgroup, or its keeper), see .hold.contain.
    plan: Plan = field(default_factory=lambda: Plan("none"))

    @classmethod
    def start(cls, decl: LaunchDeclaration, lock: PortLock, *, command: list[str] | str,
              use_shell: bool, display: str, launch_id: str, env: Mapping[str, str],
              log_path: Path, log_fd: int, detached: bool, log_cap_bytes: int = LOG_CAP_BYTES,
              plan: Plan | None = None, containment: Containment | None = None) -> LaunchedInstance:
        """Start ``command`` for ``lock.port`` in a new session (its own process group),
        stdin from /dev/null, output into a pipe pumped to the log file (or, detached,
        straight into the log file, which is then tailed), held as ``plan`` says (its
        cgroup or its keeper, see .hold.contain), and return its record. Raises OSError when the
        command cannot be started."""
        port = lock.port
        started = time.monotonic()
        plan = plan or Plan("none")
        if plan.mode != "none":  # the gate or keeper starts first: say what Popen would have
            try:
                check_startable(command, use_shell, decl.cwd, env)
            except OSError:
                Containment.release(plan)
                raise
        while True:
            args, shell, stdin, keep_fds = Containment.popen_args(plan, command, use_shell, decl.spare)
            try:
                with parent.spawning() as own:  # registered before anyone could reap it as adopted
                    proc = subprocess.Popen(
                        args, shell=shell, cwd=str(decl.cwd), env=env,
                        stdin=stdin, stdout=log_fd if detached else subprocess.PIPE,
                        stderr=subprocess.STDOUT, close_fds=True, pass_fds=keep_fds, start_new_session=True)
                    own.add(proc.pid)
            except BaseException:
                Containment.spawned(plan, stdin)
                Containment.release(plan)
                raise
            Containment.spawned(plan, stdin)
            if Containment.started(plan, proc.pid):
                break
            # The cgroup would not take it: its gate closed unopened, it ran nothing. Again, kept.
            proc.wait()
            parent.disown(proc.pid)
            if proc.stdout is not None:
                proc.stdout.close()
            plan = (containment or Containment()).fallback(plan)
        leader = procs.ref_for(proc.pid) or ProcRef(proc.pid, 0.0)
        pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(proc.pid)
            except OSError:
                pidfd = None
        if detached:
            os.close(log_fd)  # the game holds it now; we only tail the file
            capture = OutputCapture(TailReader(log_path), log_path, None)  # type: ignore[arg-type]
        else:
            assert proc.stdout is not None
            capture = OutputCapture(proc.stdout, log_path, log_fd, cap_bytes=log_cap_bytes)
        inst = cls(port=port, launch_id=launch_id, declaration=decl, command=display,
                   proc=proc, leader=leader,
                   tree=Tree(leader=leader, pgid=proc.pid, marker=launch_id, known=set(), spare=decl.spare,
                             cgroup=plan.cgroup),
                   lock=lock, capture=capture, started=started, pidfd=pidfd,
                   started_at=_utc_now(),
                   name=decl.name, plan=plan)
        inst.tree.leader_guard = inst.leader_unreaped
        return inst

    # ------------------------------------------------------------------ its record
    # The launcher changes this record only through these methods.
    def wrapper_left_running(self) -> None:
        """The launch command exited 0 and left the game running (a start script)."""
        self.wrapper_exited = True

    def mark_ready(self, *, name: Any, version: Any) -> None:
        """The game answered ``/health``: keep what its manifest says it is (sane text only)
        and which process holds the port."""
        if isinstance(name, str) and name.strip():
            self.name = name[:200]
        if isinstance(version, (str, int, float)) and not isinstance(version, bool):
            self.version = str(version)[:100]
        self.game_pid = self.listener_pid() or self.leader.pid
        self.ready = True

    def stop_once(self, stop: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run ``stop`` unless a concurrent stop already ended this instance, whose result
        is then returned; marks the instance stopping first (a boot in progress gives up)."""
        self.stopping = True
        with self.stop_lock:
            if self.stop_result is None:
                self.stop_result = stop()
            return dict(self.stop_result)

    def info(self) -> dict[str, Any]:
        """What is known of this instance, as ``list_instances`` shows it."""
        holder, _pid = self.port_holder()
        return {"port": self.port, "pid": self.game_pid or self.leader.pid, "name": self.name,
                "version": self.version, "cwd": str(self.declaration.cwd), "ready": self.ready,
                "running": not self.leader_exited() or self.wrapper_exited,
                "started": self.started_at, "listener": holder,
                "logFile": str(self.capture.log_path)}

    def _peek(self) -> Any:
        """``waitid(WEXITED | WNOHANG | WNOWAIT)`` on the direct child (by pidfd where
        there is one, so a recycled pid can never answer): None while it runs, the
        status once it exited (it stays unreaped). Raises ChildProcessError when it has
        already been collected by someone else."""
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        if self.pidfd is not None and hasattr(os, "P_PIDFD"):
            return os.waitid(os.P_PIDFD, self.pidfd, flags)
        return os.waitid(os.P_PID, self.proc.pid, flags)

    def leader_exited(self) -> bool:
        """Whether the direct child has exited (its status, if it could be read, is
        then in ``exit_code``). Observed without reaping it, so its pid stays ours. Under a
        keeper, the command it runs: the keeper says when that has exited, and how."""
        if self.exited:
            return True
        if self.proc.returncode is not None:  # reaped by release()
            self.exited, self.exit_code = True, self.proc.returncode
            return True
        done, code = Containment.leader_exit(self.plan)
        if done:  # under a keeper, which said the command itself has exited
            self.exited, self.exit_code = True, code
            return True
        if not _HAS_WAITID:  # pragma: no cover - platforms without waitid: reap normally
            code = self.proc.poll()
            if code is not None:
                self.exited, self.exit_code = True, code
            return self.exited
        try:
            info = self._peek()
        except ChildProcessError:  # collected behind our back: the status is lost
            self.exited, self.reaped_elsewhere, self.exit_code = True, True, None
            return True
        if info is None or info.si_pid == 0:
            return False
        self.exited = True
        self.exit_code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        return True

    def describe_exit(self, answer: dict[str, Any]) -> None:
        """Add ``signal`` (the signal that ended the launched process) or ``exitUnknown``
        (its status was lost) to an answer that reports ``exitCode``."""
        name = signal_name(self.exit_code)
        if name is not None:
            answer["signal"] = name
        elif self.exited and self.exit_code is None:
            answer["exitUnknown"] = how_exited(None)

    def leader_unreaped(self) -> bool:
        """True only while it is proved that the direct child's pid (and so its group id)
        cannot have been reused: it is our child and not yet reaped, checked through its
        pidfd. Without a pidfd, or while SIGCHLD is ignored (the kernel reaps on exit, so
        the proof would be stale at once), nothing is proved."""
        if self.reaped_elsewhere or self.proc.returncode is not None or not _HAS_WAITID:
            return False
        if self.pidfd is None or not hasattr(os, "P_PIDFD") or parent.sigchld_ignored():
            return False
        try:
            self._peek()
        except ChildProcessError:
            self.leader_exited()
            return False
        return self.proc.returncode is None

    def wait_leader(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s``, waking at once if the direct child exits."""
        if timeout_s <= 0:
            return
        # A pidfd is readable once the process has exited, so it is a sleep that ends at
        # the exit; after the exit it would return at once, so sleep plainly then.
        if self.pidfd is not None and not self.leader_exited():
            try:
                select.select([self.pidfd], [], [], timeout_s)
                return
            except (OSError, ValueError):
                pass
        time.sleep(timeout_s)

    def port_holder(self) -> tuple[str, int | None]:
        """Who listens on the port: ``("ours", pid)`` when a process of this tree holds
        the listening socket (the game itself, when the command is a shell or a build
        tool), ``("foreign", None)`` when something else does (the game died and a
        stranger took the port), ``("none", None)`` when nothing listens, and
        ``("unknown", None)`` where it cannot be told (also without psutil, when the
        listener is not the launched process: its descendants cannot be found then)."""
        found = listeners.listener(self.port)
        tables = found is not None or listeners.can_tell()
        if tables and found is None:
            return "none", None
        for marker_scan in (False, True):  # the marker scan is the expensive part
            pid = listeners.holder(self.port, [r.pid for r in self.tree.live(marker_scan=marker_scan)], found)
            if pid is not None:
                return "ours", pid
        # Without psutil the tree is only its first process: a listener outside it may be ours.
        return ("foreign" if tables and procs.psutil is not None else "unknown"), None

    def listener_pid(self) -> int | None:
        """The pid in the tree that listens on the port; None if none does (or it
        cannot be told)."""
        return self.port_holder()[1]

    def end_tree(self, *, opener: Opener | None, grace_ms: int,
                 term_s: float) -> tuple[str, list[ProcRef], str | None]:
        """Ask the game to ``close``, wait up to ``grace_ms`` for its port to go quiet and
        its processes to exit, then terminate (``term_s``) and kill what is left.
        ``close`` goes only to a listener of this tree: when something else holds the
        port now, it is left alone and the third value says so. Returns how it ended,
        the processes that survived SIGKILL, and that note (or None)."""
        holder, _pid = self.port_holder()
        note = None
        if holder in ("foreign", "unknown"):
            note = (f"Port {self.port} is held by a process outside the launched tree (the launched game "
                    "had already exited and something else took the port); it was not asked to close "
                    "and was left alone." if holder == "foreign" else
                    f"Who listens on port {self.port} cannot be told here, so no close was sent.")
        if not self.tree.live():
            return "already exited", [], note
        if holder != "ours":
            how, survivors = procs.reap_tree(self.tree, term_s=0.0 if cancel_requested() else term_s, kill_s=1.0)
            return how or "already exited", survivors, note
        try:
            self._ask_to_close(opener, grace_ms)
        except Cancelled:
            pass  # the client stopped waiting: skip the rest of the grace, end the tree at once
        how, survivors = procs.reap_tree(self.tree, term_s=0.0 if cancel_requested() else term_s, kill_s=1.0)
        return how or "closed cleanly", survivors, None

    def _ask_to_close(self, opener: Opener | None, grace_ms: int) -> None:
        """Send ``close`` and wait up to ``grace_ms`` for the port to go quiet and the
        tree to exit (or only stragglers to be left for a while). A cancelled call cuts
        it short with ``Cancelled``."""
        client = GameClient(self.port, opener=opener, timeout_ms=max(100, min(grace_ms, 1000)))
        deadline = Deadline(grace_ms / 1000.0)
        if client.port_is_quiet(timeout_ms=200):
            return
        try:
            client.command("close", timeout_ms=max(100, min(grace_ms, 1000)))
        except BridgeError as exc:  # a game dropping the connection while closing is closing
            log.debug("close on port %d: %s", self.port, exc)
        quiet_since: float | None = None

        def closed() -> bool | None:
            nonlocal quiet_since
            quiet = client.port_is_quiet(timeout_ms=100)
            if quiet and not self.tree.live(marker_scan=False):
                return True
            if quiet and self.leader_exited():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= STRAGGLER_GRACE_S:
                    return True
            return None

        poll_until(closed, deadline, first_s=0.01, max_s=0.1, sleep=self.wait_leader)

    def log_answer(self, lines: int, since: int | None, *, stopped: bool = False) -> dict[str, Any]:
        """``instance_log``'s answer: the output from line ``since`` (else the last ``lines``),
        whether the game still runs and, once it does not, how it ended (``stopped``: the
        bridge stopped it; its output is kept until the port's next launch)."""
        running = not stopped and (not self.leader_exited()
                                   or (self.wrapper_exited and bool(self.tree.live(marker_scan=False))))
        if not running and not stopped:  # the game is gone: let the pump drain what it wrote last
            self.capture.wait_eof(0.5)
        answer: dict[str, Any] = {"port": self.port, **self.capture.read(lines, since),
                                  "logFile": str(self.capture.log_path), "running": running,
                                  "exitCode": None if running else self.exit_code}
        if stopped:
            answer["stopped"] = True
            answer["note"] = "The instance has stopped; its output is kept until the next launch on this port."
        if not running:
            self.describe_exit(answer)
        return answer

    def boot_failure(self, what: str, *, exit_code: int | None = None,
                     timed_out: bool = False, port_taken: bool = False) -> BridgeUsageError:
        """The boot-failure error (docs/launching.md) for this (already reaped) instance: what went
        wrong, the command, where it ran, the log file and its last output."""
        self.capture.wait_eof(0.5)
        tail = self.capture.tail(FAILURE_TAIL_LINES)
        output = "\n".join(tail) if tail else "(the process printed nothing)"
        message = (f"Launch failed on port {self.port}: {what}.\n"
                   f"Command: {self.command}\n"
                   f"Working directory: {self.declaration.cwd}\n"
                   f"Full log: {self.capture.log_path}\n\n"
                   f"Last output:\n{output}")
        extra: dict[str, Any] = {"signal": signal_name(exit_code)} if signal_name(exit_code) else {}
        if port_taken:
            extra["portTaken"] = True
        advice = missing_module_advice(tail)
        if advice is not None:
            message += f"\n\nWhat to do: {advice}"
            extra["advice"] = advice
        return BridgeUsageError(message, port=self.port, exitCode=exit_code, timedOut=timed_out, **extra,
                                command=self.command, cwd=str(self.declaration.cwd),
                                logFile=str(self.capture.log_path), lastOutput=tail)

    def release(self) -> None:
        """Release what this record holds once its tree has ended: the child's exit
        status (it is reaped now), the pidfd, the port lock, its keeper's pipe and its cgroup."""
        self.leader_exited()
        # The keeper ends what is left below it (spared processes excepted) and exits; in a
        # cgroup, a spared process goes back to the bridge's and a late fork is killed.
        procs.end_cgroup(self.tree, timeout_s=1.0)
        Containment.release(self.plan)
        try:
            self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if SIGKILL failed
            log.warning("pid %d did not exit; left unreaped", self.proc.pid)
        else:
            parent.disown(self.proc.pid)
        if self.pidfd is not None:
            try:
                os.close(self.pidfd)
            except OSError:
                pass
            self.pidfd = None
        self.lock.release()


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'")


def missing_module_advice(tail: Sequence[str]) -> str | None:
    """What to install where, when a Python game's last output says it could not import
    this package (the kit) or pygame; None for any other failure."""
    for line in reversed(tail):
        found = _MISSING_MODULE.search(line)
        if found is None:
            continue
        module = found.group(1).split(".")[0]
        if module == "game_bridge_mcp":
            return ("the game's Python cannot import game_bridge_mcp (the kit). The bridge puts its own copy "
                    "on a launched game's PYTHONPATH, unless the declaration's env sets PYTHONPATH or the "
                    "game's Python ignores it (-E, -I). Run the game with the bridge's interpreter "
                    "(\"{python}\" in launch.argv), or install the package into the game's environment: "
                    "<the game's python> -m pip install <your checkout of game-bridge-mcp>.")
        if module == "pygame":
            return ("the game's Python has no pygame. Install pygame-ce into the Python that runs the game "
                    "(with {python} that is the bridge's: pipx inject game-bridge-mcp pygame-ce, or "
                    "<that python> -m pip install pygame-ce), and not pygame beside it: the two share the "
                    "module name, and pygame installed over pygame-ce breaks it.")
        return None
    return None


__all__ = ["FAILURE_TAIL_LINES", "LaunchedInstance", "STRAGGLER_GRACE_S", "how_exited", "missing_module_advice",
           "signal_name"]
