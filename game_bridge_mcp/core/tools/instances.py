"""The instances tools: ``launch_instance``, ``list_instances``, ``stop_instance``,
``instance_log``, and the bridge toolset's ``close``; and the instances ``--eager`` advertises."""

from __future__ import annotations

import logging
from typing import Any

from ...config import check_port
from ...errors import BridgeError, BridgeUsageError
from ...manifest.reader import Manifest
from .. import clock, ports
from ..states.saving import fixed_launch_env, start_journal
from .commands import close_game, refuse_other_sessions
from ..host import Host, Progress
from .shapes import BOOL, INT, INT_OR_NULL, LIST, STR, STR_OR_NULL, answer, from_game
from .unit import PORT, ToolDef, schema

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- launch_instance

LAUNCH_ANSWER = answer("launch_instance's answer", {
    "port": INT, "pid": INT_OR_NULL, "name": from_game("The game's name, from /tools"),
    "version": from_game("The game's version, from /tools"), "cwd": STR, "readyInMs": INT, "logFile": STR,
    "notes": LIST, "note": STR, "paused": from_game("With paused: whether it started paused"),
    "simFrame": from_game("With paused: its simulation frame"),
}, ("port", "pid", "name", "version", "cwd", "readyInMs", "logFile"))


def launch_instance(bridge: Host, *, port: Any = None, timeout_ms: Any = None, paused: bool | None = None,
                    progress: Progress | None = None) -> dict[str, Any]:
    explicit = check_port(port) if port is not None else None
    config = bridge.config
    if config.declaration is None and config.declaration_error is not None:
        raise config.declaration_error  # the gamebridge.json found at start-up is broken

    def report(elapsed_ms: float, total_ms: float, line: str) -> None:
        if progress is not None:
            progress(elapsed_ms, total_ms, line)

    fixed = fixed_launch_env(bridge) if paused else {}  # what a re-execution of it repeats (its date)
    env = {**fixed, clock.START_PAUSED_ENV: "1"} if paused else None
    result: dict[str, Any] = bridge.launcher().launch(port=explicit, timeout_ms=timeout_ms, progress=report, env=env)
    launched = int(result["port"])
    bridge.forget(launched)
    bridge.instance(launched).journal = None  # a new process: what was sent to the port before is not its
    if paused:
        result.update(clock.confirm_paused_launch(
            bridge.client(launched), lambda: stop_instance(bridge, port=launched, grace_ms=1000),
            timeout_ms=config.timeout_ms))
        start_journal(bridge, launched, env=fixed)  # what is sent from here re-executes it (save_state, fork_instance)
    return result


