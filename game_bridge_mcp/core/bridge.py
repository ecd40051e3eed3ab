"""The Bridge: the instances it knows (a GameClient, the cached manifest and a command lock
per port), which port a call means, and ``run_tool``, the one door every tool is run
through, by the table (core/tools/table.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, TypeVar

from .. import polling
from ..config import Config
from ..errors import BridgeUsageError, GameOffline
from ..jsonio import large_documents_scope
from ..manifest.choose import ManifestFile, choose_manifest
from ..manifest.reader import Manifest
from ..wire.client import GameClient
from ..wire.transport import Opener
from . import ports
from .boundary import clean_answer, clean_error, clean_progress
from .composites import Composite, check_composites
from .host import Host, BridgeInstance, Progress
from .screenshot import Screenshots
from .states.store import StateStore
from .tools.table import BRIDGE_TOOL_NAMES, BRIDGE_TOOLS, TOOL_NAMES, TOOLS, tool_def
from .tools.unit import ToolDef, check_arguments

log = logging.getLogger(__name__)

T = TypeVar("T")


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
        #: The bridge's own toolset (call_tool runs it, describe_toolset lists it).
        self.toolset: tuple[ToolDef, ...] = BRIDGE_TOOLS
        #: Grows by one whenever a manifest read for a port differs from the one read
        #: before it (``--eager`` compares it to know when to send list_changed).
        self.manifest_changes = 0
        self._instances: dict[int, BridgeInstance] = {}
        self._lock = threading.Lock()
        self._manifest_file = ManifestFile(self.config.manifest_file)
        self.screenshots = Screenshots(environ=self.config.environ, registry_dir=self.config.registry_dir)
        #: The states this session saved (save_state; core/statestore.py).
        self.states = StateStore(environ=self.config.environ, registry_dir=self.config.registry_dir)
        self._closed = False

    # ------------------------------------------------------------------ instances
    @property
    def opener(self) -> Opener | None:
        """The HTTP opener every request to a game goes through (None: the default)."""
        return self._opener

    def instance(self, port: int) -> BridgeInstance:
        """What is kept about ``port`` (made on first use)."""
        with self._lock:
            inst = self._instances.get(port)
            if inst is None:
                inst = BridgeInstance(GameClient(port, timeout_ms=self.config.timeout_ms, opener=self._opener,
                                                 launch_hint=self.config.effective_launch_hint()))
                self._instances[port] = inst
            return inst

    def client(self, port: int) -> GameClient:
        return self.instance(port).client

    def new_session(self, ports: Iterable[int]) -> None:
        """Answer about ``ports`` from here on as a freshly started bridge would (see
        Shown.new_session): a replay meeting a trace's next recording session."""
        for port in ports:
            self.instance(port).shown.new_session()

    def resolve_port(self, port: Any) -> int:
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

    def guarded(self, port: int, fn: Callable[[], T]) -> T:
        """``fn()``; a GameOffline from it forgets the port first."""
        try:
            return fn()
        except GameOffline:
            self.forget(port)
            raise

    # ------------------------------------------------------------------ manifests
    def manifest(self, port: int, *, refresh: bool = False, timeout_ms: int | None = None) -> Manifest:
        """The instance's manifest: cached for the generation of the port's GameClient it
        was read in (a restart, a new process or the port going offline starts a new one);
        ``refresh`` re-fetches ``GET /tools``."""
        inst = self.instance(port)
        with self._lock:
            cached = inst.manifest if inst.manifest_generation == inst.client.generation else None
        if cached is not None and not refresh:
            return cached
        generation = inst.client.generation
        manifest = self.guarded(port, lambda: self._fetch_manifest(inst.client, timeout_ms))
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

    def refetch_for(self, port: int, name: str, look: Callable[[Manifest], Any]) -> Any:
        """A name the cached manifest lacks (perhaps added by a rebuild): one re-fetch, unless
        the same name missed after one a moment ago (passthrough commands miss every time)."""
        inst = self.instance(port)
        generation = inst.client.generation
        if inst.misses.recent(name, generation):
            return None
        found = look(self.manifest(port, refresh=True))
        if found is None:
            inst.misses.remember(name, generation)
        return found

    # ------------------------------------------------------------------ dispatch
    def run_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                 progress: Progress | None = None) -> dict[str, Any]:
        """Run one of the advertised tools by its MCP name, with the tools' argument names.

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
            raise clean_error(exc)  # noqa: B904 - the same error, cleaned, keeps its own context

    def _run_tool(self, name: str, arguments: Mapping[str, Any] | None, *,
                  progress: Progress | None) -> dict[str, Any]:
        tool = tool_def(name)
        if tool is None or name not in TOOL_NAMES:
            known = ", ".join(t.name for t in TOOLS)
            raise BridgeUsageError(f"Unknown tool '{name}'. The tools are: {known}. Game and bridge tools are reached through call_tool.")
        try:
            host: Host = self  # what a tool's handler is given of the Bridge (mypy checks it is)
            return tool.run(host, check_arguments(name, tool.input_schema, arguments), progress=progress)
        except GameOffline as exc:  # name what does answer, so a mistyped port can be corrected
            port = exc.port
            offline = exc
            if port in self.launched_ports():  # a game of ours that exited: say so, with its output
                offline = ports.with_exit(offline, lambda: self.launcher().log(port, lines=ports.EXIT_LINES))
            offline = ports.with_launch_advice(offline, self.config)
            raise ports.with_known_instances(offline, lambda: self._known_instances(port)) from None

    # ------------------------------------------------------------------ launcher
    def launcher(self, *, create: bool = True) -> Any:
        """The Launcher of this bridge's instances; with ``create=False`` None until one is
        needed (a check of what was launched does not make one)."""
        with self._launcher_lock:
            if self._launcher is None and create:
                from ..launch.launcher import Launcher
                self._launcher = Launcher(self.config, opener=self._opener)
            return self._launcher

    def launched_ports(self) -> list[int]:
        return list(self._launcher.launched_ports()) if self._launcher is not None else []

    # ------------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:
        """Stop everything this bridge launched. Idempotent; bounded in time."""
        if self._closed:
            return
        self._closed = True
        try:
            from .states.saving import close_session

            close_session(self)  # its states go (kept ones stay), live copies in games it did not launch too
        except Exception:
            log.exception("dropping the session's states failed")
        with self._lock:
            clients = [inst.client for inst in self._instances.values()]
        for client in clients:
            client.close()
        if self._launcher is not None:
            try:
                self._launcher.shutdown()
            except Exception:
                log.exception("launcher shutdown failed")
