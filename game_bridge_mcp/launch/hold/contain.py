"""How a launched tree is held together, so that it ends with the bridge whatever its processes
do to leave it (``setsid``, a double fork, an empty environment): its own cgroup where the
machine lets this user make one (:mod:`.cgroups`), else a keeper process as its subreaper
ancestor (:mod:`.keeper`, Linux), else only what every platform has (the process group, the
recorded descendants, the launch marker). docs/launching.md, "Reaping", says what each
guarantees.

In a cgroup the command starts behind a gate: ``/bin/sh`` waits on its stdin until the
bridge has moved it into the cgroup, then ``exec``\\ s the command with stdin from
``/dev/null``, so not even its first child can start outside. Under a keeper the keeper is
the process the bridge starts; it runs the command and mirrors its exit status.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cgroups
from .keeper import encode_order

log = logging.getLogger(__name__)

CGROUP = "cgroup"
KEEPER = "keeper"
NONE = "none"
#: What a Launcher may be told to use; ``auto`` takes the strongest the machine allows.
MODES = ("auto", CGROUP, KEEPER, NONE)

#: The gate: wait for the bridge's go (EOF without one: exit 125, nothing run), then the command.
GATE_ARGV = 'read -r _ || exit 125; exec "$@" </dev/null'
GATE_SHELL = 'read -r _ || exit 125; exec /bin/sh -c "$1" </dev/null'
KEEPER_SCRIPT = Path(__file__).with_name("keeper.py")


@dataclass
class Plan:
    """How one launch is held: the mode, its cgroup (and the one it was made in), and the
    bridge's ends of the gate or keeper pipe while they are open."""

    mode: str
    cgroup: str | None = None
    base: str | None = None
    gate: int | None = None
    control: int | None = None
    #: A keeper's report of the command's own exit (its wait status, one line), read here.
    status: int | None = None
    #: That pipe's other end, the keeper's, until the keeper has started.
    status_end: int | None = None
    #: The command's exit as the keeper reported it (negative: the signal), once it has.
    leader_code: int | None = None
    leader_done: bool = False

    def record(self) -> dict[str, Any]:
        """What the watcher is told about it (with the launch record)."""
        return {"cgroup": self.cgroup, "keeper": self.mode == KEEPER}


