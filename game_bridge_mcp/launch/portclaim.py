"""Claiming a port for a launch: its per-user lock (:mod:`.portlock`) taken, nothing bound there,
nothing answering ``/health``; a refusal says what holds it."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Callable, Collection

from ..paths import fallback_locks_dir, make_dirs
from ..wire.client import GameClient
from ..errors import BridgeError, BridgeUsageError, GameOffline, NotAGameSurface
from .portlock import PortLock, UnusableLock, holder_pid
from .declaration import LaunchDeclaration
from ..wire.transport import Opener

log = logging.getLogger(__name__)


def usable_locks_dir(primary: Path) -> Path:
    """``primary`` (created 0700 if need be), or a private fallback when it cannot be made."""
    try:
        make_dirs(primary)
        return primary
    except OSError as exc:
        fallback = fallback_locks_dir()
        log.warning("cannot use %s for port locks (%s); using %s", primary, exc, fallback)
        return fallback


def port_problem(port: int, *, opener: Opener | None = None) -> str | None:
    """None when nothing is bound to 127.0.0.1:port and nothing answers there;
    otherwise what holds it, in words."""
    bind_error: OSError | None = None
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
    except OSError as exc:
        bind_error = exc
    finally:
        probe.close()
    client = GameClient(port, opener=opener, timeout_ms=300)
    try:
        health = client.health(timeout_ms=300)
        frame = health.get("frame")
        return ("a game is already running there (GET /health answered ok"
                + (f", frame {frame}" if isinstance(frame, int) else "") + ")")
    except NotAGameSurface as exc:
        return f"something else is listening there, not a game ({exc.detail})"
    except GameOffline:
        pass
    except BridgeError as exc:  # pragma: no cover - any other answer means "taken"
        return f"something else answers there ({exc.message})"
    if bind_error is not None:
        return (f"another process has bound 127.0.0.1:{port} "
                f"({bind_error.strerror or bind_error}) and does not answer HTTP")
    return None


def claim_port(port: int | None, decl: LaunchDeclaration, *, locks_dir: Path,
               is_launched: Callable[[int], bool], opener: Opener | None = None,
               avoid: Collection[int] = ()) -> PortLock:
    """The lock on ``port`` (checked free), or on the first free port of the declared
    range, or on an OS-assigned one when the range is full (``avoid``: ports not to pick).
    Raises BridgeUsageError saying what holds a taken port. A port whose lock path holds
    something planted (a symlink, a directory, ...) is skipped and named in the lock's
    ``skipped`` notes. ``is_launched`` tells whether the caller already runs an instance
    there (for the message)."""
    locks = usable_locks_dir(locks_dir)
    skipped: list[str] = []

    def take(candidate: int) -> PortLock | None:
        try:
            return PortLock.try_acquire(locks, candidate)
        except UnusableLock as exc:
            log.warning("%s", exc)
            skipped.append(str(exc))
            return None

    if port is not None:
        try:
            lock = PortLock.try_acquire(locks, port)
        except UnusableLock as exc:
            raise BridgeUsageError(f"Port {port} cannot be claimed: its lock path {exc.path} {exc.what}. "
                                   "Remove it, or leave out 'port' and launch_instance picks a free one.",
                                   port=port, lockPath=str(exc.path)) from None
        if lock is None:
            if is_launched(port):
                raise BridgeUsageError(
                    f"Port {port} already runs an instance this bridge launched. Use it, or "
                    f"stop_instance {{\"port\": {port}}} first; leave out 'port' to get a free one.",
                    port=port)
            holder = holder_pid(locks, port)
            raise BridgeUsageError(
                f"Port {port} is taken: another game-bridge"
                + (f" (pid {holder})" if holder else "")
                + " holds the lock on it, for a game it launched or is launching there. "
                "Leave out 'port' and launch_instance picks a free one.", port=port)
        problem = port_problem(port, opener=opener)
        if problem is not None:
            lock.release()
            low, high = decl.port_range
            raise BridgeUsageError(
                f"Port {port} is taken: {problem}. Leave out 'port' and launch_instance "
                f"picks a free one from {low}-{high}.", port=port)
        return lock
    low, high = decl.port_range
    for candidate in range(low, high + 1):
        if candidate in avoid:
            continue
        lock = take(candidate)
        if lock is None:
            continue
        problem = port_problem(candidate, opener=opener)
        if problem is None:
            lock.skipped = skipped
            return lock
        log.debug("port %d skipped: %s", candidate, problem)
        lock.release()
    for _attempt in range(20):  # the declared range is full: let the OS pick
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            candidate = probe.getsockname()[1]
        if candidate in avoid:
            continue
        lock = take(candidate)
        if lock is None:
            continue
        if port_problem(candidate, opener=opener) is None:
            log.info("ports %d-%d are all taken; using OS-assigned port %d", low, high, candidate)
            lock.skipped = skipped
            return lock
        lock.release()
    raise BridgeUsageError(
        f"No free port: every port in {low}-{high} is taken and no OS-assigned port could be "
        "claimed. Stop instances you no longer need, or widen launch.portRange in "
        f"{decl.path}.")


#: What a game's output says when its port was taken before it could bind (Python, Node, Go,
#: C's strerror, Windows' Winsock).
IN_USE = ("address already in use", "eaddrinuse", "errno 98", "only one usage of each socket address")


def lost_port(error: BridgeError) -> str | None:
    """Why a failed launch looks like its game lost the port the bridge claimed for it
    (another process took it between the claim and the game's bind), or None: the game
    said the address was in use, or something outside its tree answered there."""
    fields = error.fields
    if fields.get("timedOut"):
        return None
    if fields.get("portTaken"):
        return "a process outside the launched tree answered there while the game started"
    for line in fields.get("lastOutput") or ():
        if isinstance(line, str) and any(words in line.lower() for words in IN_USE):
            return f"the game could not bind it ({line.strip()[:200]})"
    return None


def lost_notes(lost: dict[int, str], port: int) -> list[str]:
    """The launch's notes on the ports its game lost before it came up on ``port``."""
    return [f"Port {taken} was taken by another process while the game started ({why}): launched again on {port}."
            for taken, why in lost.items()]


__all__ = ["claim_port", "lost_notes", "lost_port", "port_problem", "usable_locks_dir"]
