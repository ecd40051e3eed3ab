"""One registry entry: where entry files live, what a valid one says, and reading one without
trusting it; shared by the reader and the writer, standard library only."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..config import port_number
from ..jsonio import FileProblem, as_int, decode_json, read_capped

#: Largest entry file read: an entry is a few hundred bytes; anything beyond is hostile.
DEFAULT_MAX_BYTES = 64 * 1024
#: Longest string field kept from an entry (a cwd can be long; a megabyte cannot).
MAX_FIELD_CHARS = 4096

_ENTRY_NAME = re.compile(r"^([0-9]{1,10})\.json$")


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


class InvalidEntry(ValueError):
    """A registry file that cannot be used: ``reason`` plus whatever it managed to say."""

    def __init__(self, reason: str, *, port: int | None = None, pid: int | None = None,
                 host: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.port = port
        self.pid = pid
        self.host = host



# --------------------------------------------------------------------------- one file

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
    return as_int(value, floats=False) is not None


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
    if port_number(port, text=False, floats=False) is None:
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
        return read_capped(path, max_bytes, follow_symlinks=False, regular_only=True)
    except FileProblem as exc:
        suffix = {"symlink": "; entries must be regular files", "too-large": " for an entry"}
        raise InvalidEntry(str(exc) + suffix.get(exc.kind, "")) from None


def _decode(body: bytes) -> Any:
    if not body.strip():
        raise InvalidEntry("is empty (a writer that died mid-write, or not an entry)")
    try:
        return decode_json(body, strict=True)
    except ValueError as exc:
        raise InvalidEntry(str(exc)) from None


def load_entry(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> RegistryEntry:
    """Read and validate one file; raises :class:`InvalidEntry` when it is unusable."""
    return parse_entry(path, _decode(_read_file(path, max_bytes)))

__all__ = ["DEFAULT_MAX_BYTES", "InvalidEntry", "MAX_FIELD_CHARS", "RegistryEntry", "RegistryProblem",
           "is_loopback_literal", "load_entry", "parse_entry"]
