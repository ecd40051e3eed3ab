"""A real ``game-bridge-mcp --http`` server in a subprocess on a port the system chose,
and plain HTTP requests to it (for what the SDK's client will not send: bad tokens,
foreign hosts, broken bodies)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from launch_helpers import ProcessGuard, wait_until

ROOT = Path(__file__).resolve().parents[2]
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw-test", "version": "1"}}}


class HttpServer:
    """``game-bridge-mcp --http 127.0.0.1:0 ...``; its stderr is collected in ``lines``."""

    def __init__(self, tmp_path: Path, guard: ProcessGuard, declaration: Path | None, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.home = tmp_path / "home"
        environ = dict(guard.env)
        environ["GAME_BRIDGE_HOME"] = str(self.home)
        environ.pop("GAME_BRIDGE_TOKEN", None)
        environ.update(env or {})
        command = [sys.executable, "-m", "game_bridge_mcp", "--http", "127.0.0.1:0", "--scan-range", "1", *args]
        if declaration is not None:
            command += ["--config", str(declaration)]
        self.proc = subprocess.Popen(command, env=environ, cwd=str(ROOT), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        threading.Thread(target=self._collect, daemon=True).start()
        found = wait_until(lambda: next((ln for ln in self.lines if "serving MCP over streamable HTTP at" in ln), None)
                           or self.proc.poll() is not None, 30)
        if not isinstance(found, str):
            self.stop()
            raise AssertionError("the server did not start:\n" + "".join(self.lines))
        self.url = found.split(" at ", 1)[1].split()[0]
        parsed = urlparse(self.url)
        self.host, self.port = str(parsed.hostname), int(parsed.port or 0)
        token = environ.get("GAME_BRIDGE_TOKEN")
        self.token = token or (self.home / "http" / f"token-{self.port}").read_text().split("\n")[0].strip()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", "replace"))

    def stderr(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return int(self.proc.returncode)

    # ------------------------------------------------------------------ raw requests
    def request(self, method: str, body: Any = None, *, token: str | None | bool = True, headers: dict[str, str] | None = None,
                path: str = "/mcp", raw: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        sent: dict[str, str] = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if token is True:
            sent["Authorization"] = f"Bearer {self.token}"
        elif isinstance(token, str):
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        sent = {k: v for k, v in sent.items() if v is not None}
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def open_session(self) -> str:
        """A session opened by hand (initialize, then initialized): its id."""
        status, headers, _body = self.request("POST", INITIALIZE)
        assert status == 200, status
        session = headers["mcp-session-id"]
        status, _h, _b = self.request("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                                      headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        assert status == 202, status
        return session


def answer_messages(body: bytes) -> list[Any]:
    """The JSON-RPC messages of a POST's answer: one JSON body (a plain tools/call's) or
    the events of an SSE stream (the transport may answer either way)."""
    if body.lstrip()[:1] in (b"{", b"["):
        doc = json.loads(body)
        return doc if isinstance(doc, list) else [doc]
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith(b"data:") and line[5:].strip()]


def game_processes(guard: ProcessGuard) -> list[Any]:
    return guard.recorded()


def until(predicate: Any, timeout_s: float = 20.0) -> Any:
    return wait_until(predicate, timeout_s, 0.05)


def now() -> float:
    return time.monotonic()


__all__ = ["HttpServer", "answer_messages", "game_processes", "until", "now", "os"]
