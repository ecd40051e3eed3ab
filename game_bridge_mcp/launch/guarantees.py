"""What the bridge cannot guarantee on this machine (a copy running without psutil, or without
pidfds), said once on stderr by every entry point that can launch a game."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from .. import listeners
from . import procs

_lock = threading.Lock()
_warned = False


def limits() -> list[str]:
    """What the bridge cannot do here, one sentence each (empty with psutil)."""
    if procs.psutil is not None:
        return []
    held = ("; where a launch gets its own cgroup (Linux, docs/launching.md), stop_instance, shutdown "
            "and the watcher still end everything in it, and where it gets a keeper, the keeper ends "
            "what is below it when the bridge goes" if sys.platform.startswith("linux") else "")
    found: list[str] = [
        "it finds only the launched process itself, and reaches its process group only while that "
        "process runs: descendants that leave the group (setsid, a double fork), what is left once "
        "the launched process has exited (a start script that leaves the game running) and orphans "
        "re-parented to the bridge are not found, so stop_instance, shutdown and the reaper watcher "
        "(which ends what a killed bridge launched) cannot end them, and adopted orphans are not reaped"
        + held,
    ]
    has_pidfd = procs.has_pidfds()
    if not procs.identity_provable():
        found.append(
            "it cannot tell a launched process from a later one given the same pid, so the reaper "
            "watcher signals a killed bridge's game by its pid on trust" if has_pidfd else
            "it can signal no launched process (no pidfds here either): a stop asks the game to close "
            "and reports anything still running as not signalled")
    if not listeners.can_tell():
        found.append("it cannot tell which process listens on a port, so stop_instance ends a game with "
                     "signals instead of asking it to close")
    else:
        found.append("a launched game that listens from a process other than the launched one (behind a "
                     "shell or a build tool) is not asked to close: it is ended with signals")
    found.append("game-bridge-mcp check skips its checks of the listening addresses and of the registry "
                 "entry's process")
    return found


def warning() -> str | None:
    """The whole warning (None when nothing is missing)."""
    found = limits()
    if not found:
        return None
    return ("game-bridge-mcp: warning: psutil is not installed (pip install 'psutil>=5.9'), so the bridge "
            "guarantees less:\n" + "".join(f"  - {line};\n" for line in found)
            + "  what it reports is what it saw, and a stop says only what it did.\n")


def warn_once(stream: TextIO) -> bool:
    """Write :func:`warning` to ``stream`` the first time only; True when it was written."""
    global _warned
    text = warning()
    with _lock:
        if text is None or _warned:
            return False
        _warned = True
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass
    return True


__all__ = ["limits", "warn_once", "warning"]
