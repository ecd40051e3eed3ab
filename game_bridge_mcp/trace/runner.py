"""One replay, start to finish, for ``replay`` and the pytest plugin alike: the instances
(launched from the project's own declaration, never from the trace), the identity check, the
engine, the cleanup."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable, Iterable

from ..config import Config, check_port
from ..core.bridge import Bridge
from ..core.digest import summarise
from ..core.tools.instances import instance_log
from ..core.tools.state import get_health
from ..core.tools.table import tool_def
from ..errors import BridgeError, BridgeUsageError
from ..polling import ProgressFn
from .compare import IgnoreRules
from .identity import compare_identity, live_identity
from .reader import Trace, read_trace
from .replay import ReplayResult, replay
from .report import write_report
from .update import write_updated

Say = Callable[[str], None]


@dataclass
class Replayed:
    """What a replay produced: the result, and the replayed instances' identity by port."""

    result: ReplayResult
    identities: dict[int, dict[str, Any]] = field(default_factory=dict)
    report: Path | None = None
    updated: Path | None = None


def _check_where(trace: Trace, ports: Sequence[Any], launch: bool) -> list[int]:
    recorded = trace.ports()
    if not recorded:
        raise BridgeUsageError(f"The trace {trace.path} has no calls that act on a game (call_tool), so there "
                               "is nothing to replay. Record a session that drives a game.")
    if bool(ports) == bool(launch):
        raise BridgeUsageError("replay needs where to replay: --port N (a running game) or --launch "
                               "(start one from gamebridge.json), not both.")
    if ports and len(ports) != len(recorded):
        raise BridgeUsageError(
            f"The recording drove {len(recorded)} port(s) ({', '.join(map(str, recorded))}); give "
            "--port once for each, in that order, or use --launch.")
    return recorded


def _launch(bridge: Bridge, trace: Trace, recorded: Iterable[int], say: Say,
            progress: ProgressFn | None = None) -> dict[int, int]:
    if bridge.config.declaration is None:
        if bridge.config.declaration_error is not None:
            raise bridge.config.declaration_error
        raise BridgeUsageError("Replaying with --launch needs a gamebridge.json: none was found in this "
                               "directory or above it. Name one with --config, or replay against a running "
                               "game with --port N.")
    launch = tool_def("launch_instance")
    can_pause = launch is not None and "paused" in (launch.input_schema.get("properties") or {})
    ports: dict[int, int] = {}
    for port in recorded:
        paused = trace.started_paused(port)
        # Without launch_instance {paused}, a declaration that sets GAME_BRIDGE_START_PAUSED
        # still starts it paused; the identity check below says so when it does not.
        args = {"paused": True} if paused and can_pause else {}
        started = bridge.run_tool("launch_instance", args, progress=progress)
        ports[port] = int(started["port"])
        say(f"Launched {started.get('name') or 'the game'} on port {ports[port]}"
            f"{' paused' if paused else ''} (recorded on {port})")
    return ports


def _last_output(bridge: Bridge, port: int | None) -> str | None:
    """A launched game that died: its last output is the answer to why."""
    if port is None or port not in bridge.launched_ports():
        return None
    try:
        tail = instance_log(bridge, port=port, lines=15)
    except BridgeError:
        return None
    lines = tail.get("lines") if isinstance(tail, dict) else None
    if not isinstance(lines, list) or not lines:
        return None
    return (f"the game's last output (log {tail.get('logFile')}):\n    "
            + "\n    ".join(str(x) for x in lines[-15:]))


def with_launch_env(config: Config, trace: Trace, recorded: Iterable[int]) -> Config:
    """``config`` with what the recording's paused launches fixed in their environment (the
    first recorded port's; only what a launch may repeat): the launcher passes it on."""
    from dataclasses import replace

    from ..core.states.journal import repeatable_env

    for port in recorded:
        fixed = trace.identity(port).get("launchEnv")
        env = repeatable_env(fixed) if isinstance(fixed, dict) else {}
        if env:
            return replace(config, environ={**config.environ, **env})
    return config


def replay_file(path: str | Path, config: Config, *, ports: Sequence[Any] = (), launch: bool = False,
                ignore: Iterable[str] = (), force: bool = False, update: bool = False,
                report: str | Path | None = None, say: Say | None = None,
                bridge: Bridge | None = None, progress: ProgressFn | None = None) -> Replayed:
    """Replay the trace at ``path``. Raises BridgeError for what stops a replay before it
    starts (a broken trace, no instance, a different game without ``force``). ``progress``
    hears how each ``--launch`` boot goes."""
    say = say or (lambda _text: None)
    trace = read_trace(path)
    recorded = _check_where(trace, ports, launch)
    own = bridge is None
    if own and launch:  # what the recorded paused launches fixed (a web page's date), launched alike
        config = with_launch_env(config, trace, recorded)
    bridge = bridge or Bridge(config)
    try:
        if launch:
            mapping = _launch(bridge, trace, recorded, say, progress)
        else:
            mapping = {was: check_port(now, what="--port") for was, now in zip(recorded, ports)}
        notes: list[str] = []
        identities: dict[int, dict[str, Any]] = {}
        for was, now in mapping.items():
            current = live_identity(bridge, now)
            if current is None:
                get_health(bridge, port=now)  # raises the GameOffline / NotAGameSurface that says why
                raise BridgeUsageError(f"The game on port {now} answers /health but not /tools, so it "
                                       "cannot be told apart from another game.", port=now)
            identities[now] = current
            blocking, soft = compare_identity(trace.identity(was), current)
            if blocking and not force:
                raise BridgeUsageError(
                    f"Not replaying {trace.path.name} against port {now}: " + "; ".join(blocking)
                    + ". Replay against the game it was recorded with, or pass --force to replay anyway.",
                    port=now, differences=blocking)
            notes += [f"replaying anyway (--force): {b}" for b in blocking] + soft
        paused = all(trace.started_paused(p) for p in recorded)
        rules = IgnoreRules.defaults(paused=paused, extra=ignore)
        result = replay(trace, lambda name, args, port, options: bridge.run_tool(
                            "call_tool", {**options, "name": name, "arguments": args, "port": port}),
                        mapping, rules=rules, summarise=summarise, keep_going=update,
                        new_session=lambda: bridge.new_session(mapping.values()))
        result.notes.extend(notes)
        result.screenshots = bridge.screenshots.directory()
        if result.failed_step is not None:
            tail = _last_output(bridge, result.failed_step.replay_port)
            if tail:
                result.notes.append(tail)
        out = Replayed(result=result, identities=identities)
        if report is not None:
            out.report = write_report(report, result, current=identities, update=update)
        if update and result.failure is None:
            out.updated = write_updated(result, trace.path, identities=identities, summarise=summarise)
        return out
    finally:
        if own:
            bridge.shutdown()


__all__ = ["Replayed", "replay_file"]
