"""The Bridge: the seven tools and the bridge toolset as plain, synchronous methods.

Every method returns a JSON-ready dict or raises a BridgeError; the MCP adapter and the
``call`` CLI are thin shells around ``Bridge.run_tool``. The Bridge owns the per-instance
state (a GameClient, the cached manifest, the last frame seen, a lock that serialises
commands to that instance); the Launcher owns the processes it started.

Manifest cache invalidation: a new generation of the port's GameClient (it saw ``frame``
go backwards, a new process on the port, or the instance went offline), and a name that
misses (one re-fetch).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable

from ..wire.client import GameClient
from .boundary import clean_answer, clean_error, clean_progress
from .composites import Composite, CompositeContext, check_composites
from ..config import Config, check_port
from ..contract import CONFIRMED_BY_FRAMES, CONFIRMED_BY_ID, PENDING
from . import events, listing, ports
from .. import polling
from .events import answer_digest
from .digest import get_path
from .outcome import command_answer, command_outcome
from .pending import CLOCK_COMMANDS, PendingCommands, pending_note
from .screenshot import IMAGE_KEY, Screenshots
from ..errors import BridgeError, BridgeUsageError, CommandFailed, CommandRejected, GameOffline, GamePaused
from ..jsonio import as_int, large_documents_scope
from ..manifest.choose import ManifestFile, RecentMisses, choose_manifest
from ..manifest.reader import Manifest, ToolSpec, args_to_schema
from ..tools import (BRIDGE_TOOL_NAMES, BRIDGE_TOOLS, RAW_COMMAND, TOOLS, ToolDef, check_arguments, python_name,
                     tool_def)
from ..wire.transport import Opener
from .waiting import Condition, Until, wait_for_state, wait_until
from . import clock

log = logging.getLogger(__name__)

#: ``wait_for``'s ``equals`` when it was not given (None is a value to wait for).
UNSET: Any = object()

Progress = Callable[[float, float | None, str], None]


@dataclass
class _Instance:
    """What the bridge keeps about one port. What is known about the game's answers (its
    frames, what /health carries, restarts) is the GameClient's; the Bridge keeps the
    manifest it read, for the client's generation it was read in."""

    client: GameClient
    command_lock: threading.Lock = field(default_factory=threading.Lock)
    manifest: Manifest | None = None
    manifest_generation: int = -1
    manifest_key: str | None = None
    #: Names missing from the manifest after a re-fetch: not re-fetched again for a moment.
    misses: RecentMisses = field(default_factory=RecentMisses)
    #: Commands answered as pending, waiting for the game's clock (core/pending.py).
    pending: PendingCommands = field(default_factory=PendingCommands)


