"""Finding and signalling a launched process tree without ever hitting the wrong process: every
signal through a pidfd (or psutil's check) verified against the recorded creation time.

It needs nothing from its package but its sibling :mod:`.cgroups` (the marker's name is
spelled out when there is no package), so the watcher can load it by file path when the
package is vendored.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

try:
    from ..contract import ENV_LAUNCH_ID
except ImportError:  # loaded by file path, outside the package (the watcher): the same name
    ENV_LAUNCH_ID = "GAME_BRIDGE_LAUNCH_ID"

from .hold import cgroups

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency; degrade to group signals
    psutil = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

#: Name of the environment variable set on every launched process.
MARKER_KEY = ENV_LAUNCH_ID
#: psutil create_time is a float of clock ticks; equal processes match within this.
_CTIME_TOLERANCE = 0.02

_HAS_PIDFD = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")


@dataclass(frozen=True)
class ProcRef:
    """A process identity that survives pid reuse: the pid and its creation time."""

    pid: int
    create_time: float


def _proc_stat(pid: int) -> tuple[str, float] | None:
    """Without psutil, on Linux: ``(state letter, creation time)`` from ``/proc/<pid>/stat``,
    the creation time computed as psutil computes it (boot time plus start ticks), so the
    two agree. None where it cannot be read (no such process, or no ``/proc``)."""
    global _BOOT_TIME
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if _BOOT_TIME is None:
            with open("/proc/stat", "rb") as f:
                _BOOT_TIME = next(float(line.split()[1]) for line in f if line.startswith(b"btime"))
        return fields[0].decode("ascii", "replace"), _BOOT_TIME + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


_BOOT_TIME: float | None = None


def ref_for(pid: int) -> ProcRef | None:
    """The identity of the process now holding ``pid`` (None if there is none, or where
    neither psutil nor ``/proc`` can tell)."""
    if pid <= 0:
        return None
    if psutil is None:
        found = _proc_stat(pid)
        return None if found is None else ProcRef(pid, found[1])
    try:
        return ProcRef(pid, psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def has_pidfds() -> bool:
    """Whether this system signals through pidfds (Linux 5.3 and later)."""
    return _HAS_PIDFD


def identity_provable() -> bool:
    """Whether a recorded process can be told from a stranger given its pid later (psutil,
    or Linux's ``/proc``): without it a pid is all the bridge knows."""
    return psutil is not None or _proc_stat(os.getpid()) is not None


def _matches(pid: int, create_time: float) -> bool:
    """True when ``pid`` is alive, not a zombie, and was created at ``create_time`` (a
    ``create_time`` of 0 is a ref made where no creation time could be read: then only
    alive and not a zombie, as far as can be told)."""
    if psutil is None:
        found = _proc_stat(pid)
        if found is not None:
            state, ctime = found
            return state not in "ZX" and (create_time <= 0 or abs(ctime - create_time) <= _CTIME_TOLERANCE)
        try:  # no /proc either: a zombie cannot be told from a live process here
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > _CTIME_TOLERANCE:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


def is_alive(ref: ProcRef) -> bool:
    """Whether the recorded process still runs (a zombie counts as gone)."""
    return _matches(ref.pid, ref.create_time)


def send_signal(ref: ProcRef, sig: int) -> bool:
    """Signal exactly the recorded process. False when it is gone (or was replaced)."""
    if _HAS_PIDFD:
        try:
            fd = os.pidfd_open(ref.pid)
        except (ProcessLookupError, OSError):
            return False
        try:
            if not _matches(ref.pid, ref.create_time):
                return False
            signal.pidfd_send_signal(fd, sig)
            return True
        except (ProcessLookupError, OSError):
            return False
        finally:
            os.close(fd)
    if psutil is None:  # no pidfds: os.kill right after the /proc identity check, as psutil does
        if ref.create_time <= 0 or _proc_stat(ref.pid) is None or not _matches(ref.pid, ref.create_time):
            return False  # nothing proves the pid is still the recorded process
        try:
            os.kill(ref.pid, sig)
            return True
        except OSError:
            return False
    try:
        proc = psutil.Process(ref.pid)
        if abs(proc.create_time() - ref.create_time) > _CTIME_TOLERANCE:
            return False
        proc.send_signal(sig)  # psutil re-checks (pid, create_time) first
        return True
    except (psutil.Error, OSError):
        return False


def descendants(ref: ProcRef) -> list[ProcRef]:
    """Live descendants of the recorded process (empty if it is gone)."""
    if psutil is None or not is_alive(ref):
        return []
    found: list[ProcRef] = []
    try:
        children = psutil.Process(ref.pid).children(recursive=True)
    except (psutil.Error, OSError):
        return []
    for child in children:
        try:
            found.append(ProcRef(child.pid, child.create_time()))
        except (psutil.Error, OSError):
            continue
    return found


def _getpgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def group_members(pgid: int) -> list[ProcRef]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    if psutil is None or not hasattr(os, "getpgid"):
        return []
    members: list[ProcRef] = []
    for pid in psutil.pids():
        if _getpgid(pid) != pgid:
            continue
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            members.append(ProcRef(pid, proc.create_time()))
        except (psutil.Error, OSError):
            continue
    return members


def marker_value(existing: str | None, launch_id: str) -> str:
    """The marker variable's value for a child: ``launch_id``, appended to a marker this
    process inherited (a bridge launched by a bridge), so both can find the child."""
    parts = [part for part in (existing or "").split(",") if part]
    return ",".join([*parts[-7:], launch_id])


def find_marked(marker_value: str, *, key: str = MARKER_KEY) -> list[ProcRef]:
    """Live processes of this user whose environment carries ``key=marker_value``
    (the value may be a comma-separated list when bridges are nested).

    Reads the environment each process started with; processes of other users cannot
    be read and are skipped (they cannot carry a marker this user set anyway)."""
    if psutil is None or not marker_value:
        return []
    me = os.getpid()
    uid = os.getuid() if hasattr(os, "getuid") else None
    found: list[ProcRef] = []
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.pid == me:
                continue
            uids = proc.info.get("uids")
            if uid is not None and uids is not None and uids.real != uid:
                continue
            if marker_value not in proc.environ().get(key, "").split(","):
                continue
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            found.append(ProcRef(proc.pid, proc.create_time()))
        except (psutil.Error, OSError):
            continue
    return found


def cgroup_members(path: str) -> list[ProcRef]:
    """The processes in the cgroup ``path`` (and below it), each identified first and then
    seen to be in it still, so a pid freed and reused meanwhile is never taken for one."""
    found: list[ProcRef] = []
    for pid in cgroups.pids(path):
        ref = ref_for(pid)
        if ref is not None and cgroups.holds(path, pid):
            found.append(ref)
    return found


def end_cgroup(tree: "Tree", *, timeout_s: float) -> bool:
    """SIGKILL everything left in ``tree``'s cgroup at once, forks in flight included, its
    spared processes first moved out to the cgroup it was made in. True when it is empty."""
    if tree.cgroup is None:
        return True
    if tree.spare:
        outside = os.path.dirname(tree.cgroup)
        for ref in cgroup_members(tree.cgroup):
            if tree.spared(ref):
                cgroups.move(outside, ref.pid)
    return cgroups.kill(tree.cgroup, timeout_s=timeout_s)


def signal_group(pgid: int, sig: int, verified: Iterable[ProcRef]) -> bool:
    """Signal every member of process group ``pgid``, one by one through verified pidfds,
    but only if one of ``verified`` (known members of the group we started) is alive and
    still in that group. Never ``killpg`` on a group id that nothing pins: the group may
    have emptied and its number gone to a stranger. True when a member was signalled."""
    if pgid <= 1:
        return False
    if not any(is_alive(ref) and _getpgid(ref.pid) == pgid for ref in verified):
        return False
    sent = False
    for ref in group_members(pgid):
        sent = send_signal(ref, sig) or sent
    return sent


@dataclass
class Tree:
    """Everything known about one launched tree: the leader, its group, the descendants
    seen so far and its marker. ``leader_guard`` is an extra "this group is ours" proof
    for a leader we keep unreaped (a zombie still pins its pid and group id)."""

    leader: ProcRef
    pgid: int
    marker: str
    known: set[ProcRef]
    leader_guard: Callable[[], bool] | None = None
    #: Processes to spare (the declaration's ``launch.spare``): one whose command line
    #: contains any of these is never signalled, though its descendants still are.
    spare: tuple[str, ...] = ()
    #: The tree's own cgroup (.cgroups), when it has one: everything in it is the tree's.
    cgroup: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def snapshot(self) -> list[ProcRef]:
        """The leader and every descendant seen so far (alive or not)."""
        with self._lock:
            return [self.leader, *self.known]

    def add(self, refs: Iterable[ProcRef]) -> list[ProcRef]:
        """Remember ``refs``; return the ones not known before."""
        new: list[ProcRef] = []
        with self._lock:
            for ref in refs:
                if ref != self.leader and ref not in self.known:
                    self.known.add(ref)
                    new.append(ref)
        return new

    def refresh(self) -> list[ProcRef]:
        """Forget known descendants that have ended (so a tree that spawns short-lived
        helpers for hours keeps a set the size of what is alive), add the descendants of
        the live ones, and return the newly found."""
        found: list[ProcRef] = []
        dead: list[ProcRef] = []
        for ref in self.snapshot():
            if ref != self.leader and not is_alive(ref):
                dead.append(ref)
                continue
            found.extend(descendants(ref))
        if dead:
            with self._lock:
                self.known.difference_update(dead)
        return self.add(found)

    def drop_dead(self) -> int:
        """Forget known descendants that have ended; return how many."""
        dead = [ref for ref in self.snapshot()[1:] if not is_alive(ref)]
        with self._lock:
            self.known.difference_update(dead)
        return len(dead)

    def live(self, *, marker_scan: bool = True) -> list[ProcRef]:
        """Every live process of the tree: leader, group, known descendants, and (with
        ``marker_scan``, the expensive part) marked processes."""
        self.refresh()
        candidates = self.snapshot()
        if self._group_is_ours():
            candidates += group_members(self.pgid)
        if marker_scan:
            candidates += find_marked(self.marker)
        if self.cgroup is not None:
            candidates += cgroup_members(self.cgroup)
        seen: dict[int, ProcRef] = {}
        for ref in candidates:
            if ref.pid not in seen and is_alive(ref):
                seen[ref.pid] = ref
        self.add(seen.values())
        return [ref for ref in seen.values() if ref == self.leader or not self.spared(ref)]

    def spared(self, ref: ProcRef) -> bool:
        """Whether ``ref``'s command line names one of the processes to spare."""
        if not self.spare or psutil is None:
            return False
        try:
            line = " ".join(psutil.Process(ref.pid).cmdline())
        except (psutil.Error, OSError):
            return False
        return any(pattern in line for pattern in self.spare)

    def _group_is_ours(self) -> bool:
        if self.leader_guard is not None and self.leader_guard():
            return True
        return any(is_alive(ref) and _getpgid(ref.pid) == self.pgid for ref in self.snapshot())

    def signal(self, sig: int, targets: Iterable[ProcRef]) -> int:
        """Signal the group while its leader is pinned (``leader_guard``: our unreaped
        child), and each target individually through its verified pidfd; count the
        targets that were signalled."""
        targets = list(targets)
        grouped = False
        # (A spared process may share the group: then only the targets are signalled.)
        if not self.spare and self.leader_guard is not None and self.leader_guard():
            try:
                os.killpg(self.pgid, sig)
                grouped = True
            except (ProcessLookupError, PermissionError, AttributeError):
                pass
        count = 0
        for ref in targets:
            if grouped and _getpgid(ref.pid) == self.pgid:
                count += 1  # already reached through the group
            elif send_signal(ref, sig):
                count += 1
        return count


def wait_gone(refs: Iterable[ProcRef], timeout_s: float, *, interval_s: float = 0.02) -> list[ProcRef]:
    """Wait until none of ``refs`` is alive or the timeout passes; return the survivors.
    (Its own loop, not ``polling.poll_until``: the watcher loads this module by file path,
    outside the package, so it imports nothing from it.)"""
    pending = list(refs)
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        pending = [ref for ref in pending if is_alive(ref)]
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))
        interval_s = min(interval_s * 1.5, 0.1)