def _close(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _prefill(fd: int, data: bytes) -> int:
    """Put ``data`` into a new pipe without blocking (made larger if need be, within what
    the system allows); how many bytes went in."""
    size_op = getattr(fcntl, "F_SETPIPE_SZ", None)
    if size_op is not None and len(data) > 65536:
        try:
            fcntl.fcntl(fd, size_op, min(len(data), 1 << 20))
        except OSError:
            pass
    os.set_blocking(fd, False)
    done = 0
    try:
        while done < len(data):
            written = os.write(fd, memoryview(data)[done:])
            if not written:
                break
            done += written
    except OSError:
        pass
    finally:
        os.set_blocking(fd, True)
    return done


def keeper_possible() -> bool:
    return sys.platform.startswith("linux") and bool(sys.executable) and KEEPER_SCRIPT.is_file()


def check_startable(command: Sequence[str] | str, use_shell: bool, cwd: Path, env: Mapping[str, str]) -> None:
    """Raise the OSError ``Popen`` would raise for a program that cannot be started (the
    gate and the keeper start first, so its own start cannot fail in the bridge)."""
    if use_shell or isinstance(command, str) or not command:
        return
    program = command[0]
    if "/" in program:
        path = cwd / program
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if path.is_dir() or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


class Containment:
    """Chooses and sets up each launch's holding (see the module docstring), once per launcher."""

    def __init__(self, mode: str = "auto") -> None:
        if mode not in MODES:
            raise ValueError(f"containment must be one of {MODES}, not {mode!r}")
        self._wanted = mode
        self._lock = threading.Lock()
        self._base: str | None = None
        self._cgroups_tried = False
        self._cgroups_work = mode in ("auto", CGROUP)

    def _cgroup_base(self) -> str | None:
        with self._lock:
            if not self._cgroups_work:
                return None
            if not self._cgroups_tried:
                self._cgroups_tried = True
                self._base = cgroups.own_cgroup()
                if self._base is None:
                    self._cgroups_work = False
                    log.info("no cgroup of this user's can be made here; launched trees are kept under a keeper")
                else:
                    cgroups.prune(self._base)  # what bridges killed with their watcher left
            return self._base

    def _give_up_cgroups(self, why: str) -> None:
        with self._lock:
            if self._cgroups_work:
                log.warning("cgroups cannot hold launched games here (%s); using a keeper instead", why)
            self._cgroups_work = False

    def plan(self, launch_id: str) -> Plan:
        """The holding for a new launch (a cgroup is made now, before anything starts)."""
        if self._wanted in ("auto", CGROUP):
            base = self._cgroup_base()
            if base is not None:
                path = cgroups.create(base, cgroups.PREFIX + launch_id)
                if path is not None:
                    return Plan(CGROUP, cgroup=path, base=base)
                self._give_up_cgroups(f"no cgroup could be made in {base}")
        if self._wanted in ("auto", CGROUP, KEEPER) and keeper_possible():
            return Plan(KEEPER)
        return Plan(NONE)

    def fallback(self, plan: Plan) -> Plan:
        """After a cgroup that could not take the process: undo it, and a keeper instead."""
        self.release(plan)
        self._give_up_cgroups(f"a process could not be moved into {plan.cgroup}")
        return Plan(KEEPER) if keeper_possible() else Plan(NONE)

    @staticmethod
    def popen_args(plan: Plan, command: Sequence[str] | str, use_shell: bool,
                   spare: Sequence[str]) -> tuple[Sequence[str] | str, bool, int, tuple[int, ...]]:
        """``(args, shell, stdin, pass_fds)`` to start ``command`` with under ``plan`` (the
        gate or the keeper in front of it; stdin the read end of its pipe, and ``pass_fds``
        the keeper's end of its report pipe, which :meth:`spawned` closes)."""
        if plan.mode == NONE:
            return command, use_shell, subprocess.DEVNULL, ()
        read_end, write_end = os.pipe()
        if plan.mode == CGROUP:
            plan.gate = write_end
            if use_shell:
                return ["/bin/sh", "-c", GATE_SHELL, "sh", str(command)], False, read_end, ()
            return ["/bin/sh", "-c", GATE_ARGV, "sh", *command], False, read_end, ()
        plan.control = write_end
        data = encode_order(str(command) if use_shell else list(command), use_shell, list(spare))
        if _prefill(write_end, data) != len(data):
            for fd in (read_end, write_end):
                _close(fd)
            plan.control = None
            raise OSError(errno.E2BIG, "the command is too long to hand to its keeper")
        plan.status, plan.status_end = os.pipe()
        os.set_blocking(plan.status, False)
        return ([sys.executable, "-I", "-S", str(KEEPER_SCRIPT), "--status-fd", str(plan.status_end)], False,
                read_end, (plan.status_end,))

    @staticmethod
    def spawned(plan: Plan, stdin: int) -> None:
        """The process is started (or could not be): close what it took of ours."""
        if stdin != subprocess.DEVNULL:
            _close(stdin)
        _close(plan.status_end)
        plan.status_end = None

    @staticmethod
    def leader_exit(plan: Plan) -> tuple[bool, int | None]:
        """Under a keeper: ``(True, code)`` once it has reported that the command itself
        exited (negative: the signal), ``(False, None)`` until then (or under no keeper)."""
        if not plan.leader_done and plan.status is not None:
            try:
                line = os.read(plan.status, 64)
            except OSError:  # nothing yet (EAGAIN)
                line = None
            if line == b"":  # closed unsaid: the keeper itself ended first, and says it as it exits
                _close(plan.status)
                plan.status = None
            elif line is not None:
                plan.leader_done = True
                text = line.strip()
                if text.isdigit():
                    status = int(text)
                    plan.leader_code = (os.WEXITSTATUS(status) if os.WIFEXITED(status)
                                        else -os.WTERMSIG(status) if os.WIFSIGNALED(status) else None)
                _close(plan.status)
                plan.status = None
        return plan.leader_done, plan.leader_code

    @staticmethod
    def started(plan: Plan, pid: int) -> bool:
        """The process is running: in a cgroup, move it in and open its gate (False when it
        could not be moved: the gate is closed unopened, so it exits without running)."""
        if plan.mode != CGROUP:
            return True
        assert plan.cgroup is not None
        moved = cgroups.move(plan.cgroup, pid)
        if moved and plan.gate is not None:
            try:
                os.write(plan.gate, b"go\n")
            except OSError:
                pass
        _close(plan.gate)
        plan.gate = None
        return moved

    @staticmethod
    def release(plan: Plan) -> None:
        """The launch has ended: close the keeper's pipe (it ends whatever is still below
        it, spared processes excepted) and remove the cgroup (a spared process still in it is
        moved back to the bridge's)."""
        _close(plan.gate)
        plan.gate = None
        _close(plan.control)
        plan.control = None
        for fd in (plan.status, plan.status_end):
            _close(fd)
        plan.status = plan.status_end = None
        if plan.cgroup is not None:
            if not cgroups.remove(plan.cgroup, evacuate_to=plan.base):
                log.warning("could not remove the cgroup %s", plan.cgroup)


__all__ = ["CGROUP", "Containment", "KEEPER", "MODES", "NONE", "Plan", "check_startable"]
