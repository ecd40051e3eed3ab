"""The instance registry: one small JSON file per running game, read and written here.

A game that has bound its debug port writes ``<dir>/<pid>.json`` naming itself, so a
bridge can find it without guessing ports. The file is *advertising*, never truth: a
crash or a force-kill leaves it behind, a hostile or confused process may write
anything into it, and a game still binding its port looks exactly like a dead one.

So this module does two small, careful things and nothing else:

* **Reading** (:func:`read_registry`) turns the directory into typed
  :class:`RegistryEntry` values plus a :class:`RegistryProblem` for every file that
  could not be used, with the reason. It never connects anywhere, never deletes
  anything and never raises for bad input: verifying entries against the live port is
  :mod:`game_bridge_mcp.discovery`'s job.
* **Writing** (:func:`register_instance`) is for games written in Python: call it
  after the port is bound; it writes atomically (a temporary file, then ``os.replace``)
  and never raises into the game, because an unwritable home must not stop a game.

Standard library plus psutil only: game kits vendor this module.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import errno
import ipaddress
import json
import logging
import os
import re
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

try:  # psutil is a dependency of the bridge, but a vendored copy must not need it.
    import psutil as _psutil
except ImportError:  # pragma: no cover - exercised only where psutil is missing
    _psutil = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

#: Environment variable naming the entries directory itself.
ENV_INSTANCES = "GAME_BRIDGE_INSTANCES"
#: Environment variable naming its parent (``$GAME_BRIDGE_HOME/instances``).
ENV_HOME = "GAME_BRIDGE_HOME"
#: Name of the entries directory under the home directory.
INSTANCES_DIRNAME = "instances"
#: The default home directory, under the user's home.
DEFAULT_HOME_DIRNAME = ".game-bridge"

#: Reader limits: a registry is a handful of tiny files; anything beyond is hostile.
DEFAULT_MAX_FILES = 500
DEFAULT_MAX_BYTES = 64 * 1024
#: Longest string field kept from an entry (a cwd can be long; a megabyte cannot).
MAX_FIELD_CHARS = 4096

_ENTRY_NAME = re.compile(r"^([0-9]{1,10})\.json$")


# --------------------------------------------------------------------------- paths

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


# --------------------------------------------------------------------------- values

@dataclass(frozen=True)
class RegistryEntry:
    """One validated registry file. ``name``/``version`` are the game's claim, used only
    when the live ``/tools`` says nothing; ``pid``/``cwd``/``started`` are what the wire
    cannot say."""

    path: Path
    port: int
    pid: int
    host: str = "127.0.0.1"
    name: str | None = None
    version: str | None = None
    protocol: int | None = None
    started: str | None = None
    cwd: str | None = None


@dataclass(frozen=True)
class RegistryProblem:
    """A file in the registry that was not used, and why (``port``/``pid``/``host``
    when the file got far enough to say)."""

    path: Path
    reason: str
    port: int | None = None
    pid: int | None = None
    host: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": str(self.path), "reason": self.reason}
        for key in ("port", "pid", "host"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass
class RegistryScan:
    """What :func:`read_registry` found: usable entries, unusable files with reasons,
    entries skipped because their host is not a loopback address, and a note when the
    directory itself could not be read (missing is normal, not an error)."""

    directory: Path
    entries: list[RegistryEntry] = field(default_factory=list)
    problems: list[RegistryProblem] = field(default_factory=list)
    ignored_hosts: list[RegistryProblem] = field(default_factory=list)
    note: str | None = None


class InvalidEntry(ValueError):
    """A registry file that cannot be used: ``reason`` plus whatever it managed to say."""

    def __init__(self, reason: str, *, port: int | None = None, pid: int | None = None,
                 host: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.port = port
        self.pid = pid
        self.host = host


# --------------------------------------------------------------------------- reading

def is_loopback_literal(host: str) -> bool:
    """True only for an IP *literal* on loopback (``127.0.0.1``, ``::1``, ``[::1]``).

    ``localhost`` is refused on purpose (a name resolves through whatever the machine
    is configured to do), as are integer and hex forms such as ``2130706433``.
    """
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _optional_str(doc: Mapping[str, Any], key: str, port: int, pid: int) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidEntry(f"field '{key}' must be a string, not {_describe(value)}", port=port, pid=pid)
    if len(value) > MAX_FIELD_CHARS:
        raise InvalidEntry(f"field '{key}' is longer than {MAX_FIELD_CHARS} characters", port=port, pid=pid)
    return value


def parse_entry(path: Path, doc: Any) -> RegistryEntry:
    """Validate one decoded registry document (pure; raises :class:`InvalidEntry`
    with a reason). ``port`` and ``pid`` are required; the other spec
    fields are optional but must have the right type when present; unknown fields are
    ignored, so writers can add to the format."""
    if not isinstance(doc, dict):
        raise InvalidEntry(f"is not a JSON object (it is a JSON {type(doc).__name__})")
    port = doc.get("port")
    pid = doc.get("pid")
    known_port = port if _is_int(port) else None
    known_pid = pid if _is_int(pid) else None
    if port is None:
        raise InvalidEntry("field 'port' is missing", pid=known_pid)
    if not _is_int(port) or not 1 <= port <= 65535:
        raise InvalidEntry(f"field 'port' must be an integer 1-65535, not {_describe(port)}", pid=known_pid)
    if pid is None:
        raise InvalidEntry("field 'pid' is missing", port=known_port)
    if not _is_int(pid) or pid <= 0:
        raise InvalidEntry(f"field 'pid' must be a positive integer, not {_describe(pid)}", port=port)
    match = _ENTRY_NAME.match(path.name)
    if match is None:
        raise InvalidEntry(f"file name '{path.name}' is not '<pid>.json' (expected '{pid}.json')",
                       port=port, pid=pid)
    if int(match.group(1)) != pid:
        raise InvalidEntry(f"file name '{path.name}' disagrees with its pid {pid} "
                       f"(expected '{pid}.json')", port=port, pid=pid)
    protocol = doc.get("protocol")
    if protocol is not None and (not _is_int(protocol) or protocol < 1):
        raise InvalidEntry(f"field 'protocol' must be a positive integer, not {_describe(protocol)}",
                       port=port, pid=pid)
    host = doc.get("host", "127.0.0.1")
    if not isinstance(host, str):
        raise InvalidEntry(f"field 'host' must be a string, not {_describe(host)}", port=port, pid=pid)
    if len(host) > 255:
        raise InvalidEntry("field 'host' is longer than 255 characters", port=port, pid=pid)
    return RegistryEntry(
        path=path, port=port, pid=pid, host=host,
        name=_optional_str(doc, "name", port, pid),
        version=_optional_str(doc, "version", port, pid),
        protocol=protocol,
        started=_optional_str(doc, "started", port, pid),
        cwd=_optional_str(doc, "cwd", port, pid),
    )


def _read_file(path: Path, max_bytes: int) -> bytes:
    """Read one candidate without following symlinks, without blocking on a FIFO, and
    without reading more than ``max_bytes``."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise InvalidEntry(f"cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise InvalidEntry(f"is a symbolic link (to {target!r}); entries must be regular files")
    if not stat.S_ISREG(info.st_mode):
        raise InvalidEntry("is not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidEntry("is a symbolic link; entries must be regular files") from None
        raise InvalidEntry(f"cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped between lstat and open
            raise InvalidEntry("is not a regular file")
        if info.st_size > max_bytes:
            raise InvalidEntry(f"is {info.st_size} bytes, over the {max_bytes}-byte limit for an entry")
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise InvalidEntry(f"grew past the {max_bytes}-byte limit for an entry while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise InvalidEntry(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _reject_constant(name: str) -> Any:
    raise InvalidEntry(f"is not valid JSON (it uses {name}, which JSON does not allow)")


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise InvalidEntry("is not UTF-8 text") from None
    except RecursionError:
        raise InvalidEntry("is nested too deeply to parse") from None
    except json.JSONDecodeError as exc:
        if not body.strip():
            raise InvalidEntry("is empty (a writer that died mid-write, or not an entry)") from None
        raise InvalidEntry(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def load_entry(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> RegistryEntry:
    """Read and validate one file; raises :class:`InvalidEntry` when it is unusable."""
    return parse_entry(path, _decode(_read_file(path, max_bytes)))


def read_registry(directory: Path, *, max_files: int = DEFAULT_MAX_FILES,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> RegistryScan:
    """Read every ``*.json`` entry in ``directory``; never raises for what is found there.

    Hidden files (the writer's temporaries start with a dot) and other names are
    skipped silently. A missing or unreadable directory gives an empty scan with a
    ``note``. Each unusable file becomes a problem with a reason; an entry whose
    ``host`` is not a loopback IP literal lands in ``ignored_hosts``, so nothing is
    ever contacted on its say-so.
    """
    directory = Path(directory)
    scan = RegistryScan(directory=directory)
    try:
        with os.scandir(directory) as it:
            names = sorted(e.name for e in it
                           if e.name.endswith(".json") and not e.name.startswith("."))
    except FileNotFoundError:
        scan.note = "the registry directory does not exist (no instance has registered yet)"
        return scan
    except NotADirectoryError:
        scan.note = "the registry path is not a directory"
        return scan
    except OSError as exc:
        scan.note = f"the registry directory cannot be read ({exc.strerror or exc})"
        return scan
    if len(names) > max_files:
        scan.problems.append(RegistryProblem(
            directory, f"holds {len(names)} entry files; read only the first {max_files} "
                       "(is something writing entries in a loop?)"))
        names = names[:max_files]
    for name in names:
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


# --------------------------------------------------------------------------- writing

def _now_iso() -> str:
    now = _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


class Registration:
    """A written entry. :meth:`remove` deletes it on clean shutdown (also run at exit
    unless disabled); a process that dies hard leaves it behind, which readers expect."""

    def __init__(self, path: Path, pid: int, port: int, *, remove_at_exit: bool) -> None:
        self.path = path
        self.pid = pid
        self.port = port
        self._lock = threading.Lock()
        self._removed = False
        self._at_exit = remove_at_exit
        if remove_at_exit:
            atexit.register(self._remove_at_exit)

    @property
    def removed(self) -> bool:
        return self._removed

    def _remove_at_exit(self) -> None:
        if os.getpid() == self.pid:  # a forked child must not remove its parent's entry
            self.remove()

    def remove(self) -> bool:
        """Delete the file if it is still ours (it names our pid). Idempotent; never
        raises. Returns True if this call deleted it."""
        with self._lock:
            if self._removed:
                return False
            self._removed = True
            if self._at_exit:
                try:
                    atexit.unregister(self._remove_at_exit)
                except Exception:  # pragma: no cover
                    pass
        try:
            try:
                current = load_entry(self.path)
            except InvalidEntry:
                current = None
            if current is None or current.pid != self.pid:
                log.debug("registry entry %s is no longer ours; left in place", self.path)
                return False
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False
        except Exception as exc:  # never raise into the game
            log.debug("could not remove registry entry %s: %s", self.path, exc)
            return False

    def __enter__(self) -> "Registration":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"Registration(path={str(self.path)!r}, pid={self.pid}, port={self.port})"


def entry_document(*, port: int, name: str, version: str, protocol: int = 1,
                   host: str = "127.0.0.1", pid: int, started: str | None = None,
                   cwd: str | None = None) -> dict[str, Any]:
    """The JSON document of an entry, in the spec's field order."""
    doc: dict[str, Any] = {"name": name, "version": version, "protocol": protocol,
                           "port": port, "pid": pid, "host": host,
                           "started": started or _now_iso()}
    if cwd is not None:
        doc["cwd"] = cwd
    return doc


def register_instance(*, port: int, name: str, version: str, protocol: int = 1,
                      host: str = "127.0.0.1", environ: Mapping[str, str] | None = None,
                      pid: int | None = None, cwd: str | None = None,
                      directory: str | Path | None = None,
                      remove_at_exit: bool = True) -> Registration | None:
    """Advertise a running game: write ``<dir>/<pid>.json``. Call only after the debug
    port is bound.

    The directory honours ``GAME_BRIDGE_INSTANCES`` / ``GAME_BRIDGE_HOME`` (or
    ``directory``) and is created with mode 0700. The write is atomic: readers see the
    old file, the new file, or none, never half of one. This never raises: any failure
    (bad arguments, an unwritable or read-only directory) is logged and gives ``None``,
    because the game must start whether or not it can advertise itself.
    """
    try:
        pid = os.getpid() if pid is None else pid
        if not _is_int(port) or not 1 <= port <= 65535:
            log.warning("game-bridge registry: not registering, port %r is not 1-65535", port)
            return None
        if not _is_int(pid) or pid <= 0:
            log.warning("game-bridge registry: not registering, pid %r is not a positive integer", pid)
            return None
        if cwd is None:
            try:
                cwd = os.getcwd()
            except OSError:
                cwd = None
        target_dir = registry_dir(environ, directory)
        doc = entry_document(port=port, name=str(name), version=str(version),
                             protocol=protocol, host=str(host), pid=pid, cwd=cwd)
        body = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        target_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = target_dir / f"{pid}.json"
        fd, tmp_name = tempfile.mkstemp(prefix=f".{pid}.", suffix=".tmp", dir=target_dir)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
            os.replace(tmp_name, path)
        except BaseException:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass
            raise
    except Exception as exc:  # never raise into the game: this is advertising
        log.warning("game-bridge registry: could not write the instance entry (%s); "
                    "the game runs normally but discovery will rely on port scanning", exc)
        return None
    log.debug("game-bridge registry: wrote %s", path)
    return Registration(path, pid, port, remove_at_exit=remove_at_exit)


__all__ = [
    "ENV_HOME", "ENV_INSTANCES", "InvalidEntry", "Registration", "RegistryEntry", "RegistryProblem",
    "RegistryScan", "entry_document", "is_loopback_literal", "load_entry", "parse_entry",
    "pid_alive", "prune_entry", "read_registry", "register_instance", "registry_dir",
    "registry_home",
]
