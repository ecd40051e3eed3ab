"""The registry writer, run inside a Python game: :func:`register_instance` writes the entry
atomically once the port is bound, and never raises into the game; standard library only."""

from __future__ import annotations

import atexit
import datetime as _dt
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..config import port_number
from ..jsonio import as_int
from ..paths import make_dirs, registry_dir, registry_refusal
from .entry import InvalidEntry, load_entry

log = logging.getLogger(__name__)

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
    """The JSON document of an entry, in docs/contract.md's field order."""
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
        if port_number(port, text=False, floats=False) is None:
            log.warning("game-bridge registry: not registering, port %r is not 1-65535", port)
            return None
        if as_int(pid, floats=False) is None or pid <= 0:
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
        for _ in range(2):  # before anything is made there, and again once it is
            refusal = registry_refusal(target_dir)
            if refusal is not None:
                log.warning("game-bridge registry: not registering. %s", refusal)
                return None
            make_dirs(target_dir)  # 0700, the home too if it is new
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

__all__ = ["Registration", "entry_document", "register_instance"]
