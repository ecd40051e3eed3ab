#!/usr/bin/env python3
"""What the kit's HTTP server costs per request, against a bare standard-library server.

Each server runs in a child process of its own and answers ``GET /health`` with the same
small JSON body (so only the server differs):

* **bare**: ``http.server.ThreadingHTTPServer`` with a ``BaseHTTPRequestHandler`` that
  writes its answer in one send (the least a stdlib server does for keep-alive);
* **kit**: the kit's ``KitHttpServer`` (game_bridge_mcp/game/server/http.py) with one route;
* **kit game**: a whole kit game (``GameBridge``) at 60 Hz, its real ``/health``.

A client in this process sends the requests back to back: on one kept-alive connection,
and with a fresh connection per request. Figures: wall time per request (median of
blocks), and the server process's CPU time per request (its own process CPU clock),
blocks of the servers interleaved so the machine's noise falls on all alike. Then the
CPU that ``--games`` idle kit games use (no requests), and driven by a stream of
requests each.

    .venv/bin/python scripts/bench_kit_http.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import benchkit
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if sys.argv[1:2] != ["_serve"]:  # a server imports the kit its PYTHONPATH names (--before)
    sys.path.insert(0, str(ROOT))

BODY = b'{"ok":true,"frame":1,"completedCommandId":0}'
SERVERS = ("bare", "kit", "kit game")


def cpu_body() -> bytes:
    """This process's CPU time so far (every thread's, ended ones too: exact)."""
    return json.dumps({"cpu": time.process_time()}).encode()


def serve(kind: str) -> int:
    """A server of ``kind`` on port 0; prints its port, serves until stdin closes."""
    import threading

    if kind == "bare":
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                body = cpu_body() if self.path == "/cpu" else BODY
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)

            def log_message(self, *_args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
    elif kind == "kit":
        from game_bridge_mcp.game.server.http import KitHttpServer

        kit = KitHttpServer("127.0.0.1", 0, lambda path, query: (200, cpu_body() if path == "/cpu" else BODY))
        threading.Thread(target=kit.serve_forever, daemon=True).start()
        port = kit.server_address[1]
    else:
        from game_bridge_mcp.game import GameBridge

        game = GameBridge("HTTP bench", "1", state=lambda: {"game": {}}, register=False)
        game.add_route("/cpu", lambda query: (200, cpu_body()))
        port = game.start(0)
        threading.Thread(target=game.run, kwargs={"hz": 60.0}, daemon=True).start()
    print(f"PORT {port}", flush=True)
    sys.stdin.read()
    return 0


class Client:
    """A raw-socket client: one request at a time, the answer read whole."""

    def __init__(self, port: int, path: str = "/health") -> None:
        self.port = port
        self.request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n"
                        "User-Agent: bench\r\n\r\n").encode()
        self.sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def get(self, fresh: bool) -> bytes:
        sock = self._connect() if fresh or self.sock is None else self.sock
        sock.sendall(self.request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(65536)
        if fresh:
            sock.close()
        else:
            self.sock = sock
        return body


def cpu_s(port: int) -> float:
    """The server's CPU time so far (seconds), as it reports it (``/cpu``: its process CPU
    clock, exact and counting ended threads, where tick-sampled counts miss most of a
    server's short bursts)."""
    client = Client(port, "/cpu")
    data = client.get(True)
    return float(json.loads(data)["cpu"])


def measure(servers: dict[str, tuple[subprocess.Popen, int]], fresh: bool, blocks: int, per_block: int,
            rng: random.Random) -> dict[str, dict[str, float]]:
    clients = {name: Client(port) for name, (_proc, port) in servers.items()}
    wall: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    names = list(servers)
    for _ in range(blocks):
        rng.shuffle(names)
        for name in names:
            _proc, port = servers[name]
            client = clients[name]
            before_cpu = cpu_s(port)
            started = time.perf_counter()
            for _ in range(per_block):
                client.get(fresh)
            wall[name].append((time.perf_counter() - started) / per_block * 1e6)
            cpu[name].append((cpu_s(port) - before_cpu) / per_block * 1e6)
    return {name: {"wallUs": round(benchkit.median(wall[name]), 1),
                   "serverCpuUs": round(benchkit.median(cpu[name]), 1),
                   "cpuSpreadUs": round(max(cpu[name]) - min(cpu[name]), 1)} for name in servers}