LAUNCH_INSTANCE = ToolDef(
    "launch_instance", "Launch a game instance",
    "Start a new instance of this project's game (from its gamebridge.json), on a free port the "
    "bridge picks, and wait until it answers. Returns its port, pid, version, working directory "
    "and log file. Use it when list_instances shows nothing to drive, or to compare two builds "
    "(paused: true, the same moves, compare the states). "
    "Never choose a port yourself unless you must.",
    schema({"port": {**PORT, "description": "Only if you need a specific port; normally leave it out."},
             "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 3600000, "description": "How long to wait for the game to answer (default: the declaration's readyTimeoutMs)."},
             "paused": {"type": "boolean", "description": "Start the game with its clock paused (GAME_BRIDGE_START_PAUSED=1), then step it with call_tool advance. Needs a game that advertises clock."}}),
    launch_instance, LAUNCH_ANSWER, progress=True)

# ----------------------------------------------------------------------------- list_instances

_LIVE = answer("a live instance", {
    "port": INT, "discovery": {"enum": ["registry", "scan", "both"]}, "status": STR,
    "launchedByThisBridge": BOOL, "game": from_game("Its name"), "version": from_game("Its version"),
    "pid": INT_OR_NULL, "cwd": STR_OR_NULL, "screen": from_game("Its screen"), "toolsets": LIST,
}, ("port", "status"))

LIST_ANSWER = answer("list_instances' answer", {
    "registryDir": STR_OR_NULL, "live": {"type": "array", "items": _LIVE},
    "stale": {"type": "array", "items": {"type": "object"}},
    "notAGame": {"type": "array", "items": {"type": "object"}},
    "free": {"type": "array", "items": INT},
}, ("registryDir", "live", "stale", "notAGame", "free"))


def list_instances(bridge: Host, *, range: str | None = None, registry: bool | None = None,
                   scan: bool | None = None, prune: bool | None = False) -> dict[str, Any]:
    from ...discovery.report import discover

    report = discover(bridge.config, opener=bridge.opener, range_spec=range, use_registry=registry,
                      use_scan=scan, prune=bool(prune), launched_ports=_launched_details(bridge), known=bridge,
                      also_scan=ports.declared_scan_ports(bridge.config))
    mark = getattr(bridge.launcher(create=False), "mark_listing", None)  # one of several MCP sessions (--http)
    if mark is not None:
        mark(report)
    return report


def _launched_details(bridge: Host) -> dict[int, dict[str, Any]]:
    """Ports this bridge launched (every session's, when sessions share it), with what
    the launcher knows (pid, cwd, started)."""
    launcher = bridge.launcher(create=False)
    if launcher is None:
        return {}
    launched = getattr(launcher, "all_launched_ports", launcher.launched_ports)()
    return {port: launcher.info(port) or {} for port in launched}


LIST_INSTANCES = ToolDef(
    "list_instances", "List running game instances",
    "Find every game instance on this machine: the instance registry plus a port scan. Shows each "
    "one's port, name, version, pid, working directory, screen, toolsets and whether this bridge "
    "launched it, plus stale registry files and ports taken by something that is not a game. "
    "Start here in a new session.",
    schema({"range": {"type": "string", "description": "Ports to scan, e.g. '7777,7800-7810' (default: --scan-range)."},
             "registry": {"type": "boolean", "description": "Read the instance registry (default true unless --no-registry)."},
             "scan": {"type": "boolean", "description": "Scan the port range (default true unless --no-scan)."},
             "prune": {"type": "boolean", "description": "Delete registry files whose port is dead and whose process is gone (default false; the only thing this tool ever changes)."}}),
    list_instances, LIST_ANSWER, idempotent=True)


def eager_targets(bridge: Host) -> list[tuple[int, Manifest]]:
    """Instances whose tools ``--eager`` advertises: every live port found by discovery."""
    found: set[int] = {bridge.config.default_port()}
    try:
        report = list_instances(bridge)
        found |= {int(e["port"]) for e in report.get("live", [])}
    except BridgeError as exc:
        log.info("eager discovery failed: %s", exc.render())
    out = []
    for port in sorted(found):
        try:
            out.append((port, bridge.manifest(port)))
        except BridgeError:
            continue
    return out


# ----------------------------------------------------------------------------- stop_instance

STOP_ANSWER = answer("stop_instance's answer", {
    "port": INT, "stopped": BOOL,
    "how": {"type": "string", "description": "closed cleanly, terminated, killed, already exited or not signalled"},
    "pid": INT_OR_NULL, "exitCode": INT_OR_NULL, "signal": STR, "stoppedInMs": INT, "logFile": STR_OR_NULL,
    "note": STR, "message": STR,
}, ("port", "stopped", "how", "pid", "exitCode", "stoppedInMs", "logFile"))


def stop_instance(bridge: Host, *, port: Any = None, grace_ms: Any = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    launcher = bridge.launcher(create=False)
    refuse_other_sessions(bridge, target, "stop_instance will not signal it")
    if launcher is None or not launcher.is_launched(target):
        raise BridgeUsageError(
            f"Port {target} was not launched by this bridge, so stop_instance will not signal it. "
            f"Ask the game to close itself instead: call_tool {{\"port\": {target}, \"name\": \"close\"}}.",
            port=target)
    result: dict[str, Any] = launcher.stop(target, grace_ms=3000 if grace_ms is None else int(grace_ms))
    bridge.forget(target)
    return result


STOP_INSTANCE = ToolDef(
    "stop_instance", "Stop an instance this bridge launched",
    "Stop a game instance this bridge launched: the game's own close first, then termination of its "
    "whole process tree if it does not go within graceMs. Refuses ports this bridge did not launch "
    "(ask that game to close itself with call_tool name 'close').",
    schema({"port": PORT, "graceMs": {"type": "integer", "minimum": 0, "maximum": 600000, "description": "How long a clean close may take before escalation (default 3000)."}}),
    stop_instance, STOP_ANSWER, destructive=True, idempotent=True)

# ----------------------------------------------------------------------------- instance_log

LOG_ANSWER = answer("instance_log's answer", {
    "port": INT, "lines": {"type": "array", "items": STR}, "next": INT, "dropped": BOOL, "more": BOOL,
    "logFile": STR, "running": BOOL, "exitCode": INT_OR_NULL, "signal": STR, "stopped": BOOL, "note": STR,
}, ("port", "lines", "next", "dropped", "more", "logFile", "running", "exitCode"))


def instance_log(bridge: Host, *, port: Any = None, lines: Any = None, since: Any = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    launcher = bridge.launcher(create=False)
    refuse_other_sessions(bridge, target, "its captured output is not shown here")
    if launcher is None or not launcher.has_output(target):
        raise BridgeUsageError(
            f"Port {target} was not launched by this bridge, so it has no captured output. "
            "instance_log covers instances started with launch_instance; see list_instances for what runs where.",
            port=target)
    result: dict[str, Any] = launcher.log(target, lines=50 if lines is None else int(lines), since=since)
    return result


INSTANCE_LOG = ToolDef(
    "instance_log", "Read a launched instance's output",
    "The captured stdout/stderr of an instance this bridge launched (after stop_instance too, with stopped: "
    "true, until the next launch on its port). Pass the previous answer's "
    "'next' as 'since' to read only new lines. Use it when a game misbehaves or fails to boot.",
    schema({"port": PORT, "lines": {"type": "integer", "minimum": 1, "maximum": 200, "description": "How many lines at most (default 50)."},
             "since": {"type": "integer", "minimum": 0, "description": "Return only lines after this cursor (the 'next' of a previous call)."}}),
    instance_log, LOG_ANSWER, read_only=True, idempotent=True)

# ----------------------------------------------------------------------------- close

CLOSE_ANSWER = answer("close's answer", {
    "port": INT, "tool": {"const": "close"}, "closed": BOOL, "confirmation": STR, "note": STR,
}, ("port", "tool", "closed", "confirmation"))


def close(bridge: Host, *, port: Any = None, grace_ms: Any = None) -> dict[str, Any]:
    return close_game(bridge, bridge.resolve_port(port), grace_ms)


CLOSE = ToolDef(
    "close", "Close the game cleanly",
    "Ask the game to shut down through its own teardown; confirmed by the port going quiet. Works on "
    "any instance; for one this bridge launched prefer stop_instance, which also escalates.",
    schema({"port": PORT, "graceMs": {"type": "integer", "minimum": 0, "maximum": 600000, "description": "How long to wait for the port to go quiet (default 5000)."}}),
    close, CLOSE_ANSWER, destructive=True, idempotent=True)
