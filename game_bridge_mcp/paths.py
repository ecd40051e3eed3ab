"""The one owner of where the bridge and the kit keep files (docs/cli.md, "Where files go"):
directories made private whatever the umask, a private temporary one when a directory is not
this user's, and what is kept (:func:`prune_files` with a :class:`KeepRule` per kind).

The home and the registry folder are used only when nobody else could change what their
path reaches (:mod:`.ownership`'s rule, the launch declaration's): a launched game imports
this package from ``<home>/pythonpath``, so a home reached through a folder another user
may write to would let that user choose the code it runs (docs/reliability.md)."""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Callable, Collection

#: The entries directory itself, and its parent (``$GAME_BRIDGE_HOME/instances``).
from .contract import ENV_HOME, ENV_INSTANCES
from .errors import BridgeUsageError
from .ownership import path_problem

log = logging.getLogger(__name__)

#: Name of the entries directory under the home directory.
INSTANCES_DIRNAME = "instances"
#: The default home directory, under the user's home.
DEFAULT_HOME_DIRNAME = ".game-bridge"

#: Environment variable naming the directory get_screenshot saves its copies in.
ENV_SCREENSHOTS = "GAME_BRIDGE_SCREENSHOTS"

#: Names of the directories under the home directory.
LOCKS_DIRNAME = "locks"
LOGS_DIRNAME = "logs"
SCREENSHOTS_DIRNAME = "screenshots"
STATES_DIRNAME = "states"
PYTHONPATH_DIRNAME = "pythonpath"
#: The directory holding this package (the link in ``pythonpath/`` points at it).
PACKAGE_DIR = Path(__file__).resolve().parent
HTTP_DIRNAME = "http"
#: The generated HTTP bearer token's file, in :func:`http_dir`.


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _expand(value: str | Path, environ: Mapping[str, str]) -> Path:
    """``~`` expanded against ``environ['HOME']`` when given, else the real home."""
    text = str(value)
    if text == "~" or text.startswith("~/") or text.startswith("~" + os.sep):
        home = environ.get("HOME") or str(Path.home())
        text = home + text[1:]
    return Path(text)


def registry_dir(environ: Mapping[str, str] | None = None,
                 override: str | Path | None = None) -> Path:
    """Where instance entries live.

    ``override`` (``--registry-dir``) wins, then ``GAME_BRIDGE_INSTANCES``, then
    ``$GAME_BRIDGE_HOME/instances``, else ``~/.game-bridge/instances``. Empty values
    count as unset. The directory is not created or checked here.
    """
    env = _env(environ)
    if override is not None and str(override) != "":
        return _expand(override, env)
    instances = env.get(ENV_INSTANCES, "")
    if instances:
        return _expand(instances, env)
    home = env.get(ENV_HOME, "")
    if home:
        return _expand(home, env) / INSTANCES_DIRNAME
    return _expand("~", env) / DEFAULT_HOME_DIRNAME / INSTANCES_DIRNAME


def registry_home(environ: Mapping[str, str] | None = None,
                  override: str | Path | None = None) -> Path:
    """The directory holding the entries directory (the launcher keeps port locks there)."""
    return registry_dir(environ, override).parent


def _home_source(environ: Mapping[str, str], override: str | Path | None) -> str:
    """Which setting chose the home, in words."""
    if override is not None and str(override) != "":
        return "the folder above --registry-dir"
    if environ.get(ENV_INSTANCES, ""):
        return f"the folder above {ENV_INSTANCES}"
    if environ.get(ENV_HOME, ""):
        return ENV_HOME
    return "the default home"


def folder_refusal(path: Path, what: str, stake: str, alternative: str) -> str | None:
    """Why the folder ``path`` (``what`` it is, for the message) is not used, in a sentence
    naming it, the reason and the fix; None when nobody else could change what the path
    reaches (:func:`.ownership.path_problem`). A folder that does not exist yet is judged
    by the way to it (it is made private when it is made). ``stake``: what whoever
    controls it could do; ``alternative``: the other way out, after the fix."""
    problem = path_problem(path)
    if problem is None:
        return None
    return f"{what} {path} is not used: {problem[0]}. {stake} Fix: {problem[1]}, or {alternative}."


def home_refusal(environ: Mapping[str, str] | None = None, override: str | Path | None = None) -> str | None:
    """Why the bridge's home (:func:`registry_home`) may not be used, naming it; None when it may."""
    env = _env(environ)
    return folder_refusal(
        registry_home(env, override), f"The bridge's home ({_home_source(env, override)})",
        "Whoever could change it would choose what launched Python games import (its pythonpath/), "
        "which files the bridge writes there and which port locks it takes.",
        f"point {ENV_HOME} at a folder of your own")


