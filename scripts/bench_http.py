#!/usr/bin/env python3
"""What serving over streamable HTTP (``--http``) costs, against stdio, in one run.

Against real processes started and reaped here (1 kHz benchmark games, ``bench.py
_game``):

* **a confirmed call_tool**: the same ``tools/call call_tool`` over stdio and over HTTP
  (one kept-alive connection on a bare socket, a JSON-RPC POST, its answer read whole),
  each through its fast path (the default) and through the SDK's dispatch
  (``GAME_BRIDGE_SDK_DISPATCH=1``), interleaved round by round and paired; what HTTP adds
  over stdio is its cost (the target: under 1 ms between the fast paths). The SDK's own
  HTTP client is timed too (its client side is part of what an agent pays, not the
  server's).
* **8 sessions at once against 8 games**: each session drives its own game from a thread
  of its own; per-call median and p95 against one session alone on the same server, and
  the calls per second of all of them against one stdio session driving the same 8 games
  (8 calls in flight at a time).
* **memory per idle session**: the server's resident set before and after opening
  sessions that then sit idle, per session, and after they end (DELETE).

    .venv/bin/python scripts/bench_http.py [--calls 300] [--sessions 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench  # noqa: E402  (puts the checkout on sys.path)
import benchkit  # noqa: E402
from bench_clients import TOOL, FloorClient, Procs, StdioServer  # noqa: E402

PROTOCOL = "2025-06-18"


class HttpServer:
    """``python -m game_bridge_mcp --http 127.0.0.1:0`` as a child process."""

    def __init__(self, procs: Procs, port: int, *, env: dict[str, str], cwd: str) -> None:
        self.token = "bench-token-" + "x" * 24
        self.proc = procs.add(subprocess.Popen(
            [sys.executable, "-m", "game_bridge_mcp", "--http", "127.0.0.1:0", "--port", str(port), "--no-scan",
             "--no-registry", "--max-sessions", "64"],
            cwd=cwd, env={**env, "GAME_BRIDGE_TOKEN": self.token}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode()
            if not line:
                raise RuntimeError("the HTTP server exited before serving")
            if "serving MCP over streamable HTTP at" in line:
                self.url = line.split(" at ", 1)[1].split()[0]
                break
        else:
            raise RuntimeError("the HTTP server did not start")
        threading.Thread(target=self._drain, daemon=True).start()
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _line in self.proc.stderr:
            pass

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / (1024 * 1024)


class Connection:
    """One kept-alive HTTP/1.1 connection on a bare socket: a request written in one send,
    the answer read by its ``Content-Length`` or its chunks (as lean as the bare pipe the
    stdio client writes to; ``http.client`` parses every header with ``email``)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._fill()
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def request(self, method: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
        head = f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()) + f"Content-Length: {len(body)}\r\n\r\n"
        self.sock.sendall(head.encode("latin-1") + body)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        raw, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        found = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            found[name.strip().lower()] = value.strip()
        if "content-length" in found:
            return status, found, self._take(int(found["content-length"]))
        chunks = []
        while found.get("transfer-encoding") == "chunked":
            size = int(self._line().split(b";")[0], 16)
            chunks.append(self._take(size))
            self._take(2)
            if size == 0:
                break
        return status, found, b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


