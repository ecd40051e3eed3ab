"""Discovery: every game instance on this machine, from the registry, a port scan and the
ports this bridge launched, each verified against the live port, sorted into the
``list_instances`` report (docs/launching.md). The probe's names stay importable from here."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Callable, Collection

from .. import polling
from ..config import parse_port_spec
from ..listeners import listeners, user_name
from ..errors import BridgeUsageError
from ..jsonio import as_int
from ..manifest.choose import ManifestFile
from ..manifest.reader import fallback_manifest
from .probe import (DEFAULT_HOST, DEFAULT_PROBE_TIMEOUT_MS, KnownInstances, Probe,
                    short_text, connect_sweep, probe_port)
from ..paths import registry_dir
from ..registry import RegistryEntry, RegistryScan, pid_alive, prune_entry, read_registry
from ..wire.transport import Opener, loopback_opener

#: Upper bound on probe threads; the rest queue behind them (refused probes are fast).
MAX_PROBE_THREADS = 64
#: Caps on text copied from a game or a registry file into the report.
IDENTITY_LIMIT = 200
CWD_LIMIT = 1000


@dataclass
class _Target:
    host: str
    port: int
    scanned: bool = False
    launched: bool = False
    declared: bool = False
    entries: list[RegistryEntry] = field(default_factory=list)


def _probe_all(targets: list[_Target], run: Callable[[_Target], Probe]) -> list[Probe]:
    """Run ``run`` over every target in parallel; results in target order."""
    if not targets:
        return []
    if len(targets) == 1:
        return [run(targets[0])]
    workers = min(len(targets), MAX_PROBE_THREADS)
    token = polling.current_token()  # the call's: a cancelled list_instances ends its probes too
    reporter = polling.current_progress()  # the call's too: a long sweep says how far it is
    total = len(targets)
    done = 0
    lock = threading.Lock()

    def run_for_the_call(target: _Target) -> Probe:
        nonlocal done
        with polling.cancel_scope(token), polling.progress_of(reporter):
            try:
                return run(target)
            finally:
                with lock:
                    done += 1
                    count = done
                polling.report_progress(count, total, f"probed {count} of {total} ports")

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gb-probe") as pool:
        return list(pool.map(run_for_the_call, targets))


# --------------------------------------------------------------------------- the report

def _normal_host(host: str) -> str:
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _scan_ports(config: Any, range_spec: Any) -> tuple[int, ...]:
    if range_spec is None or (isinstance(range_spec, str) and not range_spec.strip()):
        return tuple(config.scan_range)  # an empty string from a client means "not given"
    if isinstance(range_spec, bool) or not isinstance(range_spec, (str, int)):
        raise BridgeUsageError(
            f"range must be a port spec string such as '7777,7800-7810', not {range_spec!r}.")
    return parse_port_spec(str(range_spec))


def _launched_info(launched_ports: Collection[int] | Mapping[int, Any]) -> dict[int, dict[str, Any]]:
    """Ports this bridge launched; a mapping may carry {pid, cwd, started} per port."""
    out: dict[int, dict[str, Any]] = {}
    for port in launched_ports:
        if as_int(port) is None:
            continue
        info = launched_ports[port] if isinstance(launched_ports, Mapping) else None
        out[port] = dict(info) if isinstance(info, Mapping) else {}
    return out


def _entry_rank(entry: RegistryEntry, alive: bool) -> tuple[int, str, int]:
    return (1 if alive else 0, entry.started or "", entry.pid)


def _stale_record(entry: RegistryEntry, alive: bool, reason: str) -> dict[str, Any]:
    record: dict[str, Any] = {"path": str(entry.path), "port": entry.port, "pid": entry.pid,
                              "pidAlive": alive, "reason": reason}
    name = short_text(entry.name, IDENTITY_LIMIT)
    if name:
        record["game"] = name
    cwd = short_text(entry.cwd, CWD_LIMIT)
    if cwd:
        record["cwd"] = cwd
    if entry.host != DEFAULT_HOST:
        record["host"] = entry.host
    return record


def _quiet_reason(port: int, pid: int, alive: bool) -> str:
    if alive:
        return (f"nothing is listening on port {port}, but pid {pid} is still running: a game "
                "still binding its port, or one that closed its debug port")
    return (f"nothing is listening on port {port} and pid {pid} is not running: the game "
            "exited without removing its entry (a crash or a kill)")


def _live_record(target: _Target, probe: Probe, entry: RegistryEntry | None,
                 launched: Mapping[str, Any] | None) -> dict[str, Any]:
    manifest = probe.manifest or fallback_manifest()
    if entry is not None:
        discovery = "both" if target.scanned else "registry"
    elif target.entries:
        discovery = "registry"  # found through an entry that turned out not to be this game's
    else:
        discovery = "scan"
    status = "live-no-manifest" if manifest.source == "fallback" else "live"
    game = manifest.game if isinstance(manifest.game, dict) else {}
    name = short_text(game.get("name"), IDENTITY_LIMIT)
    version = short_text(game.get("version"), IDENTITY_LIMIT)
    protocol = as_int(game.get("protocol"))
    if entry is not None:  # the entry only fills what the live game did not say
        name = name or short_text(entry.name, IDENTITY_LIMIT)
        version = version or short_text(entry.version, IDENTITY_LIMIT)
        protocol = protocol if protocol is not None else entry.protocol
    record: dict[str, Any] = {"port": target.port, "discovery": discovery, "status": status,
                              "frame": probe.frame}
    if target.host != DEFAULT_HOST:
        record["host"] = target.host
    for key, value in (("game", name), ("version", version), ("protocol", protocol)):
        if value is not None:
            record[key] = value
    record["manifest"] = manifest.source
    if probe.manifest_problem:
        record["manifestProblem"] = probe.manifest_problem
    # What the bridge knows of a game it launched beats any file: a registry entry only
    # fills what the launcher does not know (and is all there is for anyone else's game).
    ours = launched is not None and launched.get("listener", "ours") == "ours"
    known = launched if ours and launched is not None else {}
    pid = as_int(known.get("pid"))
    cwd = short_text(known.get("cwd"), CWD_LIMIT)
    started = short_text(known.get("started"), IDENTITY_LIMIT)
    if entry is not None:
        pid = pid if pid is not None else entry.pid
        cwd = cwd or short_text(entry.cwd, CWD_LIMIT)
        started = started or short_text(entry.started, IDENTITY_LIMIT)
    for key, value in (("pid", pid), ("cwd", cwd), ("started", started), ("screen", probe.screen)):
        if value is not None:
            record[key] = value
    record["toolsets"] = [n for n in manifest.toolset_names() if n != "bridge"] + ["bridge"]
    record["launchedByThisBridge"] = ours
    if launched is not None and not ours:
        launched_pid = as_int(launched.get("pid"))
        record["launchNote"] = (f"this bridge launched a game on port {target.port}"
                                + (f" (pid {launched_pid})" if launched_pid is not None else "")
                                + ", but the process listening here now is not part of it: the launched "
                                "game has exited and something else holds the port")
    return record


def _flag_other_users(live: list[dict[str, Any]]) -> None:
    """Mark each live record whose listening socket belongs to another user of this
    machine (``otherUser``, with the uid and login name): it is not this user's game."""
    if not live or not hasattr(os, "getuid"):
        return
    found = listeners([int(r["port"]) for r in live if "host" not in r]) or {}
    me = os.getuid()
    for record in live:
        held = found.get(int(record["port"])) if "host" not in record else None
        if held is None or me in held.uids or not held.uids:
            continue
        uid = min(held.uids)
        record["otherUser"] = True
        record["listenerUid"] = uid
        name = user_name(uid)
        if name:
            record["listenerUser"] = name


