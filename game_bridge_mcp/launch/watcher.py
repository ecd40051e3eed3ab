"""The reaper that outlives a SIGKILLed bridge: reads the bridge's records from its stdin, and
on EOF reaps exactly what they name, then exits (docs/design.md, "The watcher").

Runnable as ``python -m game_bridge_mcp.launch.watcher`` or as ``python <path>/watcher.py`` (how
the launcher starts it, so it works when the package is vendored under another name).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
    # Run as a file: its own directory is sys.path[0]; drop it so sibling modules can
    # never shadow the standard library.
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _here:
        del sys.path[0]

import argparse
import importlib
import json
import logging
import select
import signal
import threading
from types import ModuleType
from typing import Any

log = logging.getLogger("game_bridge_mcp.launch.watcher")

#: How long the watcher waits between SIGTERM and SIGKILL once the bridge has gone.
TERM_GRACE_S = 1.0
#: How often it checks that the bridge still lives (in case the pipe was inherited).
BRIDGE_CHECK_S = 1.0
#: How long a keeper gets to end its own tree before the watcher reaps what is left.
KEEPER_WAIT_S = 5.0


def _load_procs() -> ModuleType:
    """The sibling ``procs`` module, by package when possible, else by file path: the
    package directory above this file is given a private name (its ``__init__`` not
    run), so the relative imports of ``procs`` resolve within the same checkout."""
    if __package__:
        return importlib.import_module(".procs", __package__)
    here = os.path.dirname(os.path.abspath(__file__))
    root = "_game_bridge_watcher_package"
    for name, path in ((root, os.path.dirname(here)), (root + ".launch", here)):
        package = ModuleType(name)
        package.__path__ = [path]
        sys.modules[name] = package
    return importlib.import_module(root + ".launch.procs")


class Records:
    """What the bridge has told this watcher is still running."""

    def __init__(self, procs: ModuleType) -> None:
        self.procs = procs
        self.trees: dict[str, Any] = {}
        self.markers: dict[str, str] = {}
        #: Each launch's own cgroup, from its expect record on (made before its spawn).
        self.cgroups: dict[str, str] = {}
        #: Launches held by a keeper (.keeper), which ends its own tree when the bridge goes.
        self.kept: set[str] = set()

    def apply(self, record: dict[str, Any]) -> None:
        op = record.get("op")
        ident = str(record.get("id", ""))
        if not ident:
            return
        procs = self.procs
        cgroup = record.get("cgroup")
        if op in ("expect", "launch"):
            if isinstance(cgroup, str) and os.path.basename(cgroup).startswith(self.procs.cgroups.PREFIX):
                self.cgroups[ident] = cgroup
            else:
                self.cgroups.pop(ident, None)
        if op == "expect":
            self.markers[ident] = str(record.get("marker", ""))
        elif op == "launch":
            leader = procs.ProcRef(int(record["pid"]), float(record["ctime"]))
            marker = str(record.get("marker", ""))
            self.markers[ident] = marker
            spare = record.get("spare")
            self.trees[ident] = procs.Tree(leader=leader, pgid=int(record.get("pgid", leader.pid)),
                                           marker=marker, known=set(),
                                           spare=tuple(str(p) for p in spare) if isinstance(spare, list) else (),
                                           cgroup=self.cgroups.get(ident))
            if record.get("keeper") is True:
                self.kept.add(ident)
            else:
                self.kept.discard(ident)
        elif op == "child" and ident in self.trees:
            self.trees[ident].add([procs.ProcRef(int(record["pid"]), float(record["ctime"]))])
        elif op == "forget":
            self.trees.pop(ident, None)
            self.markers.pop(ident, None)
            self.cgroups.pop(ident, None)
            self.kept.discard(ident)

    def drop_dead(self) -> None:
        """Forget recorded descendants that have ended (the records stay the live tree's)."""
        for tree in self.trees.values():
            tree.drop_dead()

    def reap(self, term_s: float = TERM_GRACE_S) -> int:
        """Terminate then kill everything recorded; return how many trees had survivors."""
        procs = self.procs
        trees = [(ident, tree) for ident, tree in self.trees.items()]
        for ident, marker in self.markers.items():
            if ident not in self.trees and marker:
                # Spawned, but the bridge died before it could say so: its cgroup and marker find it.
                cgroup = self.cgroups.get(ident)
                found = procs.find_marked(marker)
                found += procs.cgroup_members(cgroup) if cgroup else []
                if found:
                    trees.append((ident, procs.Tree(leader=found[0], pgid=-1, marker=marker, known=set(found),
                                                    cgroup=cgroup)))
                elif cgroup:
                    procs.cgroups.remove(cgroup, evacuate_to=os.path.dirname(cgroup))
        results: list[str | None] = []

        def reap_one(ident: str, tree: Any) -> None:
            if ident in self.kept:
                # Its keeper saw the bridge's pipe close too, and ends everything below it
                # (it is their subreaper ancestor): signalling it meanwhile could orphan them.
                procs.wait_gone([tree.leader], KEEPER_WAIT_S)
            how, survivors = procs.reap_tree(tree, term_s=term_s, kill_s=0.5)
            if tree.cgroup:
                procs.end_cgroup(tree, timeout_s=1.0)
                procs.cgroups.remove(tree.cgroup, evacuate_to=os.path.dirname(tree.cgroup))
            results.append(how)
            if how is not None:
                log.info("reaped launch %s (%s)%s", tree.marker, how,
                         f", survivors {[r.pid for r in survivors]}" if survivors else "")

        # One thread per tree, so one game that ignores SIGTERM does not delay the rest.
        threads = [threading.Thread(target=reap_one, args=(ident, tree), daemon=True) for ident, tree in trees]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=term_s + KEEPER_WAIT_S + 5.0)
        reaped = sum(1 for how in results if how is not None)
        return reaped