class RawSession:
    """One MCP session over one kept-alive connection (:class:`Connection`): a POST per
    request, its answer read whole (one JSON body, or an SSE stream)."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.connection = Connection(server.port)
        self.headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.next_id = 0
        #: The Content-Type of the last answer (application/json: the fast path's).
        self.answered_as = ""
        status, headers, _body = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                            "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                                                       "clientInfo": {"name": "bench", "version": "0"}}})
        if status != 200:
            raise RuntimeError(f"initialize answered {status}")
        self.headers.update({"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        return self.connection.request("POST", self.headers, json.dumps(message).encode())

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        status, headers, body = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if status != 200:
            raise RuntimeError(f"{method} answered {status}")
        self.answered_as = headers.get("content-type", "")
        if self.answered_as.startswith("application/json"):  # one JSON body (a plain tools/call)
            data = [json.loads(body)]
        else:
            data = [json.loads(line[5:]) for line in body.splitlines() if line.startswith(b"data:") and line[5:].strip()]
        return next(m for m in data if m.get("id") == self.next_id)

    def call(self, port: int) -> None:
        StdioServer.check(self.request("tools/call", {"name": "call_tool",
                                                      "arguments": {"port": port, "name": TOOL}}))

    def close(self) -> None:
        try:
            self.connection.request("DELETE", self.headers)
        finally:
            self.connection.close()


class SdkSession:
    """The SDK's own streamable-HTTP client (game_bridge_mcp.mcp_server.http.remote.connect),
    kept open in a thread of its own; :meth:`call` is one tool call through it."""

    def __init__(self, server: HttpServer) -> None:
        import anyio.from_thread

        from game_bridge_mcp.mcp_server.http.remote import connect

        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._session_cm = self.portal.wrap_async_context_manager(connect(server.url, server.token))
        self.session = self._session_cm.__enter__()

    def call(self, port: int) -> None:
        result = self.portal.call(self.session.call_tool, "call_tool", {"port": port, "name": TOOL})
        if getattr(result, "is_error", None) or getattr(result, "isError", None):
            raise RuntimeError(result.content[0].text)

    def close(self) -> None:
        try:
            self._session_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)


def rounds(modes: dict[str, Callable[[], Any]], calls: int, rng: random.Random) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in modes}
    names = list(modes)
    for _ in range(calls):
        rng.shuffle(names)
        for name in names:
            started = time.perf_counter()
            modes[name]()
            times[name].append((time.perf_counter() - started) * 1000)
    return times


#: What HTTP may add over stdio's fast path for a confirmed call, median of pairs (ms).
TARGET_OVER_STDIO_MS = 1.0


def one_call(server: HttpServer, sdk_server: HttpServer, stdio: StdioServer, sdk_stdio: StdioServer, port: int,
             calls: int, rng: random.Random) -> dict[str, Any]:
    raw = RawSession(server)
    raw_sdk = RawSession(sdk_server)
    sdk = SdkSession(server)
    try:
        floor = FloorClient(port)
        modes: dict[str, Callable[[], Any]] = {
            "floor (the game, no bridge)": floor.poll,
            "stdio, fast path": lambda: stdio.call(port),
            "stdio, SDK dispatch": lambda: sdk_stdio.call(port),
            "HTTP, fast path": lambda: raw.call(port),
            "HTTP, SDK dispatch": lambda: raw_sdk.call(port),
            "HTTP, the SDK's client": lambda: sdk.call(port)}
        rounds(modes, max(5, calls // 10), rng)  # warm: manifests, features, caches
        times = rounds(modes, calls, rng)
        floor.close()
        answered_as = {"HTTP, fast path": raw.answered_as, "HTTP, SDK dispatch": raw_sdk.answered_as}
    finally:
        raw.close()
        raw_sdk.close()
        sdk.close()
    out: dict[str, Any] = {name: benchkit.summary(values) for name, values in times.items()}
    out["answered as"] = answered_as
    over = benchkit.paired(times["HTTP, fast path"], times["stdio, fast path"])
    out["HTTP over stdio, both fast paths (paired)"] = over
    out["HTTP over stdio, both through the SDK's dispatch (paired)"] = benchkit.paired(
        times["HTTP, SDK dispatch"], times["stdio, SDK dispatch"])
    out["HTTP fast path over HTTP SDK dispatch (paired)"] = benchkit.paired(
        times["HTTP, fast path"], times["HTTP, SDK dispatch"])
    out["target"] = {"HTTP over stdio's fast path, median of pairs (ms)": over["median"],
                     "under (ms)": TARGET_OVER_STDIO_MS, "met": over["median"] < TARGET_OVER_STDIO_MS}
    return out


def many_sessions(server: HttpServer, stdio: StdioServer, ports: Sequence[int], calls: int) -> dict[str, Any]:
    stdio.call_many(ports)  # warm
    started = time.perf_counter()
    for _ in range(calls):
        stdio.call_many(ports)  # the same 8 games from one stdio session, 8 calls pipelined at a time
    stdio_rate = round(len(ports) * calls / (time.perf_counter() - started), 1)
    sessions = [RawSession(server) for _ in ports]
    try:
        for session, port in zip(sessions, ports):
            session.call(port)  # warm
        alone: list[float] = []
        for _ in range(calls):
            started = time.perf_counter()
            sessions[0].call(ports[0])
            alone.append((time.perf_counter() - started) * 1000)
        together: list[list[float]] = [[] for _ in ports]
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(ports))

        def drive(index: int) -> None:
            try:
                barrier.wait()
                for _ in range(calls):
                    started = time.perf_counter()
                    sessions[index].call(ports[index])
                    together[index].append((time.perf_counter() - started) * 1000)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(len(ports))]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        if errors:
            raise RuntimeError(f"a session failed: {errors[0]!r}")
        every = [t for sample in together for t in sample]
        return {"one session alone": benchkit.summary(alone),
                f"{len(ports)} sessions at once, every call": benchkit.summary(every),
                "calls per second, all sessions": round(len(every) / wall, 1),
                "calls per second, one stdio session driving the 8 games": stdio_rate,
                "median at once over alone": round(benchkit.median(every) / benchkit.median(alone), 2)}
    finally:
        for session in sessions:
            session.close()


def idle_memory(server: HttpServer, port: int, count: int) -> dict[str, Any]:
    warm = RawSession(server)
    warm.call(port)
    warm.close()
    time.sleep(0.5)
    before = server.rss_mb()
    sessions = [RawSession(server) for _ in range(count)]
    for session in sessions:
        session.request("tools/list", {})
    time.sleep(0.5)
    during = server.rss_mb()
    for session in sessions:
        session.close()
    time.sleep(0.5)
    after = server.rss_mb()
    return {"sessions": count, "rss before (MB)": round(before, 1), "rss with them idle (MB)": round(during, 1),
            "per idle session (KB)": round((during - before) * 1024 / count, 1),
            "rss after they ended (MB)": round(after, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="rounds per figure (default 300)")
    parser.add_argument("--sessions", type=int, default=16, help="idle sessions for the memory figure (default 16)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    bench.HOME = tempfile.mkdtemp(prefix="gb-bench-http-")
    procs = Procs()
    results: dict[str, Any] = {"machine": bench.machine(sys.executable), "calls": args.calls}
    try:
        ports = bench.start_games(procs, [{"hz": 1000.0} for _ in range(8)])
        env = bench.child_env()
        env.pop("GAME_BRIDGE_TOKEN", None)
        stdio = StdioServer(procs, ports[0], sys.executable, cwd=bench.HOME, env=env)
        sdk_stdio = StdioServer(procs, ports[0], sys.executable, cwd=bench.HOME,
                                env={**env, "GAME_BRIDGE_SDK_DISPATCH": "1"})
        for server in (stdio, sdk_stdio):
            server.initialize()
        http_server = HttpServer(procs, ports[0], env=env, cwd=bench.HOME)
        sdk_http = HttpServer(procs, ports[0], env={**env, "GAME_BRIDGE_SDK_DISPATCH": "1"}, cwd=bench.HOME)
        results["a confirmed call_tool, 1 kHz game (ms)"] = one_call(http_server, sdk_http, stdio, sdk_stdio, ports[0],
                                                                     args.calls, rng)
        results["8 sessions against 8 games (ms)"] = many_sessions(http_server, stdio, ports,
                                                                     max(10, args.calls // 3))
        results["memory"] = idle_memory(http_server, ports[0], args.sessions)
    finally:
        procs.reap_all()
        shutil.rmtree(bench.HOME, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"machine: {results['machine']}; {args.calls} rounds a figure")
    for section, entry in results.items():
        if section in ("machine", "calls"):
            continue
        print(f"\n{section}")
        for name, value in entry.items():
            print(f"  {name:<52} {value}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
