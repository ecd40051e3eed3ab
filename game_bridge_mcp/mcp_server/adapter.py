"""The MCP adapter: the SDK's low-level server around one Bridge, on both SDK majors, every tool
call run on a worker thread (its results made by ``results.py``). The SDK is imported only in
this package (``mcp_server/``)."""

from __future__ import annotations

# Built against both SDK majors: a `pyright: ignore` here marks a line written for the other one
# (1.x's decorators, 2.x's Server(on_...=); SDK types built with camelCase keywords, which both accept).

# SDK models are built with camelCase keywords, which 1.x requires and 2.x accepts (its
# stubs name only the snake_case fields), and the 1.x decorator API is absent from 2.x's
# stubs: the two error codes below are the price of one adapter for both majors.
# mypy: disable-error-code="call-arg,attr-defined"

import functools
import gc
import inspect
import logging
import time
import warnings
from typing import Any, Callable

# Importing the SDK builds a few hundred thousand objects (pydantic models and schemas);
# the cyclic collector would run dozens of passes over them meanwhile, for nothing
# (about 60 ms of a 600-800 ms start). Paused for the imports only.
_gc_was_enabled = gc.isenabled()
gc.disable()
try:
    import anyio
    import anyio.lowlevel
    import anyio.to_thread
    import mcp.types as types
    from mcp.server.lowlevel import NotificationOptions, Server
finally:
    if _gc_was_enabled:
        gc.enable()

from .. import polling
from .._version import __version__
from ..core.bridge import Bridge
from ..errors import BridgeError
from ..core.tools.instances import eager_targets
from ..core.tools.table import (BRIDGE_TOOL_NAMES, BRIDGE_TOOLS, FLAT_TOOL_OUTPUT, INSTRUCTIONS, TOOL_NAMES, TOOLS,
                                UNTIL)
from ..core.tools.shapes import admitting_errors
from ..core.tools.unit import ToolDef
from . import logs
from .results import error_result, result_of

log = logging.getLogger("game_bridge_mcp")

_SDK2 = "on_call_tool" in inspect.signature(Server.__init__).parameters


def _protocol_versions() -> tuple[frozenset[str], frozenset[str]]:
    """The protocol versions the installed SDK serves: those of the ``initialize`` handshake
    (sessions), and the sessionless ones (2026-07-28 on: each request carries its own)."""
    try:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS  # pyright: ignore[reportMissingImports]
    except ImportError:  # 1.x: handshake versions only
        from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS  # pyright: ignore[reportMissingImports]
        return frozenset(SUPPORTED_PROTOCOL_VERSIONS), frozenset()
    return frozenset(HANDSHAKE_PROTOCOL_VERSIONS), frozenset(MODERN_PROTOCOL_VERSIONS)


HANDSHAKE_VERSIONS, SESSIONLESS_VERSIONS = _protocol_versions()
#: Every protocol version this server answers (through the installed SDK).
PROTOCOL_VERSIONS = HANDSHAKE_VERSIONS | SESSIONLESS_VERSIONS
#: The error code the installed SDK answers a cancelled request's POST with over HTTP
#: (2.x: REQUEST_CANCELLED; 1.x: 0), so the HTTP fast path answers as it does.
CANCELLED_CODE = -32800 if _SDK2 else 0
# 2.x warns on every use of logging/setLevel and log notifications: the 2026-07-28 protocol
# drops them, while the handshake versions clients speak keep them (and this server serves those).
warnings.filterwarnings("ignore", message="The logging capability is deprecated")
EAGER_PREFIX = "p"
#: Worker threads at once (calls, and --eager's refreshes); a call counts until its work ended.
MAX_CALLS = 64
#: How often --eager re-reads manifests and looks for new instances.
EAGER_REFRESH_S = 2.0
#: A game's manifest that read the same as before is re-read half as often each time, down
#: to once in this long (a restart is still noticed every cycle, by its frames).
EAGER_MAX_REREAD_S = 60.0


#: Each tool's advertised outputSchema: its answer's, or an error's (shapes.admitting_errors).
_OUTPUT = {t.name: admitting_errors(t.output) for t in TOOLS + BRIDGE_TOOLS}
_FLAT_OUTPUT = admitting_errors(FLAT_TOOL_OUTPUT)


def _tool(defn: ToolDef) -> types.Tool:
    return types.Tool(name=defn.name, title=defn.title, description=defn.description,  # pyright: ignore[reportCallIssue]
                      inputSchema=defn.input_schema, outputSchema=_OUTPUT[defn.name],  # pyright: ignore[reportCallIssue]
                      annotations=types.ToolAnnotations(**defn.annotations()))


