"""Ports that find the agent's instance: the one it launched when no port is given, the live
ones named when a port is offline, a launched game's exit, and the declaration's scan range."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Callable

from .. import polling
from ..config import Config
from ..errors import START_ONE_WITH, BridgeUsageError, GameOffline
from ..launch.declaration import declaration_of
from ..manifest.sanitise import one_line
from ..paths import registry_dir
from ..registry import pid_alive, read_registry

#: At most this many known instances are named in a GameOffline.
MAX_NAMED = 10
#: A declared portRange is scanned by list_instances up to this many ports.
MAX_DECLARED_SCAN = 256
#: Reading the registry on an error may take at most this long.
REGISTRY_BUDGET_S = 0.25


def port_is_configured(config: Config) -> bool:
    """Whether ``--port`` or ``GAME_BRIDGE_PORT`` names the default port."""
    return config.port is not None or bool(config.environ.get("GAME_BRIDGE_PORT", "").strip())


def implied_port(config: Config, launched: Sequence[int]) -> int | None:
    """The port for a call that names none when neither ``--port`` nor ``GAME_BRIDGE_PORT``
    is set: the one instance this bridge launched (None: use the usual default). Several
    launched instances are a BridgeUsageError naming them."""
    if port_is_configured(config) or not launched:
        return None
    if len(launched) == 1:
        return launched[0]
    ports = ", ".join(str(p) for p in sorted(launched))
    raise BridgeUsageError(f"This bridge launched {len(launched)} instances (ports {ports}) and the call names no "
                           "port: say which one with port.", launched=sorted(launched))


def known_instances(config: Config, launched: Sequence[int], answered: Sequence[int], *,
                    exclude: int) -> list[dict[str, Any]]:
    """The live instances this bridge knows of, other than ``exclude``: its launches, the
    ports that answered it, and registry entries whose process runs (advisory, as always)."""
    found: dict[int, dict[str, Any]] = {}
    for port in launched:
        found.setdefault(port, {"port": port, "how": "launched by this bridge"})
    for port in answered:
        found.setdefault(port, {"port": port, "how": "answered this bridge"})
    if config.registry:
        scan = read_registry(registry_dir(config.environ, config.registry_dir), time_budget_s=REGISTRY_BUDGET_S)
        for entry in scan.entries:
            if entry.host not in ("127.0.0.1", "localhost", "::1") or not pid_alive(entry.pid):
                continue
            label = one_line(" ".join(str(x) for x in (entry.name, entry.version) if x), 80)
            record = found.setdefault(entry.port, {"port": entry.port, "how": "in the registry"})
            if label:
                record.setdefault("game", label)
    found.pop(exclude, None)
    return [found[port] for port in sorted(found)][:MAX_NAMED]


def with_launch_advice(exc: GameOffline, config: Config) -> GameOffline:
    """``exc``, where it says how to start a game from the launch declaration's command,
    pointing first to ``launch_instance``, which picks a free port of the declared range
    (a port named by hand, like the default 7777, may lie outside it); left as it was with
    an explicit ``--launch-hint`` or no declaration."""
    declaration = declaration_of(config)
    if declaration is None or config.launch_hint or START_ONE_WITH not in exc.message:
        return exc
    low, high = declaration.port_range
    ports = f"port {low}" if low == high else f"port of {low}-{high}"
    exc.message = exc.message.replace(START_ONE_WITH, (
        f"\nStart one with launch_instance, which picks a free {ports} ({declaration.path.name}'s "
        "portRange); or by hand on this port:\n  "), 1)
    exc.args = (exc.message,)
    return exc


def with_known_instances(exc: GameOffline, known: Callable[[], list[dict[str, Any]]]) -> GameOffline:
    """``exc``, its message extended with the live instances the bridge knows of (left as
    it was when there are none, or when the game is only frozen: cause ``timeout``)."""
    if exc.cause == "timeout" or "liveInstances" in exc.fields:
        return exc
    others = known()
    if not others:
        return exc
    named = ", ".join(f"{o['port']} ({o['how']}{': ' + o['game'] if o.get('game') else ''})" for o in others)
    exc.message = f"{exc.message}\nLive instances this bridge knows of: {named}. If you meant one of them, pass its port."
    exc.args = (exc.message,)
    exc.fields["liveInstances"] = [o["port"] for o in others]
    return exc


#: How long a launched game whose port went away is given to finish exiting, and how
#: many of its last output lines an error quotes.
EXIT_WAIT_S = 1.0
EXIT_LINES = 10


def with_exit(exc: GameOffline, log: Callable[[], dict[str, Any]]) -> GameOffline:
    """``exc`` about a port this bridge launched, said as what happened when the game's
    process has exited (``log()`` is the launcher's ``instance_log`` of it): its exit
    code and its last lines of output, instead of a generic nothing-answers. Left as it
    was while the process still runs (frozen, or a port that only hiccupped)."""
    if exc.cause == "timeout" or "exitCode" in exc.fields:
        return exc
    deadline = time.monotonic() + EXIT_WAIT_S
    while True:
        tail = log()
        if not tail.get("running", True) or time.monotonic() >= deadline:
            break
        polling.sleep(0.02)
    if tail.get("running", True):
        return exc
    code = tail.get("exitCode")
    how = (f"was killed by {tail['signal']}" if tail.get("signal")
           else f"exited with code {code}" if code is not None else "exited (its exit status was lost)")
    lines = [str(line) for line in (tail.get("lines") or [])][-EXIT_LINES:]
    shown = ("Its last output (" + str(tail.get("logFile")) + "):\n  " + "\n  ".join(lines)) if lines else (
        "It wrote no output.")
    message = (f"The game on port {exc.port}, launched by this bridge, {how}: it is no longer running, so "
               f"the call could not be answered. {shown}\nIf the last call made it exit, that is the game's "
               "answer to it; launch_instance starts it again.")
    out = GameOffline(exc.port, message=message, cause=exc.cause, endpoint=exc.endpoint, detail=exc.detail)
    out.fields.update({k: v for k, v in exc.fields.items() if k not in out.fields})
    out.fields.update({"exitCode": code, "lastLines": lines})
    return out


def declared_scan_ports(config: Config) -> tuple[int, ...]:
    """The declaration's ``portRange`` (where launches land), for list_instances to scan."""
    declaration = declaration_of(config)
    if declaration is None:
        return ()
    low, high = declaration.port_range
    return tuple(range(low, min(high, low + MAX_DECLARED_SCAN - 1) + 1))