#: ``reap_tree``'s how when processes were alive but no signal could reach any of them.
NOT_SIGNALLED = "not signalled"


def reap_tree(tree: Tree, *, term_s: float, kill_s: float = 1.0) -> tuple[str | None, list[ProcRef]]:
    """Terminate every live process of ``tree``, then kill what is left.

    Returns ``(how, survivors)``, and how says only what happened: None when nothing was
    alive (or what was alive exited before any signal reached it), ``"terminated"`` when
    SIGTERM was delivered and sufficed, ``"killed"`` when SIGKILL was delivered (survivors
    then outlived it), :data:`NOT_SIGNALLED` when processes live on that no signal could
    reach (nothing proves their pids are still the launched ones)."""
    targets = tree.live()
    if not targets:
        return None, []
    sent = tree.signal(signal.SIGTERM, targets)
    if hasattr(signal, "SIGCONT"):  # a stopped process cannot act on SIGTERM until continued
        tree.signal(signal.SIGCONT, targets)
    survivors = wait_gone(targets, term_s)
    # Anything that appeared meanwhile (a child spawned while handling SIGTERM) counts too.
    survivors = list({ref.pid: ref for ref in [*survivors, *tree.live()]}.values())
    if not survivors:
        return ("terminated" if sent else None), []
    kill = getattr(signal, "SIGKILL", signal.SIGTERM)
    killed = 0
    for _ in range(3):  # a process may fork while dying; sweep again
        killed += tree.signal(kill, survivors)
        # And whatever else is in its cgroup, forks in flight too. Everything of the tree
        # (spared processes moved out) is in it, so once it is empty nothing survived.
        if tree.cgroup is not None and end_cgroup(tree, timeout_s=kill_s):
            killed = killed or 1
            survivors = []
            break
        survivors = wait_gone(survivors, kill_s)
        survivors = list({ref.pid: ref for ref in [*survivors, *tree.live()]}.values())
        if not survivors:
            break
    if survivors and not killed:
        log.warning("processes %s could not be signalled", [ref.pid for ref in survivors])
        return NOT_SIGNALLED, survivors
    if survivors:
        log.warning("processes survived SIGKILL: %s", [ref.pid for ref in survivors])
    return ("killed" if killed else "terminated" if sent else None), survivors


__all__ = ["psutil", "MARKER_KEY", "NOT_SIGNALLED", "ProcRef", "Tree", "cgroup_members", "descendants", "end_cgroup", "find_marked", "group_members", "marker_value",
           "has_pidfds", "identity_provable", "is_alive", "reap_tree", "ref_for", "send_signal", "signal_group", "wait_gone"]
