"""Helpers for the game-side tests: the demo game as a real child process, and games
that break the contract in one deliberate way each (for ``check``).

Every process and thread started here is stopped by the context manager that started it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
import urllib.parse
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

from ports import free_port as free_port  # re-exported for the tests that take it from here

REPO = Path(__file__).resolve().parents[2]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GAME_BRIDGE_DEBUG_PORT", None)
    env.update(extra or {})
    return env


class DemoProcess:
    """A running ``python -m game_bridge_mcp.game.demo``: ``.port``, ``.proc``."""

    def __init__(self, proc: subprocess.Popen[str], port: int, banner: str) -> None:
        self.proc = proc
        self.port = port
        self.banner = banner

    def wait(self, timeout: float = 10.0) -> int:
        return self.proc.wait(timeout)


@contextmanager
def demo_process(*args: str, env: dict[str, str] | None = None,
                 timeout: float = 15.0) -> Iterator[DemoProcess]:
    """Start the demo on port 0 (unless args name one), read the bound port from its
    first line of output, and reap it afterwards whatever happened."""
    argv = [sys.executable, "-m", "game_bridge_mcp.game.demo", *args]
    if "--port" not in args:
        argv += ["--port", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(env), cwd=str(REPO))
    try:
        deadline = time.monotonic() + timeout
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError("the demo game printed nothing within the timeout")
        banner = proc.stdout.readline() if proc.stdout else ""
        if "serving on http://127.0.0.1:" not in banner:
            raise AssertionError(f"unexpected demo output {banner!r}; stderr: {proc.stderr.read() if proc.stderr else ''}")
        port = int(banner.rsplit(":", 1)[1].split()[0])
        assert time.monotonic() < deadline
        yield DemoProcess(proc, port, banner)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# --------------------------------------------------------------------------- a broken game

class BrokenGame:
    """A contract-speaking game with one knob per way of getting it wrong.

    ``health_ok`` (False: /health omits ``ok``), ``frame_backwards`` (each /health frame
    is lower than the last), ``completed_id`` (False: /state has no completedCommandId),
    ``accept_unknown`` (an unknown command is accepted silently), ``manifest`` (the
    /tools document; None answers 404), ``close_works`` (False: close is accepted but
    the game keeps serving), ``nan_state`` (``/state`` contains a bare NaN),
    ``host`` is the bind address. It has none of the kit's hardening.
    """

    def __init__(self, *, health_ok: bool = True, frame_backwards: bool = False,
                 completed_id: bool = True, accept_unknown: bool = False,
                 manifest: Any = None, close_works: bool = True, nan_state: bool = False,
                 hz: float = 500.0, host: str = "127.0.0.1", top_screen: bool = False) -> None:
        self.health_ok = health_ok
        self.top_screen = top_screen
        self.frame_backwards = frame_backwards
        self.completed_id = completed_id
        self.accept_unknown = accept_unknown
        self.manifest = manifest
        self.close_works = close_works
        self.nan_state = nan_state
        self.hz = hz
        self.frame = 1_000_000 if frame_backwards else 0
        self.completed = 0
        self.next_id = 0
        self.pending: list[tuple[int, str]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer((host, 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> "BrokenGame":
        for target in (self.server.serve_forever, self._loop):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(5)

    def _loop(self) -> None:
        while not self.stopping.wait(1.0 / self.hz):
            with self.lock:
                self.frame += -1 if self.frame_backwards else 1
                pending, self.pending = self.pending, []
            for command_id, cmd in pending:
                self.completed = command_id
                if cmd == "close" and self.close_works:
                    threading.Thread(target=self.stop, daemon=True).start()
                    return

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        game = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def send(self, status: int, payload: Any, raw: str | None = None) -> None:
                body = (raw if raw is not None else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/health":
                    body: dict[str, Any] = {"frame": game.frame}
                    if game.health_ok:
                        body["ok"] = True
                    self.send(200, body)
                elif url.path == "/state":
                    state: dict[str, Any] = ({"frame": game.frame, "screen": "GameScreen"} if game.top_screen
                                             else {"frame": game.frame, "ui": {"screen": "GameScreen"}})
                    if game.completed_id:
                        state["completedCommandId"] = game.completed
                    raw = json.dumps(state)[:-1] + ', "temperature": NaN}' if game.nan_state else None
                    self.send(200, state, raw)
                elif url.path == "/tools":
                    if game.manifest is None:
                        self.send(404, {"error": "no manifest"})
                    else:
                        self.send(200, game.manifest)
                elif url.path == "/command":
                    query = dict(urllib.parse.parse_qsl(url.query))
                    cmd = query.get("cmd", "")
                    if cmd not in ("noop", "close") and not game.accept_unknown:
                        self.send(400, {"accepted": False, "error": f"unknown command {cmd}",
                                        "commands": ["close", "noop"]})
                        return
                    with game.lock:
                        game.next_id += 1
                        command_id = game.next_id
                        game.pending.append((command_id, cmd))
                    self.send(200, {"accepted": True, "commandId": command_id, "frame": game.frame})
                else:
                    self.send(404, {"error": "not found"})

        return Handler
