"""``tools/call`` over stdio without the SDK's request machinery: a well-formed call after
initialization runs on a thread and writes the SDK's own answer line itself; anything else goes
to the SDK (docs/design.md, "The stdio server"). ``GAME_BRIDGE_SDK_DISPATCH=1`` turns it off."""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol

from ... import polling
from ..adapter import MAX_CALLS, BridgeServer
from ..results import call_result_chunks, error_result

log = logging.getLogger("game_bridge_mcp")

#: Protocol versions whose ``tools/call`` answer is known to be exactly what this module
#: writes (both SDK majors send the same fields for them over stdio).
KNOWN_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
DISABLE_ENV = "GAME_BRIDGE_SDK_DISPATCH"
#: Calls waiting for one of the ``MAX_CALLS`` places; while this many wait, no line is read.
MAX_QUEUED = 256

_Call = tuple[Any, str, dict[str, Any], Any, polling.CancelToken]


class LineSink(Protocol):
    def write_line(self, data: bytes | list[bytes]) -> None: ...


def _request_id(value: Any) -> bool:
    return (isinstance(value, str) or isinstance(value, int)) and not isinstance(value, bool)


class FastPath:
    """Takes ``tools/call`` lines off the SDK's hands (see the module docstring)."""

    def __init__(self, server: BridgeServer, sink: LineSink, *, max_calls: int = MAX_CALLS,
                 max_queued: int = MAX_QUEUED) -> None:
        self.server = server
        self.sink = sink
        self.max_calls = max_calls
        self.max_queued = max_queued
        self._queued: dict[Any, _Call] = {}  # waiting for a place, in arrival order
        self._version: str | None = None
        self._initialized = False
        #: Guards the calls running and queued (a plain lock, entered on every call); ``_ended``
        #: waits on it for the running calls to end, once ``close`` is waiting.
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)
        self._closing = False
        self._running: dict[Any, polling.CancelToken] = {}
        self._pool = ThreadPoolExecutor(max_workers=max_calls, thread_name_prefix="gb-call")
        #: Calls this path has answered (for tests and benchmarks).
        self.answered = 0

    # ------------------------------------------------------------------ the session
    @property
    def active(self) -> bool:
        return self._initialized and self._version in KNOWN_VERSIONS

    def outgoing(self, text: str) -> None:
        """Every line the SDK writes, until the session is known: the ``initialize``
        answer says which protocol version was agreed."""
        if self._version is not None or '"protocolVersion"' not in text:
            return
        try:
            message = json.loads(text)
        except ValueError:
            return
        result = message.get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict) or "serverInfo" not in result:
            return
        version = result.get("protocolVersion")
        if isinstance(version, str):
            self._version = version
            if version not in KNOWN_VERSIONS:
                log.info("protocol %s: every call goes through the SDK", version[:40])

    # ------------------------------------------------------------------ lines in
    def incoming(self, line: str) -> bool:
        """Called for every line read (a call taken here runs on a worker thread); True
        when it was handled here (the SDK never sees it)."""
        if '"tools/call"' in line:
            if not self.active:
                return False
            message = self._parse(line)
            return message is not None and self._start(message) is True
        if '"notifications/cancelled"' in line:
            message = self._parse(line)
            params = message.get("params") if message is not None else None
            if message is None or message.get("method") != "notifications/cancelled" or not isinstance(params, dict):
                return False
            ident = params.get("requestId")
            if not _request_id(ident):
                return False
            with self._lock:
                token = self._running.get(ident)
                waiting = self._queued.pop(ident, None)
            if waiting is not None:
                return True  # it never started: no answer, as for any cancelled call
            if token is None:
                return False  # one of the SDK's requests
            token.cancel()
            return True
        if not self._initialized and '"notifications/initialized"' in line:
            message = self._parse(line)
            if message is not None and message.get("method") == "notifications/initialized":
                self._initialized = True
        return False

    def take(self, line: str, here: Callable[[], bool]) -> bool | Callable[[], None]:
        """:meth:`incoming` for a thread that reads lines itself (``reader.py``): a call
        it takes is returned to run on that thread, once ``here()`` has agreed (it makes
        sure another thread reads on meanwhile); True for a line handled here, False for
        one the SDK gets."""
        if '"tools/call"' in line:
            if not self.active:
                return False
            message = self._parse(line)
            if message is None:
                return False
            return self._start(message, here)
        return self.incoming(line)

    @staticmethod
    def _parse(line: str) -> dict[str, Any] | None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return None
        return message if isinstance(message, dict) and message.get("jsonrpc") == "2.0" else None

    def _start(self, message: dict[str, Any],
               here: Callable[[], bool] | None = None) -> bool | Callable[[], None]:
        ident = message.get("id")
        params = message.get("params")
        if message.get("method") != "tools/call" or not _request_id(ident) or not isinstance(params, dict):
            return False
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return False
        if not (meta is None or isinstance(meta, dict)):
            return False
        progress_token = meta.get("progressToken") if meta else None
        if progress_token is not None and not _request_id(progress_token):
            return False
        token = polling.CancelToken()
        with self._lock:
            if ident in self._running or ident in self._queued:
                return False  # the SDK answers a duplicate id
            if len(self._running) >= self.max_calls:
                if len(self._queued) >= self.max_queued:
                    return False  # only when nothing holds the reader back (see full): the SDK queues it
                self._queued[ident] = (ident, name, arguments or {}, progress_token, token)
                return True  # a call that ends starts it
            if here is not None and not here():
                return False  # no thread can read on while it runs here
            self._running[ident] = token
        if here is not None:
            return lambda: self._run(ident, name, arguments or {}, progress_token, token)
        self._pool.submit(self._run, ident, name, arguments or {}, progress_token, token)
        return True

    @property
    def full(self) -> bool:
        """Whether the queue is full: the reader reads no more lines until it is not. (Asked
        before every line read: no lock, a dict's length is read whole.)"""
        return len(self._queued) >= self.max_queued

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queued)

    # ------------------------------------------------------------------ the call
    def _run(self, ident: Any, name: str, arguments: dict[str, Any], progress_token: Any,
             token: polling.CancelToken) -> None:
        """Run this call, then each queued call while there are any, on this thread."""
        call: _Call | None = (ident, name, arguments, progress_token, token)
        while call is not None:
            self._run_one(*call)
            with self._lock:
                call = None
                if self._queued and len(self._running) < self.max_calls:
                    call = self._queued.pop(next(iter(self._queued)))
                    self._running[call[0]] = call[4]

    def _run_one(self, ident: Any, name: str, arguments: dict[str, Any], progress_token: Any,
                 token: polling.CancelToken) -> None:
        try:
            line: list[bytes] | None = None
            with polling.cancel_scope(token):
                try:
                    polling.check_cancelled()
                    holder: list[Any] = [self.server.dispatch(name, arguments, self._progress(progress_token))]
                    line = call_result_chunks(ident, holder, (name, arguments))  # the value is let go once it is text
                except polling.Cancelled:
                    if not token.cancelled:  # not ours to swallow: report it as what it is
                        line = call_result_chunks(ident, [error_result(RuntimeError("the call was cancelled"))])
                except Exception as exc:  # every failure becomes a result; the server keeps serving
                    line = call_result_chunks(ident, [error_result(exc)])
            if line is not None and not token.cancelled:
                self.sink.write_line(line)
                self.answered += 1
                if self.answered == 1:
                    log.info("tools/call answered directly, without the SDK's dispatcher (protocol %s)", self._version)
        except Exception:
            log.exception("could not answer call %r", ident)
        finally:
            with self._lock:
                self._running.pop(ident, None)
                if self._closing:
                    self._ended.notify_all()

    def _progress(self, progress_token: Any) -> Callable[[float, float | None, str], None] | None:
        if progress_token is None:
            return None

        def progress(done: float, total: float | None, message: str) -> None:
            params: dict[str, Any] = {"progressToken": progress_token, "progress": float(done)}
            if total is not None:
                params["total"] = float(total)
            if message:
                params["message"] = message
            try:
                self.sink.write_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                                 "params": params}, ensure_ascii=False).encode("utf-8") + b"\n")
            except Exception:
                log.debug("progress notification failed", exc_info=True)

        return progress

    # ------------------------------------------------------------------ the end
    def close(self, timeout_s: float = 1.0) -> None:
        """Cancel what is still running and give it ``timeout_s`` to end (stdin closed)."""
        with self._lock:
            self._closing = True
            self._queued.clear()  # never started: nothing to wait for
            tokens = list(self._running.values())
        for token in tokens:
            token.cancel()
        with self._lock:
            self._ended.wait_for(lambda: not self._running, timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)
