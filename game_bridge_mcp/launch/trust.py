"""Whether a launch declaration may be believed: it is code the bridge runs, so it must be
yours or root's and unchangeable by anyone else (docs/reliability.md, "The launch
declaration's trust boundary"). The rule itself is :mod:`..ownership`'s, shared with the
command a declaration runs (:mod:`.command`) and the home folder (:mod:`..paths`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import BridgeUsageError
from ..ownership import describe_user, login, others_can_write, way_problems
from ..ownership import my_uid as _my_uid


def my_uid() -> int | None:
    """This process's user id (None where there are no user ids)."""
    return _my_uid()


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
        raise _refuse(path, f"it is owned by {describe_user(info.st_uid)}, not by you ({describe_user(uid)}) or root",
                      f"if it is yours, take it back (chown {login(uid)} {path}); if not, "
                      "delete it, or name your own with --config")
    if others_can_write(info, uid):
        raise _refuse(path, f"other users may write to it (mode {stat.filemode(info.st_mode)})",
                      f"chmod go-w {path}")
    problem = next(way_problems(path, uid), None)
    if problem is not None:
        raise _refuse(path, problem[0], f"{problem[1]}, or name your own with --config")


__all__ = ["check_trusted", "my_uid"]
