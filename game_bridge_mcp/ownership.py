"""Who could change what a path reaches: the one rule the bridge holds every file it runs or
keeps its own files in to (the launch declaration, the command it names and the script that
runs, the home folder, the registry folder; docs/reliability.md, "Who may change what the
bridge runs and keeps").

A path may be believed when it is owned by you or root, nobody else may write to it, and
nobody else can change which file or folder its path reaches: every directory passed
through, from ``/`` and through every symbolic link's target, is yours or root's and not
writable by other users unless the sticky bit is set (then the name in it must be yours or
root's), and every link on the way is yours or root's. A group with only you in it (the
usual ``umask 002`` layout) counts as yours. Standard library only."""

from __future__ import annotations

import functools
import os
import stat
from collections import deque
from pathlib import Path
from typing import Iterator

#: A problem, in words (``it is ...``), and the fix, as a command or an instruction.
Problem = tuple[str, str]

#: Most symbolic links followed on the way (the kernel's own limit).
MAX_LINKS = 40


def my_uid() -> int | None:
    """This process's effective user id (None where there are no user ids)."""
    return os.geteuid() if hasattr(os, "geteuid") else None


def describe_user(uid: int) -> str:
    """``name (uid N)``, or ``uid N`` when the name is unknown."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def login(uid: int) -> str:
    """The login name of ``uid`` (its number when there is none), as ``chown`` takes it."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


@functools.lru_cache(maxsize=64)
def group_is_only(gid: int, uid: int) -> bool:
    """Whether the only user in group ``gid`` is ``uid`` (a user-private group). Cached:
    reading every user can be slow where users come from a directory service."""
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


def others_can_write(info: os.stat_result, uid: int) -> bool:
    """Whether a user other than ``uid`` (and root) may write to what ``info`` describes."""
    if info.st_mode & stat.S_IWOTH:
        return True
    return bool(info.st_mode & stat.S_IWGRP) and not group_is_only(info.st_gid, uid)


def owner_problem(path: Path | str, info: os.stat_result, uid: int) -> Problem | None:
    """What is wrong with the file or folder ``info`` describes itself: another user's,
    or writable by others (a sticky folder too: others may put new names in it)."""
    if info.st_uid not in (uid, 0):
        return (f"it is owned by {describe_user(info.st_uid)}, not by you ({describe_user(uid)}) or root",
                f"if it is yours, take it back (chown {login(uid)} {path}); if not, use one of your own")
    if others_can_write(info, uid):
        return (f"other users may write to it (mode {stat.filemode(info.st_mode)}, owner {describe_user(info.st_uid)})",
                f"chmod go-w {path}")
    return None


def way_problems(path: Path | str, uid: int) -> Iterator[Problem]:
    """What is wrong with the way to ``path``, resolved one name at a time as the kernel
    does (see the module docstring); whoever may change a directory or link on the way
    chooses what the path reaches. Stops quietly at a name that does not exist (yet)."""
    names = deque(Path(path if os.path.isabs(path) else os.path.join(os.getcwd(), path)).parts[1:])
    target = Path(os.path.abspath(path))
    current = Path("/")
    links = 0
    while names:
        name = names.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        entry = current / name
        try:
            held = os.stat(current)
        except OSError:
            return  # what is missing is made, or reported, by whoever uses it
        try:
            info: os.stat_result | None = os.lstat(entry)
        except OSError:
            info = None  # not there (yet): whoever controls the folder could still put it there
        if held.st_uid not in (uid, 0):
            yield (f"it is reached through {current}, owned by {describe_user(held.st_uid)}, who may replace "
                   "anything in it", "move it somewhere of your own")
        if others_can_write(held, uid):
            if not held.st_mode & stat.S_ISVTX:
                where = "it is in" if entry == target else f"it is reached through {entry}, in"
                yield (f"{where} {current}, which other users may write to (mode {stat.filemode(held.st_mode)}, "
                       f"owner {describe_user(held.st_uid)}, no sticky bit), so anyone could have put it there or "
                       "replaced it", f"chmod go-w {current} (or move it somewhere only you can write)")
            elif info is not None and info.st_uid not in (uid, 0):
                yield (f"it is reached through {entry}, which belongs to {describe_user(info.st_uid)} in the shared "
                       f"directory {current}", f"use a path of your own instead of {entry}")
        if info is None:
            return
        if stat.S_ISLNK(info.st_mode):
            if info.st_uid not in (uid, 0):
                yield (f"it is reached through the symbolic link {entry}, owned by {describe_user(info.st_uid)}, "
                       "who chooses what it points to", f"replace {entry} with a link or file of your own")
            links += 1
            if links > MAX_LINKS:
                return  # a loop: using it reports it
            try:
                link = os.readlink(entry)
            except OSError:
                return
            parts = Path(link).parts
            if os.path.isabs(link):
                current = Path("/")
                parts = parts[1:]
            names.extendleft(reversed(parts))
        else:
            current = entry


def path_problem(path: Path | str, uid: int | None = None) -> Problem | None:
    """The first reason ``path`` may not be believed (see the module docstring): the file
    or folder it reaches (when it exists) is another user's or writable by others, or the
    way to it is not yours; None when it may be. ``uid`` defaults to yours. Where there
    are no user ids (Windows) nothing is refused."""
    uid = my_uid() if uid is None else uid
    if uid is None:  # pragma: no cover - Windows
        return None
    try:
        info = os.stat(path)
    except OSError:
        info = None
    if info is not None:
        problem = owner_problem(path, info, uid)
        if problem is not None:
            return problem
    return next(way_problems(path, uid), None)


__all__ = ["MAX_LINKS", "Problem", "describe_user", "group_is_only", "login", "my_uid", "others_can_write",
           "owner_problem", "path_problem", "way_problems"]
