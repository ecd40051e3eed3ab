"""A fake game that speaks the contract, for tests: a threaded HTTP server on port 0
with a real game-loop thread and command queue, and a knob for each behaviour the
bridge must handle.

Commands are applied on the game thread only (``applied`` records the thread name), so
``/command`` is genuinely fire-and-forget, as in a real game.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

DEFAULT_MANIFEST: dict[str, Any] = {
    "game": {"name": "Fake Game", "version": "1.2.3", "protocol": 1},
    "toolsets": [
        {"name": "play", "description": "Drive the game the way a player does.",
         "tools": [
             {"name": "drop", "description": "Drop a piece at x.",
              "args": [{"name": "x", "type": "number", "description": "World x", "required": True}]},
             {"name": "spawn", "description": "Spawn a thing.", "command": "spawn_thing",
              "args": [{"name": "type", "type": "string"}, {"name": "name", "type": "string"}]},
         ]},
        {"name": "flow", "description": "Restart, seed, screenshots.",
         "tools": [
             {"name": "restart", "description": "Restart the round."},
             {"name": "set_seed", "description": "Seed the RNG.", "args": {"seed": {"type": "integer"}}},
             {"name": "screenshot", "description": "Queue a screenshot; it lands some frames later.", "sync": False},
         ]},
    ],
    "passthrough": {"description": "Anything else the debug bridge accepts.", "examples": ["add_score { n }"]},
}

Handler = Callable[[BaseHTTPRequestHandler], None]


class FakeGame:
    """A contract-speaking game. Use as a context manager; ``.port`` is the bound port."""

    def __init__(self, *, hz: float = 1000.0, manifest: Any = DEFAULT_MANIFEST,
                 publish_completed_id: bool = True, health_completed_id: bool = False,
                 command_ids: bool = True, apply: bool = True, apply_delay_frames: int = 0,
                 extra_commands: tuple[str, ...] = ("add_score", "hidden_cmd", "noop"),
                 padding_bytes: int = 0, screen: str = "GameScreen", start_frame: int = 0,
                 port: int = 0) -> None:
        self.hz = hz
        self.manifest = manifest
        self.publish_completed_id = publish_completed_id
        self.health_completed_id = health_completed_id
        self.command_ids = command_ids
        self.apply = apply
        self.apply_delay_frames = apply_delay_frames
        self.padding = "x" * padding_bytes
        self.overrides: dict[str, Handler] = {}
        self.requests: list[str] = []
        self.applied: list[tuple[str, dict[str, str], str]] = []
        self.frame = start_frame
        self.completed_id = 0
        self._next_id = 0
        self._queue: "queue.Queue[tuple[int, str, dict[str, str], int]]" = queue.Queue()
        self._pending: list[tuple[int, str, dict[str, str], int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.closed = threading.Event()
        self.game: dict[str, Any] = {"score": 0, "state": "RUNNING", "moving": 0, "seed": 0, "pieces": []}
        self.screenshots_pending = 0
        self.screenshots_taken = 0
        self.events: list[dict[str, str]] = []
        self.screen = screen
        known = set(extra_commands) | {"close"}
        if isinstance(manifest, dict):
            for ts in manifest.get("toolsets", []) if isinstance(manifest.get("toolsets"), list) else []:
                for tool in ts.get("tools", []):
                    if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                        known.add(tool.get("command") or tool["name"])
        self.known_commands = known
        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "FakeGame":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "FakeGame":
        for target in (lambda: self._server.serve_forever(poll_interval=0.01), self._loop):
            t = threading.Thread(target=target, daemon=True, name=f"fakegame-{self.port}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def restart_frames(self, frame: int = 0) -> None:
        """Pretend a new process took over: the frame counter goes backwards."""
        with self._lock:
            self.frame = frame
            self.completed_id = 0
            self._next_id = 0

    # ------------------------------------------------------------------ game loop
    def _loop(self) -> None:
        period = 1.0 / self.hz
        next_tick = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                self.frame += 1
                if self.game["moving"] > 0:
                    self.game["moving"] -= 1
                if self.screenshots_pending and self.frame % 3 == 0:
                    self.screenshots_pending -= 1
                    self.screenshots_taken += 1
                    self._event("screenshot:saved")
                while True:
                    try:
                        self._pending.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                ready = [c for c in self._pending if self.frame >= c[3]]
                self._pending = [c for c in self._pending if self.frame < c[3]]
                closing = False
                if self.apply:
                    for cid, cmd, args, _ in ready:
                        self._apply(cmd, args)
                        self.applied.append((cmd, args, threading.current_thread().name))
                        self.completed_id = max(self.completed_id, cid)
                        closing = closing or cmd == "close"
            if closing:
                self.closed.set()
                threading.Thread(target=self.stop, daemon=True).start()
                return
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_tick = time.monotonic()

    def _event(self, m: str) -> None:
        self.events.append({"m": m})
        del self.events[:-20]

    def _apply(self, cmd: str, args: dict[str, str]) -> None:
        g = self.game
        if cmd == "drop":
            g["score"] += 10
            g["moving"] = 5
            g["pieces"].append({"x": float(args.get("x", 0)), "kind": "cherry"})
            self._event(f"drop:{args.get('x')}")
        elif cmd == "add_score":
            g["score"] += int(args.get("n", 1))
            self._event("score:+" + args.get("n", "1"))
        elif cmd == "restart":
            g.update(score=0, pieces=[], state="RUNNING")
            self._event("restart")
        elif cmd == "set_seed":
            g["seed"] = int(args.get("seed", 0))
        elif cmd == "screenshot":
            self.screenshots_pending += 1
        elif cmd == "spawn_thing":
            self._event(f"spawn:{args.get('type')}:{args.get('name')}")

    # ------------------------------------------------------------------ HTTP
    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            state: dict[str, Any] = {"frame": self.frame, "simFrame": self.frame // 2}
            if self.publish_completed_id:
                state["completedCommandId"] = self.completed_id
            state.update({
                "paused": False,
                "ui": {"screen": self.screen,
                       "elements": [{"label": "Restart", "visible": True}, {"label": "Secret", "visible": False}]},
                "events": list(self.events),
                "game": copy.deepcopy(self.game),
                "screenshots": {"pending": self.screenshots_pending, "taken": self.screenshots_taken},
            })
            if self.padding:
                state["padding"] = self.padding
            return state

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        game = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def send_json(self, status: int, payload: Any) -> None:
                body = json.dumps(payload).encode()
                head = (f"HTTP/1.0 {status} X\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode()
                self.wfile.write(head + body)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                game.requests.append(url.path)
                override = game.overrides.get(url.path)
                if override is not None:
                    override(self)
                    return
                if url.path == "/health":
                    body: dict[str, Any] = {"ok": True, "frame": game.frame}
                    if game.health_completed_id:
                        body["completedCommandId"] = game.completed_id
                    self.send_json(200, body)
                elif url.path == "/state":
                    self.send_json(200, game.snapshot())
                elif url.path == "/tools":
                    if game.manifest is None:
                        self.send_json(404, {"error": "not found"})
                    else:
                        self.send_json(200, game.manifest)
                elif url.path == "/command":
                    query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
                    cmd = query.pop("cmd", "")
                    if cmd not in game.known_commands:
                        self.send_json(400, {"accepted": False, "error": f"unknown command: {cmd}",
                                             "commands": sorted(game.known_commands)})
                        return
                    with game._lock:
                        game._next_id += 1
                        cid = game._next_id
                        frame = game.frame
                    game._queue.put((cid, cmd, query, frame + 1 + game.apply_delay_frames))
                    answer: dict[str, Any] = {"accepted": True, "frame": frame}
                    if game.command_ids:
                        answer["commandId"] = cid
                    self.send_json(200, answer)
                else:
                    self.send_json(404, {"error": "not found"})

        return Handler


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.005) -> Any:
    """Poll ``predicate`` until it is truthy or the deadline passes (then fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
