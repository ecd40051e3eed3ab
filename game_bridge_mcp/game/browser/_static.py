"""A local game's files served read-only over loopback HTTP, for the browser to load (a page
opened from ``file://`` cannot load modules or fetch its assets)."""

from __future__ import annotations

import http.server
import logging
import os
import threading
from functools import partial
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm",
         ".json": "application/json", ".svg": "image/svg+xml", ".webp": "image/webp",
         ".ogg": "audio/ogg", ".mp3": "audio/mpeg", ".wav": "audio/wav", ".glb": "model/gltf-binary",
         ".gltf": "model/gltf+json", ".css": "text/css", ".html": "text/html", ".htm": "text/html"}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **TYPES}
    root: Path

    def __init__(self, *args: Any, root: Path, **kwargs: Any) -> None:
        self.root = root
        super().__init__(*args, directory=str(root), **kwargs)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        log.debug("static: " + format, *args)

    def _allowed(self) -> bool:
        host = self.headers.get("Host") or ""
        host = host[: host.find("]") + 1] if host.startswith("[") else host.split(":", 1)[0]
        if host not in LOOPBACK_HOSTS:
            self.send_error(403, "only loopback names are served")
            return False
        target = Path(self.translate_path(self.path))
        try:
            resolved = target.resolve()
        except OSError:
            self.send_error(404)
            return False
        if resolved != self.root and self.root not in resolved.parents:
            self.send_error(404, "outside the served directory")
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path.split("?")[0] == "/favicon.ico" and not (self.root / "favicon.ico").is_file():
            self.send_response(204)  # the browser asks for it: no console error for its absence
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self._allowed():
            super().do_GET()

    def do_HEAD(self) -> None:  # noqa: N802 - the stdlib's name
        if self._allowed():
            super().do_HEAD()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


class StaticServer:
    """Serves ``root`` on ``127.0.0.1:<free port>`` from a daemon thread until stopped."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        handler = partial(_Handler, root=self.root)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="game-bridge-static",
                                        daemon=True)
        self._thread.start()

    def url(self, relative: str = "") -> str:
        path = "/".join(part for part in relative.replace(os.sep, "/").split("/") if part)
        return f"http://127.0.0.1:{self.port}/{path}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
