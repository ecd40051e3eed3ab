"""The launcher's once-a-second look at its process trees: new descendants recorded (and told
to the watcher), adopted processes claimed or kept as strays, exited ones reaped."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable

from . import parent, procs
from .hold import cgroups
from .instance import LaunchedInstance
from .procs import MARKER_KEY, ProcRef

log = logging.getLogger(__name__)

#: Seconds between looks.
INTERVAL_S = 1.0
#: The watcher record id of the strays.
STRAYS_ID = "strays"


def _traces_of(ref: ProcRef) -> tuple[int | None, int | None, list[str]]:
    """An adopted process's process group, session and launch markers (what is readable);
    its cgroup is looked at by :meth:`Monitor.adopt`."""
    pgid = sid = None
    markers: list[str] = []
    try:
        pgid, sid = os.getpgid(ref.pid), os.getsid(ref.pid)
    except OSError:
        pass
    if procs.psutil is not None:
        try:
            markers = procs.psutil.Process(ref.pid).environ().get(MARKER_KEY, "").split(",")
        except (procs.psutil.Error, OSError):
            pass
    return pgid, sid, markers


class Monitor:
    """Watches the launched trees of one launcher (see the module docstring)."""

    def __init__(self, instances: Callable[[], list[LaunchedInstance]], watcher: Any) -> None:
        self._instances = instances
        self._watcher = watcher
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._strays: set[ProcRef] = set()
        self._told_strays = False

    def start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._loop, name="launcher-monitor", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            for inst in self._instances():
                if not inst.stopping:
                    self.note_descendants(inst)
            self.adopt()

    def note_descendants(self, inst: LaunchedInstance) -> None:
        """Record ``inst``'s new descendants and tell the watcher."""
        try:
            for ref in inst.tree.refresh():
                self._watcher.send({"op": "child", "id": inst.launch_id, "pid": ref.pid,
                                    "ctime": ref.create_time})
        except Exception:  # pragma: no cover - monitoring is best effort
            log.debug("descendant refresh failed", exc_info=True)

    def adopt(self) -> None:
        """Reap adopted zombies; give each live adopted process to the tree it came from,
        or keep it as a stray."""
        parent.reap_adopted()
        adopted = parent.adopted()
        if not adopted:
            self._forget_dead_strays()
            return
        instances = self._instances()
        known = {ref for inst in instances for ref in inst.tree.snapshot()}
        for ref in adopted:
            if ref in known:
                continue
            pgid, sid, markers = _traces_of(ref)
            owner = next((inst for inst in instances
                          if inst.launch_id in markers or inst.tree.pgid in (pgid, sid)
                          or (inst.tree.cgroup is not None and cgroups.holds(inst.tree.cgroup, ref.pid))), None)
            if owner is not None:
                owner.tree.add([ref])
                self._watcher.send({"op": "child", "id": owner.launch_id, "pid": ref.pid,
                                    "ctime": ref.create_time})
                continue
            with self._lock:
                if ref in self._strays:
                    continue
                self._strays.add(ref)
                first = not self._told_strays
                self._told_strays = True
            log.info("adopted pid %d, which no launched tree claims: ended with the last instance", ref.pid)
            if first:
                self._watcher.send({"op": "launch", "id": STRAYS_ID, "pid": ref.pid, "ctime": ref.create_time,
                                    "pgid": -1, "marker": ""})
            else:
                self._watcher.send({"op": "child", "id": STRAYS_ID, "pid": ref.pid, "ctime": ref.create_time})
        self._forget_dead_strays()

    def _forget_dead_strays(self) -> None:
        with self._lock:
            self._strays = {ref for ref in self._strays if procs.is_alive(ref)}
            gone = self._told_strays and not self._strays
            if gone:
                self._told_strays = False
        if gone:
            self._watcher.send({"op": "forget", "id": STRAYS_ID})

    def reap_strays(self, *, term_s: float) -> None:
        """End the strays (terminate, then kill), after one last look for new ones."""
        self.adopt()
        with self._lock:
            strays = sorted(self._strays, key=lambda ref: ref.pid)
        if strays:
            tree = procs.Tree(leader=strays[0], pgid=-1, marker="", known=set(strays[1:]))
            how, survivors = procs.reap_tree(tree, term_s=term_s, kill_s=1.0)
            log.info("strays %s %s", [ref.pid for ref in strays], how)
        parent.reap_adopted()
        self._forget_dead_strays()


__all__ = ["INTERVAL_S", "Monitor", "STRAYS_ID"]
