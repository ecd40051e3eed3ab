"""The streamable HTTP transport (``--http [HOST:]PORT``): the bound socket, the door, the
sessions, uvicorn; run, with its signals and the one shutdown path, by ``serving.run``
(docs/http.md)."""

from __future__ import annotations

import contextlib
import gc
import logging
import socket
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import anyio.abc

from ...config import Config
from ...core.bridge import Bridge
from ...core.composites import Composite
from ...errors import BridgeUsageError
from ..adapter import BridgeServer
from ..stdio.fastpath import DISABLE_ENV
from .gate import MCP_PATH, Gate, allowed_hosts, is_loopback
from .guard import ConnectionGuard, guarded
from .owners import SharedLauncher
from ..serving import Transport, run
from .sessions import SessionManager
from .token import TokenFile, choose_token

log = logging.getLogger("game_bridge_mcp")

#: Connections and requests uvicorn admits at once before it answers 503 itself (a
#: backstop behind the gate's own caps).
CONNECTION_LIMIT = 2048
#: Seconds an idle kept-alive connection stays open.
KEEP_ALIVE_S = 15


class _EndedStreamNoise(logging.Filter):
    """1.x logs an error with a traceback for the notification stream it closes itself
    when a session is deleted; that is the session ending, not a failure."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.getMessage().startswith("Error in standalone SSE writer")
                    and isinstance(error, (anyio.ClosedResourceError, anyio.BrokenResourceError)))


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BridgeUsageError(f"--http {host}:{port}: {host!r} is not an address of this machine ({exc.strerror}).") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BridgeUsageError(f"--http could not listen on {host}:{port}: {exc.strerror or exc}. "
                               "Choose another port (0 lets the system pick a free one).") from None
    sock.set_inheritable(False)
    return sock


def _url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"


class HttpTransport(Transport):
    """MCP over streamable HTTP at ``--http [HOST:]PORT`` (docs/http.md)."""

    name = "http"

    def start(self) -> None:
        import uvicorn

        config = self.config
        logging.getLogger("mcp.server.streamable_http").addFilter(_EndedStreamNoise())
        assert config.http is not None
        host, port = config.http
        loopback = is_loopback(host)
        token, generated = choose_token(config.environ, loopback=loopback)
        self._sock = sock = _bind(host, port)
        bound = int(sock.getsockname()[1])
        # written once the port is ours: a server that fails to bind leaves every other's file alone
        self.token_file = TokenFile(config.environ, config.registry_dir)
        token_file = self.token_file.write(bound, token) if generated else None
        from ...launch.launcher import Launcher

        shared = self.shared = SharedLauncher(lambda: Launcher(config))
        composites = self.composites

        def make_app(session: str) -> BridgeServer:
            return BridgeServer(Bridge(config, launcher=shared.view(session), composites=composites))

        self.manager = SessionManager(make_app, max_sessions=config.max_sessions, idle_s=config.session_idle_s,
                                      fast=config.environ.get(DISABLE_ENV) != "1")
        gate = Gate(self.manager, token=token, hosts=allowed_hosts(host, bound), names=config.allow_hosts)
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        self.guard = ConnectionGuard()  # connections without an authenticated request: a deadline and a cap
        gate.on_authorised = self.guard.authorised
        self._server = _QuietServer(uvicorn.Config(
            gate, http=guarded(AutoHTTPProtocol, self.guard),
            lifespan="off", log_config=None, access_log=False, ws="none", proxy_headers=False,
            server_header=False, limit_concurrency=CONNECTION_LIMIT, timeout_keep_alive=KEEP_ALIVE_S,
            timeout_graceful_shutdown=2))

        err = sys.stderr
        if token_file is not None:
            err.write(f"game-bridge-mcp: bearer token for this server (also in {token_file}, mode 0600): {token}\n")
        elif generated:
            err.write(f"game-bridge-mcp: bearer token for this server (not saved: no private directory): {token}\n")
        if not loopback:
            err.write(f"game-bridge-mcp: warning: listening on {host}, beyond this machine. HTTP is not encrypted: "
                      "the token and every answer cross the network in clear unless a TLS proxy is in front "
                      "(see docs/http.md, 'TLS in front').\n")
        err.write(f"game-bridge-mcp: serving MCP over streamable HTTP at {_url(host, bound)} "
                  f"(sessions: at most {config.max_sessions}, ended after {config.session_idle_s / 60:g} min idle)\n")
        err.flush()

    async def serve(self, tasks: anyio.abc.TaskGroup) -> None:
        await tasks.start(self.manager.run)
        gc.freeze()  # the start-up heap (the SDK, its schemas) stays out of the collector's passes
        await self._server.serve(sockets=[self._sock])

    def shutdown(self) -> None:
        shared = getattr(self, "shared", None)
        try:
            if shared is not None:
                shared.shutdown()  # every session's instances, and the sessionless requests'
        finally:
            token_file = getattr(self, "token_file", None)
            if token_file is not None:
                token_file.remove()


def start_http_server(config: Config, *, composites: Sequence[Composite] = ()) -> int:
    """Serve over streamable HTTP until SIGINT/SIGTERM/SIGHUP, then stop every launched
    instance and end the process (exit code 128 + the signal number)."""
    return run(HttpTransport(config, composites=composites))


TRANSPORT = HttpTransport


class _QuietServer:
    """uvicorn's Server without its signal handling (ours is the one shutdown path)."""

    def __new__(cls, config: Any) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

            def install_signal_handlers(self) -> None:  # older uvicorn
                return None

        return Server(config)