def _with_tools_changed(original: Callable[..., Any], notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
    return original(NotificationOptions(tools_changed=True), *args, **kwargs)


class BridgeServer:
    """The SDK server around one Bridge: the tool list, dispatch, progress, list_changed."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.eager = bridge.config.eager
        #: The cap on calls running at once (both the SDK's path and the HTTP fast path's).
        self.limiter = anyio.CapacityLimiter(MAX_CALLS)
        #: Calls whose work is still running (a cancelled one counts until its thread ends).
        self.calls_in_flight = 0
        self._session: Any = None
        self._token: Any = None
        self._eager_tools: dict[str, tuple[int, str]] = {}
        #: The flat game tools whose schema lists call_tool's ``until`` (a game tool with
        #: an ``until`` of its own keeps it).
        self._eager_until: set[str] = set()
        #: Per port: when --eager re-reads its manifest next, and the interval it is at.
        self._rereads: dict[int, tuple[float, float]] = {}
        self.clock: Callable[[], float] = time.monotonic
        self._manifest_changes_seen = bridge.manifest_changes
        self.recorder: Any = None
        if bridge.config.record is not None:  # --record FILE: a trace of every call (trace/)
            from ..trace.recorder import Recorder
            self.recorder = Recorder(bridge.config.record, bridge, recorder="serve")
        #: The bridge's log lines go to this server's client too (logging/setLevel; logs.py).
        self.logs = logs.forwarder()
        if _SDK2:
            with warnings.catch_warnings():  # (see the filter above; a host may have reset the filters)
                warnings.filterwarnings("ignore", message="The logging capability is deprecated")
                self.server = Server("game-bridge-mcp", version=__version__, instructions=INSTRUCTIONS,
                                     on_list_tools=self._on_list_tools_v2, on_call_tool=self._on_call_tool_v2,  # pyright: ignore[reportCallIssue]
                                     on_set_logging_level=self._on_set_level_v2)  # pyright: ignore[reportCallIssue]
            self.server.add_request_handler("server/discover", types.RequestParams, self._on_discover_v2)  # pyright: ignore[reportAttributeAccessIssue]
        else:
            self.server = Server("game-bridge-mcp", version=__version__, instructions=INSTRUCTIONS)
            # SDK 1.x's decorator factories are untyped (2.x has none: its handlers go to Server()).
            self.server.list_tools()(self._list_tools_v1)  # type: ignore[no-untyped-call, unused-ignore]
            self.server.call_tool(validate_input=False)(self._call_tool_v1)  # pyright: ignore[reportAttributeAccessIssue]
            self.server.set_logging_level()(self._set_level_v1)  # type: ignore[no-untyped-call, unused-ignore]
        if self.eager:  # advertise tools.listChanged however the server is run (stdio or in-memory)
            original = self.server.create_initialization_options
            self.server.create_initialization_options = functools.partial(  # type: ignore[method-assign]
                _with_tools_changed, original)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=self.eager))


    # ------------------------------------------------------------------ tool list
    async def list_tools(self) -> list[types.Tool]:
        tools = [_tool(t) for t in TOOLS]
        if self.eager:
            tools += await anyio.to_thread.run_sync(self._eager_tool_list, limiter=self.limiter)
        return tools

    def _eager_tool_list(self) -> list[types.Tool]:
        tools = [_tool(t) for t in BRIDGE_TOOLS]
        mapping: dict[str, tuple[int, str]] = {}
        until: set[str] = set()
        for port, manifest in eager_targets(self.bridge):
            game = manifest.game.get("name") or "game"
            for spec in manifest.tools():
                flat = f"{EAGER_PREFIX}{port}_{spec.name}"[:64]
                if flat in mapping:
                    continue
                mapping[flat] = (port, spec.name)
                schema = spec.input_schema
                properties = schema.get("properties")
                if isinstance(properties, dict) and "until" not in properties:  # call_tool's, beside its own
                    schema = {**schema, "properties": {**properties, "until": UNTIL}}
                    until.add(flat)
                tools.append(types.Tool(  # pyright: ignore[reportCallIssue]
                    name=flat, title=f"{spec.name} on port {port}",
                    description=f"[{game} on port {port}, toolset {spec.toolset}] {spec.description}",
                    inputSchema=schema, outputSchema=_FLAT_OUTPUT,  # pyright: ignore[reportCallIssue]
                    annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)))  # pyright: ignore[reportCallIssue]
        self._eager_tools, self._eager_until = mapping, until
        return tools

    def _announce_manifest_changes(self) -> None:
        """With --eager, tell the client when a manifest changed since the last look
        (the Bridge counts changes; a worker thread calls this)."""
        changes = self.bridge.manifest_changes
        if not self.eager or changes == self._manifest_changes_seen:
            return
        self._manifest_changes_seen = changes
        self._send_tools_changed()

    def _send_tools_changed(self) -> None:
        session, token = self._session, self._token
        if session is None or token is None:
            return
        try:
            anyio.from_thread.run(session.send_tool_list_changed, token=token)
        except Exception:
            log.debug("could not send tools/list_changed", exc_info=True)

    def refresh_eager(self) -> None:
        """One refresh cycle of --eager (a worker thread runs it every EAGER_REFRESH_S):
        re-read every advertised game's manifest (a change is announced with list_changed)
        and announce instances that appeared or went away."""
        before = set(self._eager_tools)
        for port in sorted({p for p, _ in self._eager_tools.values()}):
            self._reread(port)
        ports_now = {port for port, _ in eager_targets(self.bridge)}
        if ports_now != {p for p, _ in self._eager_tools.values()} or not before:
            self._eager_tool_list()
            if set(self._eager_tools) != before:
                self._send_tools_changed()
        self._announce_manifest_changes()

    def _reread(self, port: int) -> None:
        """Re-read one game's manifest when it is due: at once after a change, then half
        as often each time it reads the same, down to EAGER_MAX_REREAD_S (an unchanged
        8 MB manifest must not cost CPU every cycle while idle)."""
        now = self.clock()
        due, interval = self._rereads.get(port, (now, EAGER_REFRESH_S))
        if now < due:
            return
        changes = self.bridge.manifest_changes
        try:
            self.bridge.manifest(port, refresh=True, timeout_ms=1000)
        except BridgeError:
            self.bridge.forget(port)
            self._rereads.pop(port, None)
            return
        interval = EAGER_REFRESH_S if self.bridge.manifest_changes != changes else min(2 * interval, EAGER_MAX_REREAD_S)
        self._rereads[port] = (now + interval, interval)

    async def eager_loop(self) -> None:
        while True:
            await anyio.sleep(EAGER_REFRESH_S)
            try:
                await anyio.to_thread.run_sync(self.refresh_eager, limiter=self.limiter, abandon_on_cancel=True)
            except Exception:
                log.debug("eager refresh failed", exc_info=True)

    # ------------------------------------------------------------------ calls
    def dispatch(self, name: str, arguments: dict[str, Any], progress: Callable[[float, float | None, str], None] | None) -> dict[str, Any]:
        """Runs in a worker thread. Every tool call passes through here, so this is where a
        recording wraps it (as the advertised tools' call it is: a flat tool of --eager is
        recorded as the call_tool it stands for)."""
        tool, args, run = self._route(name, arguments, progress)
        try:
            if self.recorder is None:
                return run()
            result: dict[str, Any] = self.recorder.call(tool, args, run)
            return result
        finally:
            self._announce_manifest_changes()

    def _route(self, name: str, arguments: dict[str, Any], progress: Callable[[float, float | None, str], None] | None
               ) -> tuple[str, dict[str, Any], Callable[[], dict[str, Any]]]:
        if self.eager and name not in TOOL_NAMES:
            if name in BRIDGE_TOOL_NAMES:
                call: dict[str, Any] = {"name": name, "arguments": arguments}
                return "call_tool", call, lambda: self.bridge.run_tool("call_tool", call, progress=progress)
            target = self._eager_tools.get(name)
            if target is not None:
                port, tool = target
                args = dict(arguments)
                flat: dict[str, Any] = {"name": tool, "arguments": args, "port": port}
                if name in self._eager_until and "until" in args:  # call_tool's, as in call_tool
                    flat["until"] = args.pop("until")
                return "call_tool", flat, lambda: self.bridge.run_tool("call_tool", flat, progress=progress)
        return name, arguments, lambda: self.bridge.run_tool(name, arguments, progress=progress)

    async def call_tool(self, name: str, arguments: Any, session: Any, progress_token: Any,
                        request_id: Any = None) -> types.CallToolResult:
        """Run a call in a worker thread; its progress (when the client sent a token) goes
        on the request's own stream (``request_id``: over HTTP its response stream, the
        only one a sessionless request has)."""
        self._session = session
        progress: Callable[[float, float | None, str], None] | None = None
        if progress_token is not None and session is not None:
            token = anyio.lowlevel.current_token()

            def send_progress(done: float, total: float | None, message: str) -> None:
                try:
                    anyio.from_thread.run(functools.partial(
                        session.send_progress_notification, progress_token, float(done),
                        float(total) if total is not None else None, message or None,
                        related_request_id=request_id), token=token)
                except Exception:
                    log.debug("progress notification failed", exc_info=True)

            progress = send_progress
        try:
            value = await self.in_worker(functools.partial(self.dispatch, name, arguments or {}, progress))
            return result_of(value, (name, arguments or {}))
        except Exception as exc:  # every failure becomes a result; the server keeps serving
            return error_result(exc)

    async def in_worker(self, work: Callable[[], Any]) -> Any:
        """Run a call's blocking ``work`` in a worker thread, cancellably.

        When the SDK cancels the request (the client sent ``notifications/cancelled``,
        or the session is ending), the call's :class:`~game_bridge_mcp.polling.CancelToken`
        is set, which ends the work's waits, polls and sleeps within about 100 ms, and
        this waits for the thread to finish before letting the cancellation through: a
        call holds its place under the cap (``MAX_CALLS``) until its work has really
        ended, so cancelled calls cannot pile up threads."""
        token = polling.CancelToken()
        outcome: dict[str, Any] = {}
        finished = anyio.Event()

        def run() -> Any:
            with polling.cancel_scope(token):
                return work()

        async def runner() -> None:
            try:  # never abandoned: the thread holds its limiter token until it returns
                outcome["value"] = await anyio.to_thread.run_sync(run, limiter=self.limiter)
            except BaseException as exc:  # handed to the waiting task, not to the task group
                outcome["error"] = exc
            finally:
                self.calls_in_flight -= 1
                finished.set()

        self.calls_in_flight += 1
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(runner)
            try:
                await finished.wait()
            except anyio.get_cancelled_exc_class():
                token.cancel()  # the task group now waits for the thread, which ends promptly
                raise
        error = outcome.get("error")
        if error is not None:
            if isinstance(error, polling.Cancelled):  # only after our own cancel; not a result
                raise RuntimeError("a call was cancelled without its request being cancelled")
            raise error
        return outcome.get("value")

    # ------------------------------------------------------------------ SDK glue
    async def _list_tools_v1(self) -> list[types.Tool]:
        self._remember_session(getattr(self.server.request_context, "session", None))  # pyright: ignore[reportAttributeAccessIssue]
        return await self.list_tools()

    async def _call_tool_v1(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        ctx = self.server.request_context  # pyright: ignore[reportAttributeAccessIssue]
        meta = getattr(ctx, "meta", None)
        token = getattr(meta, "progressToken", None) if meta is not None else None
        self._remember_session(ctx.session)
        return await self.call_tool(name, arguments, ctx.session, token, getattr(ctx, "request_id", None))

    async def _on_list_tools_v2(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self._remember_session(ctx.session)
        return types.ListToolsResult(tools=await self.list_tools())

    async def _on_call_tool_v2(self, ctx: Any, params: Any) -> types.CallToolResult:
        meta = ctx.meta
        token = None
        if isinstance(meta, dict):
            token = meta.get("progress_token", meta.get("progressToken"))
        elif meta is not None:
            token = getattr(meta, "progress_token", None) or getattr(meta, "progressToken", None)
        self._remember_session(ctx.session)
        return await self.call_tool(params.name, params.arguments, ctx.session, token, ctx.request_id)

    async def _on_discover_v2(self, ctx: Any, params: Any) -> Any:
        """``server/discover``: the SDK's answer, without the ``logging`` capability where the
        negotiated version deprecates it (2026-07-28: log lines are a per-request opt-in
        there, and this server sends none on it)."""
        version = getattr(ctx, "protocol_version", None)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The logging capability is deprecated")
            capabilities = self.server.get_capabilities(  # pyright: ignore[reportCallIssue]
                NotificationOptions(tools_changed=self.eager), protocol_version=version)  # pyright: ignore[reportCallIssue]
        if version in SESSIONLESS_VERSIONS:
            capabilities.logging = None
        return types.DiscoverResult(supported_versions=sorted(SESSIONLESS_VERSIONS), capabilities=capabilities,  # pyright: ignore[reportAttributeAccessIssue]
                                    instructions=INSTRUCTIONS)

    async def _set_level_v1(self, level: Any) -> None:
        self._remember_session(getattr(self.server.request_context, "session", None))  # pyright: ignore[reportAttributeAccessIssue]
        self.logs.set_level(str(level))

    async def _on_set_level_v2(self, ctx: Any, params: Any) -> types.EmptyResult:
        self._remember_session(ctx.session)
        self.logs.set_level(str(params.level))
        return types.EmptyResult()

    def _remember_session(self, session: Any) -> None:
        if session is not None:
            self._session = session
            try:
                self._token = anyio.lowlevel.current_token()
            except RuntimeError:
                pass
            self.logs.forward_to(self)

    def send_log(self, level: str, logger: str, message: str) -> None:
        """One log line to the client (from the forwarder's thread, never the loop's)."""
        session, token = self._session, self._token
        if session is None or token is None:
            return
        anyio.from_thread.run(functools.partial(session.send_log_message, level=level, data=message, logger=logger),
                              token=token)

    async def run(self, read_stream: Any, write_stream: Any) -> None:
        self._token = anyio.lowlevel.current_token()
        async with anyio.create_task_group() as tasks:
            if self.eager:
                tasks.start_soon(self.eager_loop)
            await self.server.run(read_stream, write_stream, self.initialization_options())
            tasks.cancel_scope.cancel()
