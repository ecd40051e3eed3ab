"""``snapshot``'s bytes on the wire (docs/contract.md): ``GET /snapshot?id=`` answers them,
``POST /snapshot`` stores them in a game and answers its id. The bytes are opaque here."""

from __future__ import annotations

import re
import urllib.parse

from ..contract import SNAPSHOT, SNAPSHOT_ID, SNAPSHOT_ID_PATTERN, SNAPSHOT_MAX_BYTES
from ..errors import BridgeUsageError, NotAGameSurface
from ..jsonio import decode_json
from .client import GameClient
from .transport import TransportError

_ID = re.compile(SNAPSHOT_ID_PATTERN)
#: The most of a game's refusal text shown.
_REASON_CHARS = 300


class NotPortable(Exception):
    """``GET /snapshot`` answered 409: the game keeps its snapshots as live copies that
    cannot leave its process (``reason``, the game's words)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def is_snapshot_id(value: object) -> bool:
    """A game's snapshot id as the contract spells it: 1 to 64 of ``[A-Za-z0-9._-]``."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def reason_of(body: bytes) -> str:
    """A refusal's reason, as text on one line (a JSON ``{"error": ...}`` body's ``error``)."""
    text = body[:4096].decode("utf-8", "replace")
    try:
        doc = decode_json(body[:65536])
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        text = doc["error"]
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return (text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "...") or "no reason given"


def max_bytes(client: GameClient) -> int:
    """The largest body the game takes (its ``/health`` ``snapshotMaxBytes``, else the contract's 64 MiB)."""
    said = client.known.snapshot_max_bytes
    return said if said is not None and said > 0 else SNAPSHOT_MAX_BYTES


def fetch(client: GameClient, snapshot_id: str, *, timeout_ms: int | None = None) -> bytes:
    """The bytes of the game's snapshot ``snapshot_id``. Raises NotPortable (409), or
    BridgeUsageError for an id the game does not know, NotAGameSurface for any other answer."""
    path = f"{SNAPSHOT}?{SNAPSHOT_ID}={urllib.parse.quote(snapshot_id, safe='')}"
    cap = max_bytes(client)
    try:
        response = client.exchange(path, timeout_ms=timeout_ms, max_bytes=cap, keep=("too-large",))
    except TransportError as exc:
        raise NotAGameSurface(client.port, f"sent a snapshot over its own snapshotMaxBytes ({cap:,} bytes): "
                              f"{exc.detail}", path=SNAPSHOT) from None
    if response.status == 200:
        return response.body
    if response.status == 409:
        raise NotPortable(reason_of(response.body))
    if response.status in (400, 404):
        raise BridgeUsageError(f"The game on port {client.port} has no snapshot {snapshot_id!r} to send "
                               f"(HTTP {response.status}: {reason_of(response.body)}).",
                               port=client.port, status=response.status)
    raise NotAGameSurface(client.port, f"answered HTTP {response.status} to GET {SNAPSHOT}", path=SNAPSHOT)


def store(client: GameClient, data: bytes, *, timeout_ms: int | None = None) -> str:
    """``POST /snapshot`` ``data``; the id the game stored it under. Raises
    BridgeUsageError with the game's reason when it refuses them (400: not its bytes,
    413: too large), NotAGameSurface for an answer the contract does not allow."""
    cap = max_bytes(client)
    if len(data) > cap:
        raise BridgeUsageError(
            f"The state is {len(data):,} bytes, over the {cap:,} the game on port {client.port} takes "
            "(its /health snapshotMaxBytes); nothing was sent.", port=client.port, bytes=len(data), status=413)
    response = client.exchange(SNAPSHOT, body=data, max_bytes=64 * 1024, timeout_ms=timeout_ms)
    if response.status in (400, 413):
        what = "too large" if response.status == 413 else "not bytes it can load"
        raise BridgeUsageError(
            f"The game on port {client.port} refused the state's bytes as {what} (HTTP {response.status}: "
            f"{reason_of(response.body)}); nothing was loaded and the game is as it was.",
            port=client.port, status=response.status)
    if response.status != 200:
        raise NotAGameSurface(client.port, f"answered HTTP {response.status} to POST {SNAPSHOT}", path=SNAPSHOT)
    try:
        doc = decode_json(response.body)
    except ValueError as exc:
        raise NotAGameSurface(client.port, f"answered POST {SNAPSHOT} with a body that {exc}", path=SNAPSHOT) from None
    stored = doc.get("id") if isinstance(doc, dict) else None
    if not is_snapshot_id(stored):
        raise NotAGameSurface(client.port, f"answered POST {SNAPSHOT} without an id of 1-64 [A-Za-z0-9._-]",
                              path=SNAPSHOT)
    assert isinstance(stored, str)
    return stored


__all__ = ["NotPortable", "fetch", "is_snapshot_id", "max_bytes", "reason_of", "store"]