def check_home(environ: Mapping[str, str] | None = None, override: str | Path | None = None) -> Path:
    """The bridge's home, or BridgeUsageError naming it, why it is not used and the fix."""
    env = _env(environ)
    refusal = home_refusal(env, override)
    home = registry_home(env, override)
    if refusal is not None:
        raise BridgeUsageError(refusal, home=str(home), refused=True)
    return home


def registry_refusal(directory: Path) -> str | None:
    """Why the registry folder ``directory`` is neither read nor written, naming it; None when it may be."""
    return folder_refusal(directory, "The registry folder",
                          "Whoever could change it would choose which games are listed and where their entries go.",
                          f"use a folder of your own (--registry-dir, {ENV_INSTANCES} or {ENV_HOME})")


_warned: set[str] = set()


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        log.warning("%s", text)


def locks_dir(environ: Mapping[str, str] | None = None, override: str | Path | None = None) -> Path:
    """Where the launcher keeps its per-port lock files: ``<home>/locks``."""
    return registry_home(environ, override) / LOCKS_DIRNAME


def _user_tag() -> str:
    return str(os.getuid()) if hasattr(os, "getuid") else "user"


def make_dirs(path: Path) -> list[Path]:
    """Create ``path`` and whichever of its parents are missing, each exactly 0700
    whatever the umask; the directories created here, outermost first. A directory that
    already exists is left as it is: never chmodded (it may be a shared folder, or not
    this user's). Raises OSError when one cannot be made."""
    missing: list[Path] = []
    probe = Path(os.path.abspath(path))
    while not os.path.lexists(probe) and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    created: list[Path] = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:  # made meanwhile, by someone else: not ours to change
            continue
        created.append(directory)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o700:  # a umask that took the owner's bits
                os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
    return created


def _private_dir(path: Path) -> Path | None:
    """``path``, created 0700 (with any missing parents, see :func:`make_dirs`), or
    accepted as it is when it is a real directory owned by this user that nobody else
    can write to; None when it is not safe to write there. Never chmods a directory it
    did not create. The way to it must be this user's too (:func:`.ownership.path_problem`),
    checked before anything is made and again after."""
    if path_problem(path) is not None:
        return None
    try:
        make_dirs(path)
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        return None
    if path_problem(path) is not None:  # something on the way changed while it was made
        return None
    return path


def _named_dir(path: Path) -> Path | None:
    """A directory the user named for files of ours (``$GAME_BRIDGE_SCREENSHOTS``): created
    0700 when missing, else used as it is (a shared team folder keeps its mode; files go in
    new, 0600, never through a link) when it is a real directory this user can write to."""
    try:
        make_dirs(path)
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not os.access(path, os.W_OK | os.X_OK):
        return None
    return path


def _private_under_home(kind: str, environ: Mapping[str, str] | None, override: str | Path | None) -> Path | None:
    """``<home>/<kind>`` made private to this user, else ``<tmp>/game-bridge-<kind>-<uid>``;
    None (with a warning naming it) when the home itself is refused (:func:`home_refusal`)."""
    refusal = home_refusal(environ, override)
    if refusal is not None:
        _warn_once(refusal)
        return None
    for candidate in (registry_home(environ, override) / kind,
                      Path(tempfile.gettempdir()) / f"game-bridge-{kind}-{_user_tag()}"):
        found = _private_dir(candidate)
        if found is not None:
            return found
    return None


def log_dir(environ: Mapping[str, str] | None = None, override: str | Path | None = None) -> Path:
    """Where launched games' logs go: ``<home>/logs``, private (see the module docstring);
    a fresh private temporary directory when neither place can be had."""
    found = _private_under_home(LOGS_DIRNAME, environ, override)
    return found if found is not None else Path(tempfile.mkdtemp(prefix="game-bridge-logs-"))


def screenshot_dir(environ: Mapping[str, str] | None = None, override: str | Path | None = None) -> Path | None:
    """Where ``get_screenshot`` keeps its copies: ``$GAME_BRIDGE_SCREENSHOTS`` (as it is,
    see :func:`_named_dir`), else ``<home>/screenshots``, private; None when no usable
    directory can be had."""
    env = _env(environ)
    named = env.get(ENV_SCREENSHOTS, "")
    if named:
        return _named_dir(_expand(named, env))
    return _private_under_home(SCREENSHOTS_DIRNAME, environ, override)


def states_dir(environ: Mapping[str, str] | None = None, override: str | Path | None = None) -> Path | None:
    """Where saved states go (``save_state``, core/statestore.py): ``<home>/states``, private
    (see the module docstring); None when no private directory can be had."""
    return _private_under_home(STATES_DIRNAME, environ, override)