def _probe_targets(ordered: list[_Target], opener: Opener, timeout_ms: int,
                   known: KnownInstances | None, manifest_file: ManifestFile) -> list[Probe]:
    """Probe every target. With the real transport, a connect sweep settles the quiet
    ports first; an injected opener (tests, socket-less use) sees every probe."""

    def run(tgt: _Target) -> Probe:
        return probe_port(tgt.host, tgt.port, opener=opener, timeout_ms=timeout_ms,
                          known=known, manifest_file=manifest_file)

    if opener is not loopback_opener:
        return _probe_all(ordered, run)
    swept = connect_sweep([(t.host, t.port) for t in ordered], timeout_ms / 1000.0)
    probes: list[Probe | None] = [None] * len(ordered)
    listening: list[int] = []
    for index, outcome in enumerate(swept):
        if outcome == "refused":
            probes[index] = Probe("refused", "nothing is listening")
        elif outcome == "pending":
            probes[index] = Probe("unresponsive", f"did not accept a connection within {timeout_ms}ms")
        else:
            listening.append(index)
    for index, probe in zip(listening, _probe_all([ordered[i] for i in listening], run)):
        probes[index] = probe
    return [p if p is not None else Probe("unresponsive", "not probed") for p in probes]


def discover(config: Any, *, opener: Opener | None = None, range_spec: str | int | None = None,
             use_registry: bool | None = None, use_scan: bool | None = None, prune: bool = False,
             launched_ports: Collection[int] | Mapping[int, Any] = (),
             known: KnownInstances | None = None,
             probe_timeout_ms: int = DEFAULT_PROBE_TIMEOUT_MS,
             also_scan: Collection[int] = ()) -> dict[str, Any]:
    """The ``list_instances`` report: ``registryDir``, ``live``, ``stale``, ``notAGame``,
    ``free`` (plus ``unresponsive``, ``registryProblems``, ``registryNote`` when there
    is something to say). Read-only unless ``prune`` is true.

    ``config`` supplies ``scan_range``, ``scan``, ``registry``, ``registry_dir``,
    ``environ`` and ``manifest_file``; ``use_registry``/``use_scan`` override the
    last two flags and ``range_spec`` the range (empty means the default).

    ``known`` is the Bridge (see :class:`~.probe.KnownInstances`): its own client for each
    loopback port and its manifest cache, used from probe threads; without it each port
    gets a fresh client and ``/tools`` is read here. ``also_scan``: more ports swept with the
    default range (the declaration's portRange; not with an explicit ``range_spec``). ``launched_ports`` (ports,
    or a mapping port -> {pid, cwd, started, listener}) are always probed and flagged
    ``launchedByThisBridge`` unless ``listener`` says the process listening there is
    not part of the launched tree (then ``launchNote`` says so). What the mapping says
    beats a registry entry for the same port.

    Raises BridgeUsageError for a bad ``range_spec``; nothing a game or a file says can
    make it raise.
    """
    opener = opener if opener is not None else loopback_opener
    registry_on = config.registry if use_registry is None else bool(use_registry)
    scan_on = config.scan if use_scan is None else bool(use_scan)
    timeout_ms = max(1, int(probe_timeout_ms))
    scan_ports = _scan_ports(config, range_spec)  # a bad spec fails even with scanning off
    declared: tuple[int, ...] = ()
    if scan_on and (range_spec is None or (isinstance(range_spec, str) and not range_spec.strip())):
        # with the default range, also where the project's launches land (launch.portRange): a
        # game started with `call launch_instance --keep`, which no bridge tracks, is found there
        declared = tuple(p for p in also_scan if isinstance(as_int(p), int))
    scan_ports = scan_ports if scan_on else ()
    launched = _launched_info(launched_ports)
    directory = registry_dir(getattr(config, "environ", None), getattr(config, "registry_dir", None))

    scan = RegistryScan(directory=directory)
    if registry_on:
        scan = read_registry(directory)

    targets: dict[tuple[str, int], _Target] = {}

    def target(host: str, port: int) -> _Target:
        key = (host, port)
        if key not in targets:
            targets[key] = _Target(host, port)
        return targets[key]

    for port in scan_ports:
        target(DEFAULT_HOST, port).scanned = True
    for port in declared:  # probed, but not listed as free: the launcher's range, not the caller's
        target(DEFAULT_HOST, port).declared = True
    for port in launched:
        target(DEFAULT_HOST, port).launched = True
    for entry in scan.entries:
        target(_normal_host(entry.host), entry.port).entries.append(entry)

    ordered = sorted(targets.values(), key=lambda t: (t.port, t.host != DEFAULT_HOST, t.host))
    manifest_file = ManifestFile(getattr(config, "manifest_file", None))
    probes = _probe_targets(ordered, opener, timeout_ms, known, manifest_file)

    live: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    not_a_game: list[dict[str, Any]] = []
    free: list[int] = []
    unresponsive: list[dict[str, Any]] = []

    for tgt, probe in zip(ordered, probes):
        alive = {e.path: pid_alive(e.pid) for e in tgt.entries}
        entries = sorted(tgt.entries, key=lambda e: _entry_rank(e, alive[e.path]), reverse=True)
        if probe.kind == "live":
            chosen = next((e for e in entries if alive[e.path]), None)
            for entry in entries:
                if entry is chosen:
                    continue
                if alive[entry.path]:
                    reason = (f"port {entry.port} is live, but the entry for pid {chosen.pid if chosen else '?'} "
                              "claims it too and is newer; this one is probably from a process that "
                              "lost the port")
                else:
                    reason = (f"pid {entry.pid} is not running; port {entry.port} is now answered "
                              "by another process, so this entry is a leftover")
                stale.append(_stale_record(entry, alive[entry.path], reason))
            live.append(_live_record(tgt, probe, chosen, launched.get(tgt.port) if tgt.host == DEFAULT_HOST else None))
            continue
        if probe.kind == "not-a-game":
            record: dict[str, Any] = {"port": tgt.port, "reason": probe.reason}
            if tgt.host != DEFAULT_HOST:
                record["host"] = tgt.host
            if tgt.entries:
                record["registry"] = [str(e.path) for e in entries]
            not_a_game.append(record)
            for entry in entries:
                stale.append(_stale_record(entry, alive[entry.path],
                             f"port {entry.port} is answered by something that is not a game "
                             f"({probe.reason})"))
            continue
        if probe.kind == "refused":
            if tgt.scanned:
                free.append(tgt.port)
            for entry in entries:
                record = _stale_record(entry, alive[entry.path],
                                       _quiet_reason(entry.port, entry.pid, alive[entry.path]))
                if prune:
                    _prune(entry, alive[entry.path], record)
                stale.append(record)
            continue
        # unresponsive: something holds the port but does not answer in time
        if tgt.scanned or tgt.launched or tgt.declared or not tgt.entries:
            record = {"port": tgt.port, "reason": probe.reason}
            if tgt.host != DEFAULT_HOST:
                record["host"] = tgt.host
            unresponsive.append(record)
        for entry in entries:
            state = "is still running" if alive[entry.path] else "is not running"
            stale.append(_stale_record(entry, alive[entry.path],
                         f"port {entry.port} {probe.reason}; pid {entry.pid} {state}"))

    if prune:  # every stale entry says whether it went, and why not
        for record in stale:
            if "pruned" not in record:
                record["pruned"] = False
                record["notPrunedBecause"] = f"port {record['port']} is not quiet"

    _flag_other_users(live)
    report: dict[str, Any] = {
        "registryDir": str(directory),
        "live": live,
        "stale": sorted(stale, key=lambda r: (r["port"], r["path"])),
        "notAGame": not_a_game,
        "free": sorted(set(free)),
    }
    if unresponsive:
        report["unresponsive"] = unresponsive
    problems = [p.to_dict() for p in scan.problems] + [p.to_dict() for p in scan.ignored_hosts]
    if problems:
        report["registryProblems"] = sorted(problems, key=lambda p: p["path"])
    if not registry_on:
        report["registryNote"] = "not read (registry discovery is off)"
    elif scan.note and "does not exist" not in scan.note:
        report["registryNote"] = scan.note
    return report


def _prune(entry: RegistryEntry, alive: bool, record: dict[str, Any]) -> None:
    """Delete a stale entry only when its port is quiet (the caller saw it refused) and
    its pid is gone; record the outcome either way."""
    if alive:
        record["pruned"] = False
        record["notPrunedBecause"] = f"pid {entry.pid} is still running"
        return
    deleted = prune_entry(entry)
    record["pruned"] = deleted
    if not deleted:
        record["notPrunedBecause"] = "the file changed, vanished or could not be deleted"


__all__ = ["DEFAULT_PROBE_TIMEOUT_MS", "Probe", "discover", "probe_port"]
