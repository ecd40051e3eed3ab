#!/usr/bin/env python3
"""A bounded soak of the real server: calls, launches, kills and cancellations for a fixed
time, then what it cost and whether anything was harmed.

    .venv/bin/python scripts/soak.py [--seconds 60] [--json]

What runs: the server (``python -m game_bridge_mcp``) over stdio in JSON-RPC lines, with
a ``gamebridge.json`` that launches the demo game. The loop, until the time is up:

* ``launch_instance``; a burst of ``call_tool`` (``get_state``, a move) and
  ``list_instances``;
* a cancellation: a ``wait_for`` that cannot come true, cancelled with
  ``notifications/cancelled`` after a few milliseconds;
* every fifth cycle, a flood of the game's own server: 300 connections that send half a
  request and then nothing, and 10 that send 99 headers of 64 KiB each; a fresh ``/health``
  must still answer within 5 s, the game must hold no more than its cap of 64 connections
  (threads and descriptors), grow by less than 40 MiB, and the bridge's next call to it
  must succeed;
* once, on the first cycle, the bridge's own bounds (``scripts/soak_bounds.py``): three
  concurrent screenshots of a small PNG declaring 16384 x 10900 pixels (refused from the
  header, the server's memory flat), a client that floods requests without reading and
  then closes stdin (back-pressure, then the server exits by itself), and a crafted 30 MB
  trace with a 4.3 MB line replayed with a report (bounded memory and time);
* an end, in turn: ``stop_instance``; the game SIGKILLed, then ``stop_instance``; and
  every so often the whole server SIGKILLed with its game running (its watcher must reap
  the game), and a new server started.

Foreign sentinels, started here and never through the bridge, must come out untouched:
a sleeper in this process group (the server's group too), one in a session of its own,
one carrying a launch marker that is not the bridge's, each noting every catchable signal
it gets; and a game-like HTTP server answering on a port of the declared range, which
must never be asked to ``close`` (nor anything else but reads).

Reported: per server, its resident memory, descriptors and threads after warm-up and at
the end; survivors (anything the bridge launched still running after the server went,
found by an environment token every launched process inherits); foreign processes harmed;
each flood's cost to the game and any bound it broke.
Exit status 1 when anything survived, was harmed, or a flood broke a bound.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak_bounds import bridge_bounds  # noqa: E402  (a sibling script)

ROOT = Path(__file__).resolve().parents[1]
TOKEN_KEY = "GB_SOAK_TOKEN"
#: A server is SIGKILLed (its watcher must reap its game) after running this long.
KILL_BRIDGE_EVERY_S = 20.0
#: Cycles run before the "after warm-up" sample is taken.
WARM_UP_CYCLES = 3
#: Every this many cycles the game's server is flooded (the second cycle first).
FLOOD_EVERY = 5
#: The kit's cap on open connections (game_bridge_mcp/game/server/http.py's MAX_CONNECTIONS).
KIT_CONNECTIONS = 64
SENTINEL = ("import signal, sys, time\n"
            "log = open(sys.argv[1], 'a', buffering=1)\n"
            "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCONT, signal.SIGUSR1, signal.SIGUSR2):\n"
            "    signal.signal(s, lambda n, f: log.write(f'{n}\\n'))\n"
            "while True: time.sleep(3600)\n")


class Server:
    """The bridge over stdio, spoken to in JSON-RPC lines; replies gathered by a thread."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp", "--no-scan"], cwd=workdir, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.ps = psutil.Process(self.proc.pid)
        self.next_id = 0
        self.replies: dict[int, "queue.Queue[dict]"] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "soak", "version": "0"}})
        self.notify("notifications/initialized")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            ident = message.get("id")
            with self.lock:
                box = self.replies.get(ident) if isinstance(ident, int) else None
            if box is not None:
                box.put(message)

    def _write(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def start(self, method: str, params: dict) -> int:
        with self.lock:
            self.next_id += 1
            ident = self.next_id
            self.replies[ident] = queue.Queue()
        self._write({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return ident

    def wait(self, ident: int, timeout_s: float = 60.0) -> dict:
        try:
            return self.replies[ident].get(timeout=timeout_s)
        finally:
            with self.lock:
                self.replies.pop(ident, None)

    def request(self, method: str, params: dict, timeout_s: float = 60.0) -> dict:
        return self.wait(self.start(method, params), timeout_s)

    def notify(self, method: str, params: dict | None = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def tool(self, name: str, arguments: dict, timeout_s: float = 60.0) -> dict:
        """A tool's structured answer (``{"error": ...}`` for an error result)."""
        reply = self.request("tools/call", {"name": name, "arguments": arguments}, timeout_s)
        result = reply.get("result") or {}
        if result.get("structuredContent") is not None:
            return dict(result["structuredContent"], isError=bool(result.get("isError")))
        texts = [c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"]
        try:
            return dict(json.loads(texts[0]), isError=bool(result.get("isError")))
        except (ValueError, IndexError, TypeError):
            return {"isError": True, "text": " ".join(texts), "reply": reply.get("error")}

    def sample(self) -> dict[str, float]:
        with self.ps.oneshot():
            return {"rssMiB": round(self.ps.memory_info().rss / 2**20, 1), "fds": self.ps.num_fds(),
                    "threads": self.ps.num_threads()}

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class ForeignGame:
    """A game-like server this script runs itself: the bridge may read it, never command it."""

    def __init__(self, port: int) -> None:
        self.commands: list[str] = []
        game = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/command"):
                    game.commands.append(self.path)
                body = json.dumps({"ok": True, "frame": 1, "completedCommandId": 0}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _health_ms(port: int, timeout_s: float) -> float | None:
    """A fresh ``GET /health``: milliseconds to a 200, or None."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    except OSError:
        return None
    return round((time.monotonic() - start) * 1000, 1) if data.startswith(b"HTTP/1.1 200") else None


def flood(port: int, pid: int) -> dict[str, Any]:
    """Half-sent and huge-header connections against a game's own server: what they
    cost it, and the bounds they broke (``broken``)."""
    game = psutil.Process(pid)
    threads, fds, rss = game.num_threads(), game.num_fds(), game.memory_info().rss
    socks: list[socket.socket] = []
    broken: list[str] = []
    peak = {"threads": threads, "fds": fds, "rss": rss}

    def sample() -> None:
        with game.oneshot():
            peak["threads"] = max(peak["threads"], game.num_threads())
            peak["fds"] = max(peak["fds"], game.num_fds())
            peak["rss"] = max(peak["rss"], game.memory_info().rss)

    try:
        for _ in range(300):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=2)
                socks.append(sock)
                sock.send(b"GET /health HTTP/1.1\r\nHost: 127.0")
            except OSError:
                pass
        sample()
        big = [socket.create_connection(("127.0.0.1", port), timeout=2) for _ in range(10)]
        socks += big
        pad = b"a" * (64 * 1024 - 16)
        for index in range(99):
            for sock in big:
                try:
                    sock.sendall(b"X-Pad-%02d: %s\r\n" % (index, pad))
                except OSError:  # refused and closed, as it should be
                    pass
        sample()
        health_ms = _health_ms(port, 5.0)
        sample()
    finally:
        for sock in socks:
            sock.close()
    if health_ms is None:
        broken.append("a fresh /health did not answer within 5 s")
    # (a few over the cap: a connection given way to a newer one ends on its own thread)
    if peak["threads"] > threads + KIT_CONNECTIONS + 8:
        broken.append(f"threads {threads} -> {peak['threads']}")
    if peak["fds"] > fds + KIT_CONNECTIONS + 8:
        broken.append(f"descriptors {fds} -> {peak['fds']}")
    if peak["rss"] - rss > 40 * 2**20:
        broken.append(f"memory {rss / 2**20:.0f} -> {peak['rss'] / 2**20:.0f} MiB")
    return {"healthMs": health_ms, "threads": [threads, peak["threads"]], "fds": [fds, peak["fds"]],
            "rssMiB": [round(rss / 2**20, 1), round(peak["rss"] / 2**20, 1)], "broken": broken}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launched_processes(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(TOKEN_KEY) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_gone(token: str, timeout_s: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = launched_processes(token)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def soak(seconds: float, kill_every_s: float = KILL_BRIDGE_EVERY_S, cycles: int | None = None) -> dict[str, Any]:
    """Soak for ``seconds``, or, with ``cycles``, for exactly that many launch cycles
    (whatever the machine's speed: what the test suite runs)."""
    work = Path(tempfile.mkdtemp(prefix="gb-soak-"))
    token = uuid.uuid4().hex
    base = free_port()
    low = max(20000, min(base, 60000))
    foreign_port = low  # the first port of the declared range is a stranger's
    (work / "gamebridge.json").write_text(json.dumps({"name": "Soak", "launch": {
        "argv": [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}", "--hz", "120",
                 "--no-register", "--start"],
        "portRange": f"{low}-{low + 15}", "readyTimeoutMs": 30000, "env": {"PYTHONPATH": str(ROOT)}}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(work / "home"), TOKEN_KEY: token}
    env.pop("GAME_BRIDGE_LAUNCH_ID", None)
    sentinel_env = {k: v for k, v in os.environ.items() if k != "GAME_BRIDGE_LAUNCH_ID"}
    sentinels: list[tuple[str, subprocess.Popen, float, Path]] = []
    for how in ("same group", "own session", "foreign marker"):
        log = work / f"sentinel-{len(sentinels)}.log"
        extra = {"GAME_BRIDGE_LAUNCH_ID": "not-this-bridge"} if how == "foreign marker" else {}
        proc = subprocess.Popen([sys.executable, "-c", SENTINEL, str(log)], env={**sentinel_env, **extra},
                                start_new_session=how == "own session")
        sentinels.append((how, proc, psutil.Process(proc.pid).create_time(), log))
    foreign = ForeignGame(foreign_port)

    counts = {"calls": 0, "launches": 0, "stops": 0, "gameKills": 0, "bridgeKills": 0, "cancellations": 0,
              "floods": 0, "errors": 0, "boundProbes": 0}
    floods: list[dict[str, Any]] = []
    bridge: dict[str, Any] = {"broken": []}
    servers: list[dict[str, Any]] = []
    survivors: list[str] = []
    end_at = time.monotonic() + seconds
    cycle = 0

    def more() -> bool:
        return cycle < cycles if cycles is not None else time.monotonic() < end_at

    while more():
        server = Server(work, env)
        born = time.monotonic()
        samples: list[dict[str, float]] = []
        ended_by = "stdin EOF"
        while more():
            cycle += 1
            launched = server.tool("launch_instance", {})
            if launched.get("isError") or "port" not in launched:
                counts["errors"] += 1
                continue
            counts["launches"] += 1
            port = launched["port"]
            for _index in range(20):
                answer = server.tool("call_tool", {"port": port, "name": "get_state"})
                counts["calls"] += 1
                counts["errors"] += bool(answer.get("isError"))
            server.tool("call_tool", {"port": port, "name": "drop", "arguments": {"x": 0.1 * (cycle % 9)}})
            server.tool("list_instances", {})
            counts["calls"] += 2
            if cycle % FLOOD_EVERY == 2 and "pid" in launched:
                floods.append(flood(port, int(launched["pid"])))
                counts["floods"] += 1
                after = server.tool("call_tool", {"port": port, "name": "get_state"})
                counts["calls"] += 1
                if after.get("isError"):
                    floods[-1]["broken"].append(f"the bridge's next call failed: {str(after)[:200]}")
            waiting = server.start("tools/call", {"name": "call_tool", "arguments": {
                "port": port, "name": "wait_for",
                "arguments": {"path": "game.noSuchField", "equals": 1, "timeoutMs": 1500}}})
            time.sleep(0.02)
            server.notify("notifications/cancelled", {"requestId": waiting, "reason": "soak"})
            counts["cancellations"] += 1
            if cycle == 1:
                bridge = bridge_bounds(server, work, env)
                counts["boundProbes"] += 1
            samples.append(server.sample())
            ending = cycle % 3
            if ending == 2 and time.monotonic() - born >= kill_every_s:  # the bridge dies with its game running
                server.proc.kill()
                server.proc.wait()
                counts["bridgeKills"] += 1
                ended_by = "SIGKILL"
                break
            if ending in (0, 2):
                server.tool("stop_instance", {"port": port})
                counts["stops"] += 1
            else:
                try:  # the game the bridge launched at this script's request
                    psutil.Process(int(launched["pid"])).kill()
                    counts["gameKills"] += 1
                except (psutil.Error, KeyError, ValueError):
                    pass
                server.tool("stop_instance", {"port": port})
                counts["stops"] += 1
        if ended_by == "stdin EOF":
            server.close()
        left = wait_gone(token, 10)
        survivors += [f"{p.pid} {' '.join(p.cmdline())[:80]} (after {ended_by})" for p in left]
        for stray in left:
            stray.kill()
        servers.append({"endedBy": ended_by, "cycles": len(samples),
                        "series": {k: [s[k] for s in samples] for k in (samples[0] if samples else {})},
                        "afterWarmUp": samples[min(WARM_UP_CYCLES, len(samples) - 1)] if samples else None,
                        "atEnd": samples[-1] if samples else None,
                        "peak": {k: max(s[k] for s in samples) for k in samples[0]} if samples else None})

    harmed = []
    for how, proc, ctime, log in sentinels:
        got = log.read_text().split() if log.exists() else []
        alive = proc.poll() is None and abs(psutil.Process(proc.pid).create_time() - ctime) < 0.01
        if not alive or got:
            harmed.append({"sentinel": how, "alive": alive, "signals": got})
        proc.kill()
        proc.wait()
    if foreign.commands:
        harmed.append({"sentinel": f"foreign game on port {foreign_port}", "commands": foreign.commands})
    foreign.server.shutdown()
    foreign.server.server_close()
    shutil.rmtree(work, ignore_errors=True)
    return {"seconds": seconds, "counts": counts, "servers": servers, "survivors": survivors,
            "foreignHarmed": harmed, "floods": floods, "bridgeBounds": bridge,
            "boundsBroken": [item for one in floods for item in one["broken"]] + bridge["broken"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--kill-bridge-every", type=float, default=KILL_BRIDGE_EVERY_S, metavar="S",
                        help="SIGKILL the server after it has run this long (default %(default)s)")
    parser.add_argument("--cycles", type=int, default=None, metavar="N",
                        help="run exactly N launch cycles instead of --seconds (the suite's bounded run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = soak(args.seconds, args.kill_bridge_every, args.cycles)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        c = report["counts"]
        print(f"soak {report['seconds']:.0f} s: {c['calls']} calls, {c['launches']} launches, {c['stops']} stops, "
              f"{c['gameKills']} games killed, {c['bridgeKills']} bridges killed, {c['cancellations']} "
              f"cancellations, {c['floods']} floods, {c['errors']} error answers")
        for index, server in enumerate(report["servers"]):
            print(f"  server {index + 1} ({server['cycles']} cycles, ended by {server['endedBy']}): "
                  f"after warm-up {server['afterWarmUp']}, at end {server['atEnd']}, peak {server['peak']}")
        print(f"survivors: {len(report['survivors'])} {report['survivors'] or ''}")
        print(f"foreign processes harmed: {len(report['foreignHarmed'])} {report['foreignHarmed'] or ''}")
        for one in report["floods"]:
            print(f"  flood: /health in {one['healthMs']} ms, game threads {one['threads']}, fds {one['fds']}, "
                  f"RSS {one['rssMiB']} MiB")
        if report["bridgeBounds"].get("screenshots"):
            b = report["bridgeBounds"]
            print(f"  bridge: 3 huge screenshots in {b['screenshots']['seconds']} s, server RSS "
                  f"{b['screenshots']['rssMiB']} MiB; unread flood: {b['flood']['taken']} requests taken, "
                  f"{b['flood']['rssMiB']} MiB, exit {b['flood']['exitSeconds']} s after stdin closed; "
                  f"{b['trace']['traceMB']} MB crafted trace replayed in {b['trace']['seconds']} s, "
                  f"peak {b['trace']['peakMiB']} MiB, report {b['trace']['reportMB']} MB")
        print(f"kit bounds broken: {len(report['boundsBroken'])} {report['boundsBroken'] or ''}")
    return 1 if report["survivors"] or report["foreignHarmed"] or report["boundsBroken"] else 0


if __name__ == "__main__":
    sys.exit(main())