def start(kind: str, root: Path = ROOT) -> tuple[subprocess.Popen, int]:
    """A server of ``kind`` in a child process, importing the kit from ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_serve", kind], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().split()
    if len(line) != 2 or line[0] != "PORT":
        proc.kill()
        raise RuntimeError(f"the {kind} server did not start")
    return proc, int(line[1])


def games_cpu(count: int, seconds: float, driven: bool, root: Path = ROOT) -> dict[str, float]:
    """CPU (in CPUs) that ``count`` kit games use over ``seconds``, idle or each answering
    a stream of /health requests (one client thread per game, 500 requests a second)."""
    import threading

    games = [start("kit game", root) for _ in range(count)]
    try:
        time.sleep(0.5)
        before = sum(cpu_s(port) for _, port in games)
        stop = threading.Event()
        served = [0]

        def drive(port: int) -> None:
            client = Client(port)
            while not stop.is_set():
                client.get(False)
                served[0] += 1
                time.sleep(0.002)

        threads = [threading.Thread(target=drive, args=(port,), daemon=True) for _, port in games] if driven else []
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join(5)
        used = sum(cpu_s(port) for _, port in games) - before
        return {"games": count, "cpus": round(used / seconds, 3), "requestsPerS": round(served[0] / seconds)}
    finally:
        for proc, _ in games:
            stop_process(proc)


def stop_process(proc: subprocess.Popen) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["_serve"]:
        return serve(argv[1])
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout whose kit is measured too, in the same run (before/after)")
    args = parser.parse_args(argv)
    blocks, per_block = (3, 50) if args.quick else (15, 2000)
    rng = random.Random(1)
    servers = {kind: start(kind) for kind in SERVERS}
    if args.before is not None:
        for kind in SERVERS[1:]:
            servers[f"{kind} (before)"] = start(kind, args.before.resolve())
    try:
        results: dict[str, Any] = {"machine": benchkit.machine()}
        measure(servers, False, 1, per_block, rng)  # warm up
        results["keptAlive"] = measure(servers, False, blocks, per_block, rng)
        results["freshConnection"] = measure(servers, True, max(2, blocks // 3), per_block // 2, rng)
    finally:
        for proc, _port in servers.values():
            stop_process(proc)
    count = 3 if args.quick else args.games
    roots = [("", ROOT)] + ([(" (before)", args.before.resolve())] if args.before is not None else [])
    for suffix, root in roots:
        results["idleGames" + suffix] = games_cpu(count, 1.0 if args.quick else 5.0, False, root)
        results["drivenGames" + suffix] = games_cpu(count, 1.0 if args.quick else 5.0, True, root)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"machine: {results['machine']}")
    print("| server | kept alive: wall / server CPU per request | fresh connection: wall / server CPU |")
    print("| --- | --- | --- |")
    for name in results["keptAlive"]:
        kept, fresh = results["keptAlive"][name], results["freshConnection"][name]
        print(f"| {name} | {kept['wallUs']:.0f} / {kept['serverCpuUs']:.0f} us | "
              f"{fresh['wallUs']:.0f} / {fresh['serverCpuUs']:.0f} us |")
    for suffix, _root in roots:
        idle, driven = results["idleGames" + suffix], results["drivenGames" + suffix]
        print(f"{idle['games']} kit games at 60 Hz{suffix}: {idle['cpus']:.2f} CPUs idle, {driven['cpus']:.2f} CPUs "
              f"answering {driven['requestsPerS']} requests/s between them "
              f"({driven['cpus'] / max(1, driven['requestsPerS']) * 1e6:.0f} us of CPU a request)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
