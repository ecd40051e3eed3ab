"""The kit's server thread and registry entry, started and stopped together: the entry is
written only after the port is bound and removed before the port goes quiet."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from ...contract import PROTOCOL
from ..server.http import KitHttpServer, PostRoute, Route

log = logging.getLogger(__name__)


class Serving:
    """The HTTP server for one game, and its registry entry."""

    def __init__(self, host: str, route: Route) -> None:
        self.host = host
        self._route = route
        self.server: KitHttpServer | None = None
        #: Where the server takes a POST (``snapshot``'s bytes; None: nowhere).
        self.posts: PostRoute | None = None
        self._thread: threading.Thread | None = None
        self.registration: Any = None

    @property
    def port(self) -> int | None:
        return None if self.server is None else int(self.server.server_address[1])

    def start(self, port: int, *, register: bool, name: str, version: str,
              environ: Mapping[str, str] | None) -> int:
        if self.server is not None:
            raise RuntimeError("this GameBridge is already started")
        server = KitHttpServer(self.host, int(port or 0), self._route)
        server.posts = self.posts
        self.server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"game-bridge-http-{self.port}", daemon=True)
        self._thread.start()
        if register:
            self.registration = self._write_entry(name, version, environ)
        return int(self.port or 0)

    def _write_entry(self, name: str, version: str, environ: Mapping[str, str] | None) -> Any:
        try:
            from ...registry.writer import register_instance
        except Exception as exc:  # a vendored kit without the registry still serves
            log.debug("game-bridge kit: no registry writer (%s); not registering", exc)
            return None
        try:
            return register_instance(port=int(self.port or 0), name=name, version=version,
                                     protocol=PROTOCOL, host=self.host, environ=environ)
        except Exception as exc:  # never let advertising break the game
            log.warning("game-bridge kit: could not register the instance: %s", exc)
            return None

    def stop(self) -> None:
        """Remove the entry, stop serving, close open connections (once)."""
        registration, self.registration = self.registration, None
        if registration is not None:
            try:
                registration.remove()
            except Exception:  # pragma: no cover - Registration.remove never raises
                log.debug("could not remove the registry entry", exc_info=True)
        server = self.server
        if server is not None:
            server.shutdown()
            server.server_close()
            server.close_connections()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
