"""The sessionless protocol versions over streamable HTTP (2026-07-28 on: no ``initialize``, no
``Mcp-Session-Id``, every request carrying its version and capabilities in ``_meta``): answered
by the SDK's own entry for them, on one Bridge that owns what sessionless requests launch, and
ends (stopping those instances) after the same idle time as a session (docs/http.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from ..adapter import BridgeServer
from .gate import Receive, Scope, Send

log = logging.getLogger("game_bridge_mcp")

#: Who owns what sessionless requests launch (a session's owner is its hex id: never this).
OWNER = "sessionless"


class Sessionless:
    """The Bridge that sessionless requests share, served through the SDK's
    ``StreamableHTTPSessionManager`` (stateless), made on the first such request."""

    def __init__(self, make_app: Callable[[str], BridgeServer], clock: Callable[[], float]) -> None:
        self._make_app = make_app
        self._clock = clock
        self.app: BridgeServer | None = None
        self._sdk: Any = None
        self._scope: anyio.CancelScope | None = None
        self._ended: anyio.Event | None = None
        self._starting = anyio.Lock()
        #: Sessionless requests in flight (counted by places.py), and when the last one ended.
        self.busy = 0
        self.last_used = clock()

    @property
    def running(self) -> bool:
        return self._sdk is not None

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        assert self.app is not None
        app = self.app
        sdk = StreamableHTTPSessionManager(app=app.server, stateless=True)
        ended = self._ended = anyio.Event()
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with sdk.run():
                    self._sdk = sdk
                    task_status.started()
                    await anyio.sleep_forever()
        finally:
            self._sdk = self._scope = None
            self.app = None
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(app.bridge.shutdown)  # what sessionless requests launched
                ended.set()
                log.info("sessionless requests: ended (their instances are stopped)")

    async def handle(self, tasks: anyio.abc.TaskGroup, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one sessionless request (its version checked by the caller)."""
        async with self._starting:
            if self._sdk is None:
                if self._ended is not None:
                    await self._ended.wait()  # the last one is still stopping its instances
                self.app = await anyio.to_thread.run_sync(self._make_app, OWNER)
                await tasks.start(self._serve)
                log.info("sessionless requests: serving them (protocol %s)", _version(scope))
        try:
            sdk: Any = self._sdk
            await sdk.handle_request(scope, receive, send)
        finally:
            self.last_used = self._clock()

    def idle_for(self, now: float) -> float:
        return 0.0 if self.busy or self._sdk is None else now - self.last_used

    def end(self) -> None:
        """Stop serving: what sessionless requests launched is stopped; the next one starts afresh."""
        if self._scope is not None:
            self._scope.cancel()

    async def ended(self) -> None:
        if self._ended is not None:
            with anyio.move_on_after(10):
                await self._ended.wait()


def _version(scope: Scope) -> str:
    for key, value in scope.get("headers", ()):
        if key == b"mcp-protocol-version":
            return bytes(value).decode("latin-1")[:40]
    return "?"