def _bridge_alive(procs: ModuleType, pid: int | None, ctime: float | None) -> bool:
    if pid is None:
        return True
    if ctime is None:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except OSError:
            return True
    return bool(procs.is_alive(procs.ProcRef(pid, ctime)))


def answer(fd: int, seq: Any) -> None:
    """Answer a ping on ``fd`` without ever blocking (a bridge that stopped reading gets
    no answer, which is what it should see)."""
    try:
        if select.select([], [fd], [], 0)[1]:
            os.write(fd, f"{int(seq)}\n".encode())
    except (OSError, ValueError, TypeError):
        pass


def run(fd: int, records: Records, *, bridge_pid: int | None, bridge_ctime: float | None,
        answers: int | None = None) -> None:
    """Read records from ``fd`` until EOF (or the bridge is gone), then reap; answer
    pings on ``answers``."""
    buffer = b""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], BRIDGE_CHECK_S)
        except InterruptedError:  # pragma: no cover - PEP 475 retries, but be safe
            continue
        if not ready:
            if not _bridge_alive(records.procs, bridge_pid, bridge_ctime):
                log.info("bridge %s is gone but the pipe is still open; reaping", bridge_pid)
                break
            records.drop_dead()
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                record = json.loads(line)
                if isinstance(record, dict) and record.get("op") == "ping":
                    if answers is not None:
                        answer(answers, record.get("seq"))
                elif isinstance(record, dict):
                    records.apply(record)
            except (ValueError, KeyError, TypeError):
                log.warning("ignored a malformed record: %r", line[:200])
    records.reap()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="game_bridge_mcp.launch.watcher", description=(
        "Reap the processes a game-bridge launched once the bridge's pipe closes. "
        "Started by the bridge; not for interactive use."))
    parser.add_argument("--bridge-pid", type=int, default=None)
    parser.add_argument("--bridge-ctime", type=float, default=None)
    parser.add_argument("--log", default=None, help="append diagnostics to this file")
    args = parser.parse_args(argv)
    if args.log:
        logging.basicConfig(filename=args.log, level=logging.INFO,
                            format="%(asctime)s watcher[%(process)d] %(message)s")
    for name in ("SIGINT", "SIGHUP", "SIGPIPE"):  # only EOF (or SIGKILL) ends a watcher
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    procs = _load_procs()
    try:
        run(sys.stdin.fileno(), Records(procs), bridge_pid=args.bridge_pid, bridge_ctime=args.bridge_ctime,
            answers=sys.stdout.fileno() if sys.stdout is not None else None)
    except Exception:  # pragma: no cover - last resort: log, never leave a traceback on a tty
        log.exception("watcher failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
