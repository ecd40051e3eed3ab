"""Probing: what one ``host:port`` says (:func:`probe_port`, never raising), and which of many
ports anything listens on (:func:`connect_sweep`, non-blocking connects under one deadline).
The screen is read from ``/health`` when a game publishes it there, else from ``/state``
under a 1 MiB cap, so listing never pays for a huge state."""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ..wire.client import GameClient
from ..errors import BridgeError, GameOffline, NotAGameSurface
from ..jsonio import as_int
from ..manifest.choose import ManifestFile, choose_manifest
from ..manifest.reader import Manifest, fallback_manifest, sanitise_text
from ..wire.transport import Opener

log = logging.getLogger(__name__)

#: Default deadline for one ``/health`` probe.
DEFAULT_PROBE_TIMEOUT_MS = 300
#: ``/tools`` gets at least this long: identity matters more than a fast listing.
MIN_TOOLS_TIMEOUT_MS = 1000
#: ``/state`` larger than this is not parsed just to read ``ui.screen``.
STATE_SCREEN_MAX_BYTES = 1024 * 1024
#: Sockets open at once in the connect sweep (keeps a 4096-port range under fd limits).
CONNECT_BATCH = 256
#: Cap on the screen text copied from a game into the report.
SCREEN_LIMIT = 120

DEFAULT_HOST = "127.0.0.1"

#: The longest a listing waits for one instance's /tools through a KnownInstances cache:
#: one hung /tools must not hold the whole report for --timeout.
KNOWN_MANIFEST_TIMEOUT_MS = 1000


class KnownInstances(Protocol):
    """What a caller that keeps per-port knowledge (the Bridge) lends discovery: its own
    client for a port, so the port's one owner sees every answer a probe gets (and notices
    a restart), and its manifest cache."""

    def client(self, port: int) -> GameClient: ...

    def manifest(self, port: int, *, refresh: bool = False, timeout_ms: int | None = None) -> Manifest: ...


# --------------------------------------------------------------------------- one port over HTTP

@dataclass
class Probe:
    """What one ``host:port`` said. ``kind`` is ``live``, ``not-a-game``, ``refused``
    (nothing listening) or ``unresponsive`` (accepted but no usable answer in time)."""

    kind: str
    reason: str = ""
    frame: int | None = None
    screen: str | None = None
    manifest: Manifest | None = None
    manifest_problem: str | None = None



def short_text(value: Any, limit: int) -> str | None:
    """A game-supplied string, sanitised and cut to ``limit``; None when it is not a string or empty."""
    if not isinstance(value, str):
        return None
    text = sanitise_text(value, limit)
    return text or None


def probe_port(host: str, port: int, *, opener: Opener, timeout_ms: int,
               details: bool = True, known: KnownInstances | None = None,
               manifest_file: ManifestFile | None = None) -> Probe:
    """Probe one port: ``/health`` under ``timeout_ms``; for a live game also its
    screen and manifest (from ``known`` when it is given, for loopback ports). Never raises."""
    use_known = known is not None and host == DEFAULT_HOST
    try:
        client = known.client(port) if known is not None and use_known else \
            GameClient(port, host=host, timeout_ms=timeout_ms, opener=opener)
        health = client.health(timeout_ms=timeout_ms)
    except GameOffline as exc:
        if exc.cause == "refused":
            return Probe("refused", "nothing is listening")
        if exc.cause == "timeout":
            return Probe("unresponsive", f"accepted a connection but did not answer GET /health "
                                         f"within {timeout_ms}ms")
        return Probe("unresponsive", f"the connection broke during GET /health ({exc.detail})")
    except NotAGameSurface as exc:
        return Probe("not-a-game", exc.detail)
    except Exception as exc:  # a probe never breaks a listing
        log.debug("probe of %s:%d failed", host, port, exc_info=True)
        return Probe("unresponsive", f"the probe failed ({type(exc).__name__}: {exc})"[:300])
    result = Probe("live", frame=as_int(health.get("frame")))
    if not details:
        return result
    result.screen = short_text(health.get("screen"), SCREEN_LIMIT)
    if result.screen is None:
        result.screen = _screen_from_state(client, timeout_ms)
    try:
        if known is not None and use_known:
            result.manifest = known.manifest(port, timeout_ms=KNOWN_MANIFEST_TIMEOUT_MS)
        else:
            result.manifest, result.manifest_problem = choose_manifest(
                client, timeout_ms=max(timeout_ms, MIN_TOOLS_TIMEOUT_MS), manifest_file=manifest_file,
                verify=False, strict_file=False)
    except Exception as exc:
        reason = exc.message.splitlines()[0] if isinstance(exc, BridgeError) else f"{type(exc).__name__}: {exc}"
        log.debug("manifest for port %d failed", port, exc_info=True)
        result.manifest = fallback_manifest(reason=f"the manifest could not be read: {reason}"[:300])
        result.manifest_problem = reason[:300]
    return result


def _screen_from_state(client: GameClient, timeout_ms: int) -> str | None:
    try:
        state = client.state(timeout_ms=timeout_ms, max_bytes=STATE_SCREEN_MAX_BYTES)
    except BridgeError as exc:
        log.debug("no screen for port %d: %s", client.port, exc.message.splitlines()[0])
        return None
    ui = state.get("ui")
    return short_text(ui.get("screen"), SCREEN_LIMIT) if isinstance(ui, dict) else None


# --------------------------------------------------------------------------- the connect sweep

_IN_PROGRESS = {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY,
                getattr(errno, "WSAEWOULDBLOCK", errno.EWOULDBLOCK)}


def connect_sweep(addresses: list[tuple[str, int]], timeout_s: float) -> list[str]:
    """Non-blocking connects to every ``(host, port)`` at once, from this thread, under
    one deadline: ``refused``, ``open`` (something accepted), ``pending`` (no answer to
    the connect within the deadline) or ``error`` (let the HTTP probe decide).

    Why: most scanned ports have nothing on them, and a thread per port costs more
    than the probe (64 threads on two CPUs took three times as long as probing the same
    ports one by one). The sweep settles every quiet port in a few milliseconds without
    a thread or an HTTP request; only ports where something listens get an HTTP probe.
    """
    results = ["error"] * len(addresses)
    for start in range(0, len(addresses), CONNECT_BATCH):
        pending: dict[int, socket.socket] = {}
        selector = selectors.DefaultSelector()
        try:
            for index in range(start, min(start + CONNECT_BATCH, len(addresses))):
                host, port = addresses[index]
                try:
                    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                         socket.SOCK_STREAM)
                except OSError:
                    continue
                sock.setblocking(False)
                code = sock.connect_ex((host, port))
                if code in _IN_PROGRESS:
                    pending[index] = sock
                    selector.register(sock, selectors.EVENT_WRITE, index)
                    continue
                results[index] = ("open" if code == 0 else
                                  "refused" if code == errno.ECONNREFUSED else "error")
                sock.close()
            deadline = time.monotonic() + timeout_s
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                for key, _events in selector.select(remaining):
                    index = key.data
                    sock = pending.pop(index)
                    selector.unregister(sock)
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    results[index] = ("open" if code == 0 else
                                      "refused" if code == errno.ECONNREFUSED else "error")
                    sock.close()
            for index in pending:
                results[index] = "pending"
        finally:
            for sock in pending.values():
                sock.close()
            selector.close()
    return results

__all__ = ["CONNECT_BATCH", "DEFAULT_HOST", "DEFAULT_PROBE_TIMEOUT_MS", "KnownInstances",
           "Probe", "connect_sweep", "probe_port"]