class Bridge:
    """Drive any game that serves the contract. Thread-safe: calls to different ports run
    in parallel; commands to one port are serialised."""

    def __init__(self, config: Config | None = None, *, opener: Opener | None = None,
                 launcher: Any = None, composites: Sequence[Composite] = ()) -> None:
        self.config = config or Config()
        self._opener = opener
        self._launcher = launcher
        self._launcher_lock = threading.Lock()
        self.composites = check_composites(composites, BRIDGE_TOOL_NAMES | {t.name for t in TOOLS})
        #: Grows by one whenever a manifest read for a port differs from the one read
        #: before it (``--eager`` compares it to know when to send list_changed).
        self.manifest_changes = 0
        self._instances: dict[int, _Instance] = {}
        self._lock = threading.Lock()
        self._manifest_file = ManifestFile(self.config.manifest_file)
        self.screenshots = Screenshots(environ=self.config.environ, registry_dir=self.config.registry_dir)
        self._closed = False

    # ------------------------------------------------------------------ plumbing
    def _instance(self, port: int) -> _Instance:
        with self._lock:
            inst = self._instances.get(port)
            if inst is None:
                inst = _Instance(GameClient(port, timeout_ms=self.config.timeout_ms, opener=self._opener,
                                            launch_hint=self.config.effective_launch_hint()))
                self._instances[port] = inst
            return inst

    def client(self, port: int) -> GameClient:
        return self._instance(port).client

    def new_session(self, ports: Iterable[int]) -> None:
        """Answer about ``ports`` from here on as a freshly started bridge would (see
        GameClient.new_session): a replay meeting a trace's next recording session."""
        for port in ports:
            self.client(port).new_session()

    def _port(self, port: Any) -> int:
        """The documented port order (docs/cli.md), with one step before 7777: the one instance this bridge
        launched (see core/ports.py)."""
        if port is None:
            implied = ports.implied_port(self.config, self.launched_ports())
            if implied is not None:
                return implied
        return self.config.resolve_port(port)

    def _known_instances(self, exclude: int) -> list[dict[str, Any]]:
        with self._lock:
            answered = [p for p, inst in self._instances.items() if inst.client.last_frame is not None]
        return ports.known_instances(self.config, self.launched_ports(), answered, exclude=exclude)

    def forget(self, port: int) -> None:
        """Forget what is known about a port (it went offline or was stopped): its client
        starts a new generation, which also invalidates the manifest read in the old one."""
        with self._lock:
            inst = self._instances.get(port)
        if inst is not None:
            inst.client.forget()

    def _guarded(self, port: int, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except GameOffline:
            self.forget(port)
            raise

    # ------------------------------------------------------------------ manifests
    def manifest(self, port: int, *, refresh: bool = False, timeout_ms: int | None = None) -> Manifest:
        """The instance's manifest: cached; ``refresh`` re-fetches ``GET /tools``."""
        inst = self._instance(port)
        with self._lock:
            cached = inst.manifest if inst.manifest_generation == inst.client.generation else None
        if cached is not None and not refresh:
            return cached
        generation = inst.client.generation
        manifest = self._guarded(port, lambda: self._fetch_manifest(inst.client, timeout_ms))
        key = repr((manifest.source, manifest.game, [t.to_dict() for t in manifest.tools()]))
        with self._lock:
            if inst.manifest_key is not None and inst.manifest_key != key:
                self.manifest_changes += 1
            inst.manifest, inst.manifest_key, inst.manifest_generation = manifest, key, generation
        return manifest

    def _fetch_manifest(self, client: GameClient, timeout_ms: int | None = None) -> Manifest:
        if timeout_ms is not None:
            timeout_ms = min(timeout_ms, self.config.timeout_ms)
        manifest, _problem = choose_manifest(client, timeout_ms=timeout_ms, manifest_file=self._manifest_file)
        return manifest

    def _composites_for(self, manifest: Manifest) -> list[Composite]:
        name = manifest.game.get("name") if isinstance(manifest.game, Mapping) else None
        return [c for c in self.composites if c.suits(name)]

    def _composite_schema(self, composite: Composite) -> dict[str, Any]:
        schema, _problems = args_to_schema(composite.args, reserved_args=frozenset({"port"}))
        return schema

    # ------------------------------------------------------------------ dispatch
    def run_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                 progress: Progress | None = None) -> dict[str, Any]:
        """Run one of the seven tools by its MCP name, with the tools' argument names.

        This is the Bridge's one door (the MCP adapter, ``--eager``'s flat tools, the
        ``call`` CLI, replay and the pytest driver all come through it), and so the one
        boundary for game text: the answer, an error and every progress line leave
        through ``boundary.py``, which strips what must never reach the agent."""
        cleaned = clean_progress(progress)
        try:
            # A large /state is freed before the collector runs again; long waits report progress.
            with large_documents_scope(), polling.progress_scope(cleaned):
                result: dict[str, Any] = clean_answer(self._run_tool(name, arguments, progress=cleaned))
            return result
        except BaseException as exc:
            raise clean_error(exc)

    def _run_tool(self, name: str, arguments: Mapping[str, Any] | None, *,
                  progress: Progress | None) -> dict[str, Any]:
        tool = tool_def(name)
        if tool is None or tool not in TOOLS:
            known = ", ".join(t.name for t in TOOLS)
            raise BridgeUsageError(f"Unknown tool '{name}'. The tools are: {known}. Game and bridge tools are reached through call_tool.")
        try:
            return self._invoke(tool, check_arguments(name, tool.input_schema, arguments), progress=progress)
        except GameOffline as exc:  # name what does answer, so a mistyped port can be corrected
            if exc.port in self.launched_ports():  # a game of ours that exited: say so, with its output
                exc = ports.with_exit(exc, lambda: self.launcher().log(exc.port, lines=ports.EXIT_LINES))
            raise ports.with_known_instances(exc, lambda: self._known_instances(exc.port)) from None

    def _invoke(self, tool: ToolDef, args: Mapping[str, Any], *, port: int | None = None,
                progress: Progress | None = None) -> dict[str, Any]:
        """Call the method the tool table names for ``tool`` with its checked arguments
        (their spec names in Python spelling, see ``tools.python_name``)."""
        kwargs: dict[str, Any] = {python_name(key): value for key, value in args.items()}
        if port is not None:
            kwargs["port"] = port
        if tool.progress:
            kwargs["progress"] = progress
        result: dict[str, Any] = getattr(self, tool.method)(**kwargs)
        return result

    # ------------------------------------------------------------------ launcher
    def launcher(self) -> Any:
        with self._launcher_lock:
            if self._launcher is None:
                from ..launch.launcher import Launcher
                self._launcher = Launcher(self.config, opener=self._opener)
            return self._launcher

    def launched_ports(self) -> list[int]:
        return list(self._launcher.launched_ports()) if self._launcher is not None else []

    def launch_instance(self, *, port: Any = None, timeout_ms: Any = None, paused: bool | None = None,
                        progress: Progress | None = None) -> dict[str, Any]:
        explicit = check_port(port) if port is not None else None
        if self.config.declaration is None and self.config.declaration_error is not None:
            raise self.config.declaration_error  # the gamebridge.json found at start-up is broken

        def report(elapsed_ms: float, total_ms: float, line: str) -> None:
            if progress is not None:
                progress(elapsed_ms, total_ms, line)

        env = {clock.START_PAUSED_ENV: "1"} if paused else None
        result = self.launcher().launch(port=explicit, timeout_ms=timeout_ms, progress=report, env=env)
        launched = int(result["port"])
        self.forget(launched)
        if paused:
            result.update(clock.confirm_paused_launch(
                self.client(launched), lambda: self.stop_instance(port=launched, grace_ms=1000),
                timeout_ms=self.config.timeout_ms))
        return result

    def stop_instance(self, *, port: Any = None, grace_ms: Any = None) -> dict[str, Any]:
        target = self._port(port)
        launcher = self._launcher
        self._refuse_other_sessions(target, "stop_instance will not signal it")
        if launcher is None or not launcher.is_launched(target):
            raise BridgeUsageError(
                f"Port {target} was not launched by this bridge, so stop_instance will not signal it. "
                f"Ask the game to close itself instead: call_tool {{\"port\": {target}, \"name\": \"close\"}}.",
                port=target)
        result = launcher.stop(target, grace_ms=3000 if grace_ms is None else int(grace_ms))
        self.forget(target)
        return result

    def instance_log(self, *, port: Any = None, lines: Any = None, since: Any = None) -> dict[str, Any]:
        target = self._port(port)
        launcher = self._launcher
        self._refuse_other_sessions(target, "its captured output is not shown here")
        if launcher is None or not launcher.is_launched(target):
            raise BridgeUsageError(
                f"Port {target} was not launched by this bridge, so it has no captured output. "
                "instance_log covers instances started with launch_instance; see list_instances for what runs where.",
                port=target)
        return launcher.log(target, lines=50 if lines is None else int(lines), since=since)

    # ------------------------------------------------------------------ discovery
    def list_instances(self, *, range: str | None = None, registry: bool | None = None,
                       scan: bool | None = None, prune: bool | None = False) -> dict[str, Any]:
        from ..discovery.report import discover

        report = discover(self.config, opener=self._opener, range_spec=range, use_registry=registry,
                          use_scan=scan, prune=bool(prune), launched_ports=self._launched_details(), known=self,
                          also_scan=ports.declared_scan_ports(self.config))
        mark = getattr(self._launcher, "mark_listing", None)  # one of several MCP sessions (--http)
        if mark is not None:
            mark(report)
        return report

    def _launched_details(self) -> dict[int, dict[str, Any]]:
        """Ports this bridge launched (every session's, when sessions share it), with what
        the launcher knows (pid, cwd, started)."""
        launcher = self._launcher
        if launcher is None:
            return {}
        launched = getattr(launcher, "all_launched_ports", launcher.launched_ports)()
        return {port: launcher.info(port) or {} for port in launched}

    def _refuse_other_sessions(self, port: int, consequence: str) -> None:
        """An instance another MCP session launched is that session's alone (--http)."""
        elsewhere = getattr(self._launcher, "launched_elsewhere", None)
        if elsewhere is not None and elsewhere(port):
            raise BridgeUsageError(
                f"Port {port} was launched by another MCP session of this bridge, not by this one, so "
                f"{consequence}. Only the session that launched it can stop it (its instances stop when that "
                "session ends); launch an instance of your own with launch_instance.",
                port=port, launchedBy="another session")

    # ------------------------------------------------------------------ toolsets
    def list_toolsets(self, *, port: Any = None) -> dict[str, Any]:
        target = self._port(port)
        manifest = self.manifest(target)
        return listing.toolsets_report(target, manifest, self._composites_for(manifest))

    def describe_toolset(self, *, name: str, port: Any = None) -> dict[str, Any]:
        target = self._port(port)
        manifest = self.manifest(target)
        if name == "bridge":
            return listing.bridge_toolset(target, self._composites_for(manifest), self._composite_schema)
        if name == "passthrough":
            return listing.passthrough_toolset(target, manifest)
        toolset = manifest.toolset(name)
        if toolset is None:
            toolset = self._refetch_for(target, "toolset " + name, lambda m: m.toolset(name))
            manifest = self.manifest(target)
        if toolset is None:
            raise listing.no_such_toolset(target, name, manifest)
        return listing.game_toolset(target, toolset)

    # ------------------------------------------------------------------ call_tool
    def call_tool(self, *, name: Any, arguments: Any = None, until: Any = None, port: Any = None,
                  progress: Progress | None = None) -> dict[str, Any]:
        """The resolution order (docs/tools.md): bridge tools and composites, the manifest (one
        re-fetch on a miss), then passthrough. ``until``: after the command is confirmed,
        wait for a condition and answer with the state that satisfied it."""
        if not isinstance(name, str) or not name.strip():
            raise BridgeUsageError("call_tool needs 'name': the tool to run (see list_toolsets).")
        wait = Until.parse(until)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise BridgeUsageError(f"call_tool: 'arguments' must be a JSON object, not {type(arguments).__name__}.")
        args = dict(arguments)
        inner_port = args.pop("port", None)
        if port is not None and inner_port is not None and check_port(port) != check_port(inner_port):
            raise BridgeUsageError(f"call_tool got two different ports ({port} and arguments.port {inner_port}); give one.")
        target = self._port(port if port is not None else inner_port)
        if name in BRIDGE_TOOL_NAMES:
            if wait is not None and name == "advance":
                raise BridgeUsageError("call_tool: advance takes its condition among its arguments: "
                                       "{\"name\": \"advance\", \"arguments\": {\"until\": {...}}}.")
            if wait is not None and name != "raw_command":
                raise BridgeUsageError(f"call_tool: 'until' waits after a command; {name} is not one. "
                                       "Use it with a game tool or raw_command (or call wait_for).")
            if wait is not None:
                raw = check_arguments(name, RAW_COMMAND.input_schema, args)
                return self.run_command(target, raw["command"], raw.get("args") or {}, sync=raw.get("sync") is not False,
                                        timeout_ms=raw.get("timeoutMs"), via="raw", until=wait)
            return self._bridge_tool(name, target, args)
        composite = next((c for c in self.composites if c.name == name), None)
        if composite is not None:
            manifest = self.manifest(target)
            if composite.suits(manifest.game.get("name")):
                return self._run_composite(composite, target, args, until=wait)
        spec = self._find_tool(target, name)
        if spec is not None:
            check_arguments(name, spec.input_schema, args)
            return self.run_command(target, spec.command, args, sync=spec.sync, tool=name, via="manifest", until=wait)
        return self._passthrough(target, name, args, until=wait)

    def _find_tool(self, port: int, name: str) -> ToolSpec | None:
        spec = self.manifest(port).find(name)
        return spec if spec is not None else self._refetch_for(port, name, lambda m: m.find(name))

    def _refetch_for(self, port: int, name: str, look: Callable[[Manifest], Any]) -> Any:
        """A name the cached manifest lacks (perhaps added by a rebuild): one re-fetch, unless
        the same name missed after one a moment ago (passthrough commands miss every time)."""
        inst = self._instance(port)
        generation = inst.client.generation
        if inst.misses.recent(name, generation):
            return None
        found = look(self.manifest(port, refresh=True))
        if found is None:
            inst.misses.remember(name, generation)
        return found

    def _passthrough(self, port: int, name: str, args: dict[str, Any], *, until: "Until | None" = None) -> dict[str, Any]:
        try:
            return self.run_command(port, name, args, tool=name, via="passthrough", until=until)
        except CommandRejected as exc:
            manifest = self.manifest(port)
            answer = exc.answer
            listed = answer.get("commands") if isinstance(answer, Mapping) else None
            accepted = sorted({t.name for t in manifest.tools()}
                              | {str(c) for c in (listed if isinstance(listed, list) else []) if isinstance(c, (str, int))}
                              | set(BRIDGE_TOOL_NAMES) | {c.name for c in self._composites_for(manifest)})
            raise BridgeUsageError(
                f"{exc.message} It is not in the game's manifest either. This instance accepts: "
                f"{', '.join(accepted)[:2000]}. Call list_toolsets for descriptions.",
                port=port, command=name, accepted=accepted) from None

    def _run_composite(self, composite: Composite, port: int, args: dict[str, Any], *,
                       until: "Until | None" = None) -> dict[str, Any]:
        check_arguments(composite.name, self._composite_schema(composite), args)
        ctx = CompositeContext(self, port, args)
        try:
            value = composite.run(ctx)
        except BridgeError:
            raise
        except Exception as exc:  # a host's bug becomes a structured error; the server keeps serving
            log.exception("composite %s failed", composite.name)
            raise BridgeUsageError(
                f"Composite '{composite.name}' failed on port {port}: {type(exc).__name__}: {str(exc)[:500]}. "
                "This is an error in the composite's code, not in the game.",
                port=port, tool=composite.name, exception=type(exc).__name__) from None
        result = value if isinstance(value, dict) else {"result": value}
        answer = {"port": port, "tool": composite.name, "via": "composite", **result}
        if until is not None:
            answer.update(self._settle(port, until, baseline=None, first=None))
        return answer

    def run_command(self, port: int, command: str, args: Mapping[str, Any] | None = None, *,
                    sync: bool = True, timeout_ms: int | None = None, tool: str | None = None,
                    via: str = "raw", include_state: bool = False, until: Until | None = None) -> dict[str, Any]:
        """Send a command, wait for its confirmation, return the result digest. With
        ``until``, then wait for its condition and answer with the state that met it."""
        if command == "close":
            return self.close(port=port, grace_ms=timeout_ms)
        inst = self._instance(port)
        baseline: dict[str, Any] | None = None
        until_digest = until is not None and not include_state and until.condition.digest_answers is not False

        may_wait = sync and command not in CLOCK_COMMANDS  # input on a paused game waits for its clock

        def send() -> dict[str, Any]:
            nonlocal baseline
            with inst.command_lock:
                if may_wait and len(inst.pending):
                    inst.pending.check_room(port, inst.client.completed_id, inst.client.generation)
                if may_wait and inst.client.paused is None and "clock" in inst.client.learn_features():
                    inst.client.state(digest=True)  # once: whether its clock is stopped (each answer says after)
                if until is not None and until.condition.needs_baseline:
                    baseline = self._whole_if_needed(inst.client, until, inst.client.state(digest=until_digest))
                outcome = inst.client.command_and_sync(command, args, timeout_ms=timeout_ms, sync=sync,
                                                       digest=not include_state and (until is None or until_digest),
                                                       pending_ok=may_wait)
                if until is not None and until_digest and isinstance(outcome.get("state"), dict):
                    outcome["state"] = self._whole_if_needed(inst.client, until, outcome["state"])
                return outcome

        outcome = self._guarded(port, send)
        confirmation = outcome["confirmation"]
        applied = {CONFIRMED_BY_ID: True, CONFIRMED_BY_FRAMES: True}.get(
            confirmation, False if confirmation in ("not-waited", PENDING) else None)
        fields: dict[str, Any] = {"port": port, "tool": tool or command, "via": via, "command": command,
                                  "applied": applied}
        if outcome.get("commandId") is not None:
            fields["commandId"] = outcome["commandId"]
        elif outcome.get("reportedCommandId") is not None:  # an id that could not confirm it (idNote says why)
            fields["commandId"] = outcome["reportedCommandId"]
        else:
            fields["commandId"] = None
        fields["confirmation"] = confirmation  # how sure "applied" is (docs/contract.md's label)
        if outcome.get("idNote"):
            fields["confirmationNote"] = outcome["idNote"]
        state = outcome.get("state")
        if confirmation == PENDING and isinstance(state, dict):  # answered now; the next advance delivers it
            fields["pending"] = True
            inst.pending.add(int(outcome["commandId"]), tool or command, inst.client.generation)
            fields["note"] = pending_note(port, tool or command, outcome["commandId"], state,
                                          clock.until_shape(until.condition) if until is not None else None)
            fields.update(inst.pending.settle(state, inst.client.generation, exclude=outcome["commandId"]))
            return command_answer(fields, self._digest(port, state))
        if isinstance(state, dict):
            done = command_outcome(state, as_int(outcome.get("commandId")))
            if done.ok is False:  # a refusal is not waited on
                raise CommandFailed(port, tool or command, done.reason or "", command=command,
                                    command_id=as_int(outcome.get("commandId")),
                                    after=self._digest(port, state))
            if done.has_result:
                fields["result"] = done.result
            if done.note:
                fields["resultNote"] = done.note
        elif confirmation == "not-waited" and until is None:
            fields["note"] = "Queued and not waited on (sync: false). Use wait_for to observe its effect."
        if until is not None:
            settled = self._settle(port, until, baseline=baseline, first=state if isinstance(state, dict) else None,
                                   whole=include_state)
            state = settled.pop("_state")
            fields.update(settled)
        if not isinstance(state, dict):  # not waited on: the state as the command was queued
            state = self._guarded(port, lambda: inst.client.state(digest=not include_state))
        if len(inst.pending):  # what became of commands that waited for the clock
            fields.update(inst.pending.settle(state, inst.client.generation))
        answer = command_answer(fields, self._digest(port, state))  # once: it moves the events cursor
        if include_state:
            answer["state"] = state
        return answer

    def _digest(self, port: int, state: Mapping[str, Any]) -> dict[str, Any]:
        """The whole digest of ``state`` for an answer about ``port``; its events are the
        ones no answer has shown yet (the port's events cursor moves past them)."""
        return answer_digest(self.client(port), state)

    def _settle(self, port: int, until: Until, *, baseline: Mapping[str, Any] | None,
                first: Mapping[str, Any] | None, whole: bool = False) -> dict[str, Any]:
        """Wait for ``until`` after a command: ``settled`` and what was seen, and the state
        it ended on under ``_state`` (for the caller's digest)."""
        watch = until.condition.watch(baseline)
        poll, cost = self._condition_polls(port, until.condition, whole=whole)
        paused = clock.RefusePaused(poll, port, until.condition, last=first)
        try:
            waited = wait_until(paused, watch, timeout_ms=until.timeout_ms, poll_cost_s=cost, first=first)
        except GamePaused as exc:  # the command was applied; only the wait is pointless
            return {"settled": False, **watch.report(), "note": exc.message, "_state": paused.last or {}}
        out: dict[str, Any] = {"settled": waited.matched, **watch.report()}
        if not waited.matched:
            out["note"] = watch.miss_note(waited.total_ms)
        out["_state"] = waited.state
        return out

    @staticmethod
    def _whole_if_needed(client: GameClient, until: Until, state: dict[str, Any]) -> dict[str, Any]:
        """A digest that lacks the ``game.<key>`` ``until`` reads (not a scalar now, or not
        there): the whole state instead, so the condition is judged on what the game has."""
        condition = until.condition
        if condition.digest_answers is None and client.uses("view") and not get_path(state, condition.path or "")[0]:
            return client.state()
        return state

    def _condition_polls(self, port: int, condition: Condition, *, whole: bool = False
                         ) -> tuple[Callable[[int | None], dict[str, Any]], Callable[[], float]]:
        """How a wait for ``condition`` fetches states (given the time left), and what the
        last fetch cost: ``view=digest`` when the digest answers the condition (and the
        caller does not want the ``whole`` state); for a ``game.<key>`` a digest without
        it is checked against the whole state, which is fetched from then on."""
        client = self.client(port)
        keeps = False if whole else condition.digest_answers

        def fetch(remaining_ms: int | None) -> dict[str, Any]:
            nonlocal keeps
            state = client.state(timeout_ms=remaining_ms, digest=keeps is not False)
            if keeps is None and client.uses("view") and not get_path(state, condition.path or "")[0]:
                keeps = False  # not a scalar now, or not there: look at the whole state
                state = client.state(timeout_ms=remaining_ms)
            return state

        def poll(remaining_ms: int | None) -> dict[str, Any]:
            return self._guarded(port, lambda: fetch(remaining_ms))

        return poll, lambda: client.poll_cost(keeps is not False)

    # ------------------------------------------------------------------ bridge toolset
    def _bridge_tool(self, name: str, port: int, args: dict[str, Any]) -> dict[str, Any]:
        tool = tool_def(name)
        assert tool is not None and tool in BRIDGE_TOOLS
        return self._invoke(tool, check_arguments(name, tool.input_schema, args), port=port)

    def raw_command(self, *, command: str, args: Mapping[str, Any] | None = None, sync: bool | None = None,
                    timeout_ms: int | None = None, port: Any = None) -> dict[str, Any]:
        return self.run_command(self._port(port), command, args or {}, sync=sync is not False,
                                timeout_ms=timeout_ms, via="raw")

    def get_state(self, *, port: Any = None, summary: bool | None = False) -> dict[str, Any]:
        target = self._port(port)
        state = self._guarded(target, lambda: self.client(target).state(digest=bool(summary)))
        if summary:
            return {"port": target, **self._digest(target, state)}
        return state

    def get_events(self, *, since: int | None = None, limit: int | None = None, port: Any = None) -> dict[str, Any]:
        target = self._port(port)
        client = self.client(target)
        result = self._guarded(target, lambda: events.get_events(client, client.state, since=since, limit=limit))
        return {"port": target, **result}

    def get_health(self, *, port: Any = None) -> dict[str, Any]:
        target = self._port(port)
        health = self._guarded(target, lambda: self.client(target).health())
        return {"port": target, **health}

    def get_screenshot(self, *, port: Any = None, max_width: Any = None, max_height: Any = None,
                       always: bool | None = None) -> dict[str, Any]:
        """The game's screen: see core/screenshot.py (the image rides under IMAGE_KEY)."""
        target = self._port(port)
        return self._guarded(target, lambda: self.screenshots.take(self.client(target), max_width=max_width,
                                                                   max_height=max_height, always=always))

    def close(self, *, port: Any = None, grace_ms: Any = None) -> dict[str, Any]:
        target = self._port(port)
        grace = 5000 if grace_ms is None else int(grace_ms)
        inst = self._instance(target)
        inst.client.health()  # a dead port is GameOffline, not a successful close
        with inst.command_lock:
            quiet = inst.client.close_and_wait(grace)
        self.forget(target)
        result = {"port": target, "tool": "close", "closed": quiet,
                  "confirmation": "port-quiet" if quiet else "still-answering"}
        if not quiet:
            result["note"] = (f"The game was asked to close but port {target} still answers after {grace}ms. "
                              + ("It was launched by this bridge: stop_instance escalates." if target in self.launched_ports()
                                 else "Check the game's window or log."))
        return result

    def wait_for(self, *, port: Any = None, path: str | None = None, equals: Any = UNSET,
                 changes: bool | None = False, event: str | None = None,
                 timeout_ms: Any = None) -> dict[str, Any]:
        """``equals`` left out and ``equals=None`` differ: the latter waits for null."""
        target = self._port(port)
        condition = Condition(path=path, equals=None if equals is UNSET else equals,
                              has_equals=equals is not UNSET, changes=bool(changes), event=event)
        condition.check()
        poll, cost = self._condition_polls(target, condition)
        result, state = wait_for_state(clock.RefusePaused(poll, target, condition), condition,
                                       timeout_ms=timeout_ms, poll_cost_s=cost)
        return {"port": target, **result, **self._digest(target, state)}

    def advance(self, *, port: Any = None, frames: Any = None, until: Any = None,
                max_frames: Any = None, inputs: Any = None, screenshot: bool | None = None) -> dict[str, Any]:
        """Step a paused game (the clock extension): see core/clock.py; with ``inputs``,
        input delivered at given frames (core/inputs.py); with ``screenshot``, the picture
        after, and whether it changed."""
        target = self._port(port)
        inst = self._instance(target)
        with inst.command_lock:  # every frame on the connection the client keeps to the game
            run = clock.Advance(inst.client, timeout_ms=self.config.timeout_ms, behind=inst.pending.newest_id)
            answer: dict[str, Any] = self._guarded(target, lambda: run.run(frames, until, max_frames, inputs))
            if len(inst.pending) and run.last_state is not None:  # the commands it delivered
                answer.update(inst.pending.settle(run.last_state, inst.client.generation))
        if screenshot:
            shot = self.get_screenshot(port=target)
            image = shot.pop(IMAGE_KEY, None)
            answer["screenshot"] = {k: v for k, v in shot.items() if k != "port"}
            if image is not None:
                answer[IMAGE_KEY] = image
        return answer

    # ------------------------------------------------------------------ eager
    def eager_targets(self) -> list[tuple[int, Manifest]]:
        """Instances whose tools ``--eager`` advertises: every live port found by discovery."""
        ports: set[int] = {self.config.default_port()}
        try:
            report = self.list_instances()
            ports |= {int(e["port"]) for e in report.get("live", [])}
        except BridgeError as exc:
            log.info("eager discovery failed: %s", exc.render())
        out = []
        for port in sorted(ports):
            try:
                out.append((port, self.manifest(port)))
            except BridgeError:
                continue
        return out

    # ------------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:
        """Stop everything this bridge launched. Idempotent; bounded in time."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            clients = [inst.client for inst in self._instances.values()]
        for client in clients:
            client.close()
        if self._launcher is not None:
            try:
                self._launcher.shutdown()
            except Exception:
                log.exception("launcher shutdown failed")
