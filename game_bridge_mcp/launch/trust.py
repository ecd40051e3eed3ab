"""Whether a launch declaration may be believed: it is code the bridge runs, so it must be
yours or root's and unchangeable by anyone else (docs/reliability.md, "The launch
declaration's trust boundary")."""

from __future__ import annotations

import os
import stat
from collections import deque
from pathlib import Path
from typing import Iterator

from ..errors import BridgeUsageError


def my_uid() -> int | None:
    """This process's user id (None where there are no user ids)."""
    return os.geteuid() if hasattr(os, "geteuid") else None


def _user(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _group_is_only(gid: int, uid: int) -> bool:
    """Whether the only user in group ``gid`` is ``uid`` (a user-private group)."""
    try:
        import grp
        import pwd
    except ImportError:  # pragma: no cover - no groups on this platform
        return False
    try:
        me = pwd.getpwuid(uid)
    except KeyError:
        return False
    try:
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        members = set()
    if members - {me.pw_name}:
        return False
    if me.pw_gid != gid and me.pw_name not in members:
        return False  # a group we are not even in: its members are others
    try:
        return not any(entry.pw_gid == gid and entry.pw_uid != uid for entry in pwd.getpwall())
    except OSError:  # pragma: no cover
        return False


def _others_can_write(info: os.stat_result, uid: int) -> bool:
    if info.st_mode & stat.S_IWOTH:
        return True
    return bool(info.st_mode & stat.S_IWGRP) and not _group_is_only(info.st_gid, uid)


def _login(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _refuse(path: Path, problem: str, fix: str) -> BridgeUsageError:
    return BridgeUsageError(
        f"Launch declaration {path} is not used: {problem}. A declaration is a command the "
        f"bridge runs as you, so it must be yours and out of other users' reach. Fix: {fix}",
        file=str(path), refused=True)


def check_trusted(path: Path, *, uid: int | None = None) -> None:
    """Raise BridgeUsageError naming the file, its owner and the fix unless ``path`` is a
    declaration only you (or root) could have written. ``uid`` defaults to yours."""
    uid = my_uid() if uid is None else uid
    if uid is None:  # pragma: no cover - Windows: no owners to compare
        return
    try:
        info = os.stat(path)
    except OSError:
        return  # reading it reports what is wrong
    if info.st_uid not in (uid, 0):
        raise _refuse(path, f"it is owned by {_user(info.st_uid)}, not by you ({_user(uid)}) or root",
                      f"if it is yours, take it back (chown {_login(uid)} {path}); if not, "
                      "delete it, or name your own with --config")
    if _others_can_write(info, uid):
        raise _refuse(path, f"other users may write to it (mode {stat.filemode(info.st_mode)})",
                      f"chmod go-w {path}")
    problem = next(_chain_problems(path, uid), None)
    if problem is not None:
        raise _refuse(path, *problem)


#: Most symbolic links followed on the way to a declaration (the kernel's own limit).
MAX_LINKS = 40


def _chain_problems(path: Path, uid: int) -> Iterator[tuple[str, str]]:
    """What is wrong with the way to ``path``, resolved one name at a time as the kernel
    does: every directory passed through (from ``/``, and through every link's target)
    must be yours or root's and not writable by others (unless sticky, when the name in
    it must be yours or root's), and every link on the way yours or root's; else
    whoever may change that directory or link chooses which file is read."""
    names = deque(Path(path if os.path.isabs(path) else os.path.join(os.getcwd(), path)).parts[1:])
    current = Path("/")
    links = 0
    while names:
        name = names.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        try:
            held = os.stat(current)
            entry = current / name
            info = os.lstat(entry)
        except OSError:
            return  # reading it reports what is wrong
        if held.st_uid not in (uid, 0):
            yield (f"it is reached through {current}, owned by {_user(held.st_uid)}, who may replace "
                   "anything in it", f"move the project somewhere of your own, or name your own with --config")
        if _others_can_write(held, uid):
            if not held.st_mode & stat.S_ISVTX:
                where = "it is in" if entry == Path(os.path.abspath(path)) else f"it is reached through {entry}, in"
                yield (f"{where} {current}, which other users may write to (mode {stat.filemode(held.st_mode)}, "
                       f"owner {_user(held.st_uid)}, no sticky bit), so anyone could have put it there or "
                       "replaced it", f"chmod go-w {current} (or move the project somewhere only you can write)")
            elif info.st_uid not in (uid, 0):
                yield (f"it is reached through {entry}, which belongs to {_user(info.st_uid)} in the shared "
                       f"directory {current}", f"use a path of your own instead of {entry}")
        if stat.S_ISLNK(info.st_mode):
            if info.st_uid not in (uid, 0):
                yield (f"it is reached through the symbolic link {entry}, owned by {_user(info.st_uid)}, "
                       "who chooses what it points to", f"replace {entry} with a link or file of your own")
            links += 1
            if links > MAX_LINKS:
                return  # a loop: reading it reports it
            try:
                target = os.readlink(entry)
            except OSError:
                return
            parts = Path(target).parts
            if os.path.isabs(target):
                current = Path("/")
                parts = parts[1:]
            names.extendleft(reversed(parts))
        else:
            current = entry


__all__ = ["check_trusted", "my_uid"]