def package_path_dir(environ: Mapping[str, str] | None = None, override: str | Path | None = None,
                     *, package: Path = PACKAGE_DIR) -> Path | None:
    """A private directory holding nothing but a link named after ``package`` to it (this
    package, by default), for a launched game's ``PYTHONPATH``: the game imports the
    bridge's own copy of the package, and none of what else is installed beside it (the
    SDK, pydantic), which could clash with the game's own. One directory per copy
    (``<home>/pythonpath/<hash of its path>``), so bridges of different installs never
    repoint each other's link. None when no private directory or link can be had."""
    import hashlib

    base = _private_under_home(PYTHONPATH_DIRNAME, environ, override)
    if base is None:
        return None
    target = str(package)
    directory = _private_dir(base / hashlib.sha256(target.encode("utf-8")).hexdigest()[:16])
    if directory is None:
        return None
    link = directory / package.name
    try:
        if os.path.islink(link) and os.readlink(link) == target:
            return directory
        staging = directory / f".{package.name}.{os.getpid()}.{time.monotonic_ns()}"
        os.symlink(target, staging)
        os.replace(staging, link)  # atomic: a game starting meanwhile sees the old link or the new
    except OSError:
        return None
    return directory


def http_dir(environ: Mapping[str, str] | None = None, override: str | Path | None = None) -> Path | None:
    """Where an HTTP server keeps the token it generated: ``<home>/http``, private (see
    the module docstring); None when no private directory can be had."""
    return _private_under_home(HTTP_DIRNAME, environ, override)


@dataclass(frozen=True)
class KeepRule:
    """How much of one kind of file the bridge keeps: files older than ``max_age_s`` go,
    then the oldest beyond the newest ``max_files`` or beyond ``max_bytes`` in total."""

    max_files: int
    max_bytes: int
    max_age_s: float


#: Launched games' logs (each one is capped on its own as it is written, see launch/capture.py).
LOG_KEEP = KeepRule(max_files=100, max_bytes=512 * 1024 * 1024, max_age_s=7 * 24 * 3600)
#: Saved screenshot copies.
SCREENSHOT_KEEP = KeepRule(max_files=200, max_bytes=256 * 1024 * 1024, max_age_s=7 * 24 * 3600)
#: Recorded traces.
TRACE_KEEP = KeepRule(max_files=100, max_bytes=512 * 1024 * 1024, max_age_s=30 * 24 * 3600)


def prune_files(directory: Path, rule: KeepRule, *, match: Callable[[str], bool],
                keep: Collection[str | Path] = (), now: float | None = None) -> int:
    """THE pruning rule for every directory of files the bridge writes (logs, screenshot
    copies, traces): among the regular files in ``directory`` whose name ``match`` accepts,
    newest first, delete those older than ``rule.max_age_s``, those past the newest
    ``rule.max_files`` and those past ``rule.max_bytes`` in total. Files in ``keep`` (in
    use) are never deleted but count towards the totals, and so are other users' files (a
    shared folder). Never follows a link, never descends, never raises; returns how many
    files it deleted."""
    now = time.time() if now is None else now
    kept = {str(path) for path in keep}
    mine = os.getuid() if hasattr(os, "getuid") else None
    files: list[tuple[float, int, str]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not match(entry.name):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if mine is not None and info.st_uid != mine:
                    kept.add(entry.path)
                files.append((info.st_mtime, info.st_size, entry.path))
    except OSError:
        return 0
    files.sort(reverse=True)  # newest first
    total = 0
    deleted = 0
    for index, (mtime, size, path) in enumerate(files):
        total += size
        if path in kept:
            continue
        if mtime < now - rule.max_age_s or index >= rule.max_files or total > rule.max_bytes:
            try:
                os.unlink(path)
                deleted += 1
            except OSError:
                continue
    return deleted


def fallback_locks_dir() -> Path:
    """Where port locks go when the home's ``locks/`` cannot be made (a read-only home):
    ``<tempdir>/game-bridge-locks-<uid>`` if it is (or can be made) a private directory of
    this user's, else a fresh private one (which no other bridge shares)."""
    found = _private_dir(Path(tempfile.gettempdir()) / f"game-bridge-locks-{_user_tag()}")
    return found if found is not None else Path(tempfile.mkdtemp(prefix="game-bridge-locks-"))


__all__ = ["check_home", "folder_refusal", "home_refusal", "registry_refusal", "DEFAULT_HOME_DIRNAME", "ENV_HOME", "ENV_INSTANCES", "ENV_SCREENSHOTS", "INSTANCES_DIRNAME",
           "KeepRule", "LOCKS_DIRNAME", "LOG_KEEP", "make_dirs", "SCREENSHOT_KEEP", "TRACE_KEEP", "prune_files", "log_dir", "fallback_locks_dir", "locks_dir", "registry_dir", "registry_home",
           "screenshot_dir"]
