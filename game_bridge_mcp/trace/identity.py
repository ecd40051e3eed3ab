"""A game's identity in a trace (name, version, working directory, declaration): recorded with
every call and checked before a replay; only name and version are enforced."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import BridgeError

log = logging.getLogger(__name__)

IDENTITY_TIMEOUT_MS = 1000


def declaration_identity(declaration: Any) -> dict[str, Any] | None:
    """The launch declaration as a trace records it (``None`` when there is none)."""
    if declaration is None:
        return None
    out: dict[str, Any] = {"path": str(declaration.path), "cwd": str(declaration.cwd)}
    if declaration.name:
        out["name"] = declaration.name
    if declaration.command is not None:
        out["command"] = declaration.command
    if declaration.argv is not None:
        out["argv"] = list(declaration.argv)
    return out


def _registry_cwd(bridge: Any, port: int) -> str | None:
    try:
        from ..registry.reader import read_registry
        from ..paths import registry_dir

        config = bridge.config
        scan = read_registry(registry_dir(getattr(config, "environ", None), getattr(config, "registry_dir", None)))
    except Exception:  # noqa: BLE001 - the registry is advisory; identity goes on without it
        log.debug("registry read for the trace identity failed", exc_info=True)
        return None
    for entry in scan.entries:
        if entry.port == port and entry.cwd:
            return str(entry.cwd)
    return None


def live_identity(bridge: Any, port: int, *, with_state: bool = True,
                  timeout_ms: int = IDENTITY_TIMEOUT_MS) -> dict[str, Any] | None:
    """The identity of the game on ``port`` as the bridge sees it now, or ``None`` when it
    does not answer. ``with_state`` also reads whether it is paused (one ``/state``)."""
    try:
        manifest = bridge.manifest(port, timeout_ms=timeout_ms)
    except BridgeError:
        return None
    game = manifest.game if isinstance(getattr(manifest, "game", None), Mapping) else {}
    out: dict[str, Any] = {"name": game.get("name"), "version": game.get("version")}
    cwd = None
    if port in bridge.launched_ports():
        info = bridge.launcher().info(port) or {}
        cwd = info.get("cwd")
    if cwd is None:
        cwd = _registry_cwd(bridge, port)
    out["cwd"] = cwd
    if with_state:
        try:
            state = bridge.client(port).state(timeout_ms=timeout_ms)
            out["paused"] = state.get("paused") is True if isinstance(state, Mapping) else None
        except BridgeError:
            out["paused"] = None
    out["declaration"] = declaration_identity(getattr(bridge.config, "declaration", None))
    journal = getattr(bridge.instance(port), "journal", None) if hasattr(bridge, "instance") else None
    if journal is not None and getattr(journal, "env", None):
        out["launchEnv"] = dict(journal.env)  # what its paused launch fixed (a web page's date): replay repeats it
    return out


def compare_identity(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(blocking, notes)``: what differs that needs ``--force``, and what is only worth
    saying (a different checkout, a different declaration)."""
    blocking: list[str] = []
    notes: list[str] = []
    for key, what in (("name", "game"), ("version", "version")):
        was, now = recorded.get(key), current.get(key)
        if was is not None and was != now:
            blocking.append(f"the recording was made against {what} {was!r}, this instance is {now!r}")
    was_paused, now_paused = recorded.get("paused"), current.get("paused")
    if isinstance(was_paused, bool) and isinstance(now_paused, bool) and was_paused != now_paused:
        blocking.append("the recording's game started paused and this one is running" if was_paused
                        else "the recording's game was running and this one is paused")
    was_cwd, now_cwd = recorded.get("cwd"), current.get("cwd")
    if was_cwd and now_cwd and was_cwd != now_cwd:
        notes.append(f"recorded in {was_cwd}, replayed against a game running in {now_cwd}")
    was_decl = recorded.get("declaration") or {}
    now_decl = current.get("declaration") or {}
    if isinstance(was_decl, Mapping) and isinstance(now_decl, Mapping):
        for key in ("command", "argv"):
            if was_decl.get(key) is not None and now_decl.get(key) is not None and was_decl.get(key) != now_decl.get(key):
                notes.append(f"the launch declaration's {key} differs: recorded {was_decl.get(key)!r}, "
                             f"now {now_decl.get(key)!r}")
    return blocking, notes
