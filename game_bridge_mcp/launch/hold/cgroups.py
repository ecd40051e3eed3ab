"""A launched tree's own cgroup (Linux, cgroup v2), where the machine lets this user make one:
a process cannot leave a cgroup by ``setsid``, a double fork or an empty environment, so
ending the launch ends everything in it (``cgroup.kill``), whatever it did to hide
(docs/launching.md, "Reaping").

The cgroup is made inside the bridge's own (``<its cgroup>/game-bridge-<launch id>``), which
works as root and wherever this user's cgroup is delegated to it (a systemd user session);
elsewhere (a container with a read-only ``/sys/fs/cgroup``, cgroup v1 only, not Linux)
:func:`own_cgroup` is None and the launcher keeps the tree under a keeper instead
(:mod:`.keeper`). Standard library only: the watcher loads this module by file path.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import signal
import time

log = logging.getLogger(__name__)

#: Every cgroup the bridge makes is named ``game-bridge-<launch id>``.
PREFIX = "game-bridge-"


def _unescape(field: str) -> str:
    """A /proc/self/mountinfo field, its octal escapes (``\\040`` for a space) undone."""
    if "\\" not in field:
        return field
    out, index = [], 0
    while index < len(field):
        code = field[index + 1:index + 4]
        if field[index] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


@functools.lru_cache(maxsize=1)
def _v2_mount() -> tuple[str, str] | None:
    """``(root, mount point)`` of this process's cgroup v2 hierarchy, if one is mounted
    (read once: it is read for every process a tree's cgroup is asked about)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    fields = left.split()
                    return _unescape(fields[3]), _unescape(fields[4])
    except OSError:
        pass
    return None


def cgroup_of(pid: int | str = "self") -> str | None:
    """The directory of the cgroup v2 that process ``pid`` is in (None when it cannot be told)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = _v2_mount()
    if relative is None or mount is None or relative.endswith(" (deleted)"):
        return None
    root, point = mount
    if root != "/":
        if relative != root and not relative.startswith(root.rstrip("/") + "/"):
            return None  # outside what this mount shows
        relative = relative[len(root.rstrip("/")):] or "/"
    return os.path.normpath(point + "/" + relative.lstrip("/"))


def own_cgroup() -> str | None:
    """This process's cgroup directory when this user may make cgroups in it, else None."""
    path = cgroup_of()
    if path is None or not os.access(path, os.W_OK | os.X_OK):
        return None
    if not os.access(os.path.join(path, "cgroup.procs"), os.W_OK):
        return None
    return path


def create(base: str, name: str) -> str | None:
    """Make ``<base>/<name>``; None (logged) when it cannot be made."""
    path = os.path.join(base, name)
    try:
        os.mkdir(path)
    except OSError as exc:
        log.info("cannot make the cgroup %s: %s", path, exc)
        return None
    return path


def _write(path: str, text: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.write(fd, text.encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def move(path: str, pid: int) -> bool:
    """Put process ``pid`` into the cgroup ``path`` (its future children follow it)."""
    return _write(os.path.join(path, "cgroup.procs"), str(pid))


def _tree(path: str) -> list[str]:
    """``path`` and every cgroup below it, deepest first."""
    found: list[str] = []
    for top, dirs, _files in os.walk(path):
        found.extend(os.path.join(top, name) for name in dirs)
    return sorted(found, key=lambda p: p.count("/"), reverse=True) + [path]


def pids(path: str) -> list[int]:
    """Every process in the cgroup ``path`` and the cgroups below it."""
    found: list[int] = []
    for group in _tree(path):
        try:
            with open(os.path.join(group, "cgroup.procs"), encoding="ascii") as handle:
                found.extend(int(line) for line in handle if line.strip())
        except (OSError, ValueError):
            continue
    return found


def holds(path: str, pid: int) -> bool:
    """Whether process ``pid`` is in the cgroup ``path`` (or one below it) now."""
    where = cgroup_of(pid)
    return where is not None and (where == path or where.startswith(path.rstrip("/") + "/"))


def populated(path: str) -> bool:
    """Whether any process is in the cgroup ``path`` or below it (True when it cannot be read)."""
    try:
        with open(os.path.join(path, "cgroup.events"), encoding="ascii") as handle:
            for line in handle:
                key, _, value = line.partition(" ")
                if key == "populated":
                    return value.strip() != "0"
    except FileNotFoundError:
        return False
    except OSError:
        pass
    return bool(pids(path))


def _signal_members(path: str, sig: int) -> int:
    """Signal every process in ``path`` one by one, each through a pidfd and only while it
    is still in the cgroup (a pid read from ``cgroup.procs`` may have been freed since)."""
    sent = 0
    for pid in pids(path):
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = None
        try:
            if not holds(path, pid):
                continue
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(pid, sig)
            sent += 1
        except OSError:
            continue
        finally:
            if fd is not None:
                os.close(fd)
    return sent


def kill(path: str, *, timeout_s: float = 2.0) -> bool:
    """SIGKILL everything in the cgroup ``path``, forks in flight included (``cgroup.kill``,
    Linux 5.14; before that, each member until none is left), and wait until it is empty.
    True when it is."""
    if not _write(os.path.join(path, "cgroup.kill"), "1"):
        _signal_members(path, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    pause = 0.002
    while populated(path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
        _signal_members(path, signal.SIGKILL)  # a no-op with cgroup.kill, which took the forks too
    return True


def remove(path: str, *, evacuate_to: str | None = None) -> bool:
    """Remove the cgroup ``path`` (and any below it). Processes still in it (spared ones)
    are first moved to ``evacuate_to`` (the cgroup it was made in). True when it is gone."""
    if evacuate_to is not None:
        for pid in pids(path):
            move(evacuate_to, pid)
    gone = True
    for group in _tree(path):
        for _ in range(50):  # a process that just exited may keep it busy for a moment
            try:
                os.rmdir(group)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    log.info("cannot remove the cgroup %s: %s", group, exc)
                    gone = False
                    break
                time.sleep(0.01)
        else:
            gone = False
    return gone


def prune(base: str) -> int:
    """Remove the empty ``game-bridge-*`` cgroups in ``base`` left by bridges that are gone
    (killed together with their watcher); never one that holds a process. How many went."""
    removed = 0
    try:
        names = [name for name in os.listdir(base) if name.startswith(PREFIX)]
    except OSError:
        return 0
    for name in names:
        owner = name[len(PREFIX):].split("-", 1)[0]
        if not owner.isdigit():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # its bridge (or a process with its pid) lives
        except ProcessLookupError:
            pass
        except OSError:
            continue
        path = os.path.join(base, name)
        if not populated(path) and remove(path):
            removed += 1
    return removed


__all__ = ["PREFIX", "cgroup_of", "create", "holds", "kill", "move", "own_cgroup", "pids", "populated", "prune",
           "remove"]
