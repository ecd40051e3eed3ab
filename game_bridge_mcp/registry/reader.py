"""The instance registry as the bridge reads it: typed entries and a problem for every file
that could not be used, never connecting, deleting or raising (a stale entry is pruned only
when discovery asks). Every registry name is importable from here."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import registry_refusal
from .entry import DEFAULT_MAX_BYTES, InvalidEntry, RegistryEntry, RegistryProblem, is_loopback_literal, load_entry

try:  # psutil is a dependency of the bridge, but a vendored copy must not need it.
    import psutil as _psutil
except ImportError:  # pragma: no cover - exercised only where psutil is missing
    _psutil = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

#: Most entry files read from one directory (a registry is a handful of tiny files).
DEFAULT_MAX_FILES = 5000
#: How long reading one directory may take in all; what is left unread is reported.
DEFAULT_TIME_BUDGET_S = 1.0
#: Most names taken from the directory listing at all.
MAX_NAMES = 200_000


@dataclass
class RegistryScan:
    """What :func:`read_registry` found: usable entries, unusable files with reasons,
    entries skipped because their host is not a loopback address, and a note when the
    directory itself could not be read (missing is normal, not an error) or was not read
    to the end (``cut_short``, also a problem on the directory)."""

    directory: Path
    entries: list[RegistryEntry] = field(default_factory=list)
    problems: list[RegistryProblem] = field(default_factory=list)
    ignored_hosts: list[RegistryProblem] = field(default_factory=list)
    note: str | None = None
    cut_short: bool = False


def _pid_named(name: str) -> bool:
    """Whether ``<pid>.json`` names a process that is running now (cheap: no file read)."""
    stem = name[:-len(".json")]
    return stem.isdigit() and len(stem) < 10 and pid_alive(int(stem))


# --------------------------------------------------------------------------- reading

def read_registry(directory: Path, *, max_files: int = DEFAULT_MAX_FILES,
                  max_bytes: int = DEFAULT_MAX_BYTES,
                  time_budget_s: float = DEFAULT_TIME_BUDGET_S) -> RegistryScan:
    """Read the ``*.json`` entries in ``directory``; never raises for what is found there.

    A folder another user could change (:func:`..paths.registry_refusal`) is not read: the
    scan is empty, its note and one problem say why. Hidden files (the writer's temporaries
    start with a dot) and other names are
    skipped silently. A missing or unreadable directory gives an empty scan with a
    ``note``. Each unusable file becomes a problem with a reason; an entry whose
    ``host`` is not a loopback IP literal lands in ``ignored_hosts``, so nothing is
    ever contacted on its say-so.

    A directory stuffed with junk cannot hide a live game or stall the caller: files
    named after a running process (``<pid>.json``, as writers name them) are read first,
    reading stops after ``max_files`` files or ``time_budget_s`` seconds, and then
    ``cut_short`` is set and a problem (and the note) says how many were read of how many.
    """
    directory = Path(directory)
    scan = RegistryScan(directory=directory)
    refusal = registry_refusal(directory)
    if refusal is not None:  # another user could choose what it lists: nothing in it is read
        scan.note = refusal
        scan.problems.append(RegistryProblem(directory, refusal))
        return scan
    started = time.monotonic()
    names: list[str] = []
    listing_cut = False
    try:
        with os.scandir(directory) as it:
            for item in it:
                if item.name.endswith(".json") and not item.name.startswith("."):
                    names.append(item.name)
                    if len(names) >= MAX_NAMES or time.monotonic() - started > max(time_budget_s, 0.25):
                        listing_cut = True
                        break
    except FileNotFoundError:
        scan.note = "the registry directory does not exist (no instance has registered yet)"
        return scan
    except NotADirectoryError:
        scan.note = "the registry path is not a directory"
        return scan
    except OSError as exc:
        scan.note = f"the registry directory cannot be read ({exc.strerror or exc})"
        return scan
    live = sorted(n for n in names if _pid_named(n))
    chosen = set(live)
    ordered = live + sorted(n for n in names if n not in chosen)
    read = 0
    for name in ordered:
        if read >= max_files or time.monotonic() - started > time_budget_s:
            break
        read += 1
        path = directory / name
        try:
            entry = load_entry(path, max_bytes=max_bytes)
        except InvalidEntry as bad:
            scan.problems.append(RegistryProblem(path, bad.reason, bad.port, bad.pid, bad.host))
            continue
        if not is_loopback_literal(entry.host):
            scan.ignored_hosts.append(RegistryProblem(
                path, f"host {entry.host!r} is not a loopback IP literal; the bridge only talks "
                      "to 127.0.0.1/::1 and made no connection",
                entry.port, entry.pid, entry.host))
            continue
        scan.entries.append(entry)
    if read < len(ordered) or listing_cut:
        total = f"at least {len(names)}" if listing_cut else str(len(names))
        why = (f"the first {max_files} files" if read >= max_files
               else f"what could be read in {int(time_budget_s * 1000)} ms")
        scan.cut_short = True
        scan.note = (f"the list was cut short: the registry directory holds {total} entry files and "
                     f"only {read} were read ({why}; files named after a running process first). "
                     "Is something writing entries in a loop? Remove the files that are not entries")
        scan.problems.append(RegistryProblem(
            directory, f"holds {total} entry files; read {read} of them ({why}, files named after a "
                       "running process first): the list of instances may be incomplete"))
    return scan


# --------------------------------------------------------------------------- liveness and pruning

def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts; pid reuse cannot be
    ruled out from here, which is one more reason entries are only advisory)."""
    if pid <= 0:
        return False
    if _psutil is not None:
        try:
            return bool(_psutil.pid_exists(pid))
        except Exception:  # pragma: no cover - psutil internals on odd platforms
            return True
    try:  # pragma: no cover - fallback without psutil
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def prune_entry(entry: RegistryEntry) -> bool:
    """Delete a stale entry's file, but only if it still says what it said when read
    (same pid and port) and its pid is not alive. The caller has already verified the
    port is quiet. Returns True when the file was deleted; never raises."""
    try:
        current = load_entry(entry.path)
    except InvalidEntry as bad:
        log.debug("not pruning %s: %s", entry.path, bad.reason)
        return False
    except Exception:  # pragma: no cover - defensive: pruning must never break a listing
        log.debug("not pruning %s", entry.path, exc_info=True)
        return False
    if current.pid != entry.pid or current.port != entry.port:
        log.debug("not pruning %s: it changed since it was read", entry.path)
        return False
    if pid_alive(entry.pid):
        log.debug("not pruning %s: pid %d is alive", entry.path, entry.pid)
        return False
    try:
        os.unlink(entry.path)
    except OSError as exc:
        log.debug("could not prune %s: %s", entry.path, exc)
        return False
    return True

__all__ = ["RegistryScan", "pid_alive", "prune_entry", "read_registry"]
