#!/usr/bin/env python3
"""What a confirmed command costs through the bridge, against the floor set by loopback
HTTP and the game's own frame.

Every figure is measured in one run against real processes (games and servers started
here and reaped here), and the modes are interleaved call by call, so the ratios hold
on a noisy machine even when the times drift:

* **latency**: a fast game (1 kHz loop) and a 60 Hz one, each call started at a random
  point of the frame. ``floor`` is plain ``urllib``: ``/command``, then ``/state``
  polled back to back until ``completedCommandId`` reaches the command, in this
  process. ``bridge`` is ``Bridge(config).run_tool("call_tool", ...)`` in this process.
  ``stdio`` is ``tools/call call_tool`` through the real server
  (``python -m game_bridge_mcp --port N --no-scan --no-registry``) in JSON-RPC lines.
* **sizes**: ``/state`` of about 1 KB, 1 MB and 10 MB, on a game that publishes
  ``completedCommandId`` in ``/health`` (the kit) and one that does not: time, and
  requests, bytes and ``/state`` fetches per confirmed call, counted by the game.
* **instances**: 20 games at 60 Hz driven at once from one Bridge (a thread each),
  per-call median against one instance driven alone; and several threads calling one
  instance at once, which must be serialised (the game counts commands applied in one
  frame: serialised calls never share a frame).
* **start-up**: process start to the ``initialize`` answer, the bridge against bare
  SDK servers with the same number of tools (7), low-level and high-level API.
* **memory**: the server's resident set idle and after driving 20 instances.

    .venv/bin/python scripts/bench.py [--quick] [--json] [--calls N] [--server-python PY]

The benchmark game is the kit (``game_bridge_mcp.game.kit``) run by this script as a
child process (``bench.py _game --hz 60 --state-kb 1024 [--plain-health]``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOOL = "step"  # the benchmark game's one command: a manifest tool, applied on the next frame


# =========================================================================== the game

def serve_game(argv: Sequence[str]) -> int:
    """The benchmark game: the kit, one listed command, padding in ``/state``, and a
    ``/bench-stats`` endpoint with what it served (requests and bytes per path)."""
    from game_bridge_mcp.game._http import json_bytes
    from game_bridge_mcp.game.demo import padding_json
    from game_bridge_mcp.game.kit import GameBridge

    parser = argparse.ArgumentParser(prog="bench.py _game")
    parser.add_argument("--hz", type=float, default=60.0)
    parser.add_argument("--state-kb", type=int, default=0)
    parser.add_argument("--plain-health", action="store_true",
                        help="leave completedCommandId out of /health (a game without the extension)")
    args = parser.parse_args(argv)
    padding = padding_json(args.state_kb)
    served: dict[str, list[int]] = {}
    served_lock = threading.Lock()
    world = {"counter": 0, "lastFrame": -1, "run": 0, "maxPerFrame": 0}

    class BenchGame(GameBridge):
        def health(self) -> dict[str, Any]:
            doc = super().health()
            if args.plain_health:
                doc.pop("completedCommandId", None)
            return doc

        def _route(self, path: str, query: str) -> tuple[int, bytes]:
            if path == "/bench-stats":
                with served_lock:
                    return 200, json_bytes({"ok": True, "served": served})
            status, body = super()._route(path, query)
            with served_lock:
                entry = served.setdefault(path, [0, 0])
                entry[0] += 1
                entry[1] += len(body)
            return status, body

    def state() -> dict[str, Any]:
        doc: dict[str, Any] = {"game": {"counter": world["counter"], "maxPerFrame": world["maxPerFrame"]}}
        if padding is not None:
            doc["padding"] = padding
        return doc

    game = BenchGame("Bench Game", "1", state=state, register=False)

    @game.command(toolset="play")
    def step() -> None:
        """Advance the counter by one (a benchmark probe)."""
        world["counter"] += 1
        world["run"] = world["run"] + 1 if world["lastFrame"] == game.frame else 1
        world["lastFrame"] = game.frame
        world["maxPerFrame"] = max(world["maxPerFrame"], world["run"])

    port = game.start(0)
    signal.signal(signal.SIGTERM, lambda *_: game.request_stop())
    print(f"PORT {port}", flush=True)
    game.run(hz=args.hz)
    return 0


class Procs:
    """Every process this benchmark starts, reaped on the way out whatever happens."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def add(self, proc: subprocess.Popen) -> subprocess.Popen:
        self.procs.append(proc)
        return proc

    def reap(self, proc: subprocess.Popen) -> None:
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def reap_all(self) -> None:
        for proc in list(self.procs):
            self.reap(proc)


def start_games(procs: Procs, specs: Sequence[dict[str, Any]]) -> list[int]:
    """Start games (``{"hz", "state_kb", "plain_health"}``) in parallel; their ports."""
    started = []
    for spec in specs:
        cmd = [sys.executable, str(Path(__file__).resolve()), "_game", "--hz", str(spec.get("hz", 60)),
               "--state-kb", str(spec.get("state_kb", 0))]
        if spec.get("plain_health"):
            cmd.append("--plain-health")
        started.append(procs.add(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                  env=child_env())))
    ports = []
    for proc in started:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("PORT "):
            raise RuntimeError(f"a benchmark game did not start (said {line!r})")
        ports.append(int(line.split()[1]))
    return ports


def child_env() -> dict[str, str]:
    assert HOME, "main() makes the scratch directory first"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["GAME_BRIDGE_HOME"] = HOME
    for name in ("GAME_BRIDGE_PORT", "GAME_BRIDGE_CONFIG", "GAME_BRIDGE_INSTANCES", "GAME_BRIDGE_LAUNCH_ID"):
        env.pop(name, None)
    return env


#: The run's scratch directory (GAME_BRIDGE_HOME of every child, the servers' cwd);
#: made by main() and removed when it ends.
HOME = ""


def game_served(port: int) -> dict[str, list[int]]:
    with PLAIN.open(f"http://127.0.0.1:{port}/bench-stats", timeout=5) as answer:
        return json.loads(answer.read())["served"]


def served_delta(before: dict[str, list[int]], after: dict[str, list[int]], calls: int) -> dict[str, float]:
    """Requests, bytes and /state fetches per call from two /bench-stats snapshots."""
    requests = sum(after[p][0] - before.get(p, [0, 0])[0] for p in after)
    size = sum(after[p][1] - before.get(p, [0, 0])[1] for p in after)
    states = after.get("/state", [0, 0])[0] - before.get("/state", [0, 0])[0]
    return {"requests": requests / calls, "bytes": size / calls, "stateFetches": states / calls}


# =========================================================================== the three ways to call

PLAIN = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def floor_call(port: int) -> None:
    """Plain urllib: /command, then /state back to back until the command is done."""
    base = f"http://127.0.0.1:{port}"
    with PLAIN.open(f"{base}/command?cmd={TOOL}", timeout=30) as answer:
        command_id = json.loads(answer.read())["commandId"]
    while True:
        with PLAIN.open(f"{base}/state", timeout=30) as answer:
            state = json.loads(answer.read())
        if state["completedCommandId"] >= command_id:
            return


class InProcess:
    """``Bridge(config).run_tool("call_tool", ...)`` in this process."""

    def __init__(self, ports: Sequence[int]) -> None:
        from game_bridge_mcp.core.bridge import Bridge
        from game_bridge_mcp.config import Config

        self.bridge = Bridge(Config(port=ports[0], scan=False, registry=False, environ=child_env()))

    def call(self, port: int) -> None:
        result = self.bridge.run_tool("call_tool", {"port": port, "name": TOOL, "arguments": {}})
        if result.get("confirmation") != "completedCommandId":
            raise RuntimeError(f"unexpected confirmation: {result}")

    def stats(self, port: int) -> dict[str, int]:
        return dict(self.bridge.client(port).stats)


class StdioServer:
    """The real server as a child process, spoken to in JSON-RPC lines (pipelined)."""

    def __init__(self, procs: Procs, port: int, python: str) -> None:
        self.started = time.perf_counter()
        self.proc = procs.add(subprocess.Popen(
            [python, "-m", "game_bridge_mcp", "--port", str(port), "--no-scan", "--no-registry"],
            cwd=HOME, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any], *, notify: bool = False) -> int | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        ident = None
        if not notify:
            self.next_id += 1
            ident = message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        return ident

    def wait(self, idents: set[int]) -> dict[int, Any]:
        assert self.proc.stdout is not None
        replies: dict[int, Any] = {}
        while len(replies) < len(idents):
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed stdout")
            reply = json.loads(line)
            if reply.get("id") in idents:
                replies[reply["id"]] = reply
        return replies

    def request(self, method: str, params: dict[str, Any]) -> Any:
        ident = self.send(method, params)
        assert ident is not None
        return self.wait({ident})[ident]

    def initialize(self) -> float:
        """Send ``initialize``; the time from process start to its answer (ms)."""
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        elapsed = (time.perf_counter() - self.started) * 1000
        self.send("notifications/initialized", {}, notify=True)
        return elapsed

    @staticmethod
    def check(reply: Any) -> dict[str, Any]:
        result = reply.get("result") or {}
        text = (result.get("content") or [{}])[0].get("text", "")
        if result.get("isError") or "error" in reply:
            raise RuntimeError(f"call_tool failed: {text or reply.get('error')}")
        return json.loads(text)

    def call(self, port: int) -> None:
        self.check(self.request("tools/call", {"name": "call_tool",
                                               "arguments": {"port": port, "name": TOOL, "arguments": {}}}))

    def call_many(self, ports: Sequence[int]) -> None:
        idents = {self.send("tools/call", {"name": "call_tool", "arguments": {"port": p, "name": TOOL}})
                  for p in ports}
        for reply in self.wait({i for i in idents if i is not None}).values():
            self.check(reply)

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / (1024 * 1024)


# =========================================================================== statistics

def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "p95": round(p95(values), 3), "n": len(values)}


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def interleaved(modes: dict[str, Callable[[], Any]], calls: int, period_s: float,
                rng: random.Random) -> dict[str, list[float]]:
    """Each round calls every mode once in a shuffled order, each call started at a random
    point of the game's frame; times in ms."""
    times: dict[str, list[float]] = {name: [] for name in modes}
    names = list(modes)
    for _ in range(calls):
        rng.shuffle(names)
        for name in names:
            time.sleep(rng.uniform(0, period_s))
            times[name].append(timed(modes[name]))
    return times


# =========================================================================== the measurements

def bench_latency(procs: Procs, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, hz in (("1kHz", 1000.0), ("60Hz", 60.0)):
        port, = start_games(procs, [{"hz": hz}])
        inproc = InProcess([port])
        server = StdioServer(procs, port, args.server_python)
        server.initialize()
        modes = {"floor": lambda: floor_call(port), "bridge": lambda: inproc.call(port),
                 "stdio": lambda: server.call(port)}
        interleaved(modes, max(3, args.calls // 10), 1 / hz, rng)  # warm up: manifests, imports, caches
        before = game_served(port)
        stats_before = inproc.stats(port)
        times = interleaved(modes, args.calls, 1 / hz, rng)
        per_call = {k: (inproc.stats(port)[k] - stats_before[k]) / args.calls for k in stats_before}
        served = served_delta(before, game_served(port), 3 * args.calls)
        entry: dict[str, Any] = {name: summary(values) for name, values in times.items()}
        entry["frameMs"] = round(1000 / hz, 3)
        entry["bridgePerCall"] = {k: round(v, 2) for k, v in per_call.items()}
        entry["allModesPerCall"] = {k: round(v, 2) for k, v in served.items()}
        out[label] = entry
        procs.reap(server.proc)
    return out


def bench_sizes(procs: Procs, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """Per size and /health kind: time per mode, and what each mode fetched per call."""
    out: dict[str, Any] = {}
    specs = [{"hz": 60.0, "state_kb": kb, "plain_health": plain} for kb in args.sizes_kb for plain in (False, True)]
    ports = start_games(procs, specs)
    server = StdioServer(procs, ports[0], args.server_python)
    server.initialize()
    inproc = InProcess(ports)
    for spec, port in zip(specs, ports):
        kb = spec["state_kb"]
        calls = max(3, args.calls if kb < 1024 else args.calls // 5 if kb < 8192 else args.calls // 10)
        modes = {"floor": lambda: floor_call(port), "bridge": lambda: inproc.call(port),
                 "stdio": lambda: server.call(port)}
        interleaved(modes, 1, 1 / 60, rng)
        entry: dict[str, Any] = {"stateBytes": len(PLAIN.open(f"http://127.0.0.1:{port}/state").read()),
                                 "healthExtension": not spec["plain_health"], "calls": calls}
        for name, fn in modes.items():  # per-mode counts: run each mode's calls in a block
            before = game_served(port)
            values = []
            for _ in range(calls):
                time.sleep(rng.uniform(0, 1 / 60))
                values.append(timed(fn))
            entry[name] = {**summary(values), **{k: round(v, 2) for k, v in
                                                 served_delta(before, game_served(port), calls).items()}}
        out[f"{label_kb(kb)}{'' if not spec['plain_health'] else ' plain /health'}"] = entry
    procs.reap(server.proc)
    return out


def label_kb(kb: int) -> str:
    return f"{kb // 1024} MB" if kb >= 1024 and kb % 1024 == 0 else f"{kb} KB"


def bench_instances(procs: Procs, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    count = args.instances
    ports = start_games(procs, [{"hz": 60.0}] * count)
    inproc = InProcess(ports)
    for port in ports:
        inproc.call(port)  # manifests
    calls = args.calls

    def drive(port: int, times: list[float], seed: int, calls: int = calls) -> None:
        local = random.Random(seed)
        for _ in range(calls):
            time.sleep(local.uniform(0, 1 / 60))
            times.append(timed(lambda: inproc.call(port)))

    def run_threads(targets: Sequence[int], calls: int = calls) -> tuple[list[float], float]:
        lists: list[list[float]] = [[] for _ in targets]
        threads = [threading.Thread(target=drive, args=(port, lists[i], rng.random(), calls))
                   for i, port in enumerate(targets)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [t for values in lists for t in values], (time.perf_counter() - started) * 1000

    single, _ = run_threads(ports[:1])
    together, _ = run_threads(ports)
    single_again, _ = run_threads(ports[:1])
    single_all = single + single_again
    # Several threads calling ONE instance at once: the bridge must serialise them.
    same_port = ports[-1]
    before_counter = PLAIN_state(same_port)["game"]["maxPerFrame"]
    same, wall = run_threads([same_port] * args.same_threads, max(3, calls // args.same_threads))
    after = PLAIN_state(same_port)["game"]
    return {"instances": count, "callsPerInstance": calls,
            "single": summary(single_all), "concurrent": summary(together),
            "ratio": round(statistics.median(together) / statistics.median(single_all), 3),
            "samePort": {"threads": args.same_threads, "calls": len(same), **summary(same),
                         "wallMs": round(wall, 1),
                         "maxCommandsInOneFrame": max(after["maxPerFrame"], before_counter),
                         "serialised": after["maxPerFrame"] <= 1}}


def PLAIN_state(port: int) -> dict[str, Any]:  # noqa: N802 - reads like the endpoint
    with PLAIN.open(f"http://127.0.0.1:{port}/state", timeout=10) as answer:
        return json.loads(answer.read())


BARE_SERVER = r'''
import sys
low = sys.argv[1] == "low"
if low:
    import anyio, inspect
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    names = ["t%d" % i for i in range(7)]
    tools = [types.Tool(name=n, description="a tool", inputSchema={"type": "object", "properties": {"port": {"type": "integer"}}}) for n in names]
    async def result(name):
        return types.CallToolResult(content=[types.TextContent(type="text", text=name)], isError=False)
    if "on_call_tool" in inspect.signature(Server.__init__).parameters:
        async def on_list(ctx, params): return types.ListToolsResult(tools=tools)
        async def on_call(ctx, params): return await result(params.name)
        server = Server("bare", on_list_tools=on_list, on_call_tool=on_call)
    else:
        server = Server("bare")
        @server.list_tools()
        async def list_tools(): return tools
        @server.call_tool(validate_input=False)
        async def call_tool(name, arguments): return await result(name)
    async def main():
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())
    anyio.run(main)
else:
    try:
        from mcp.server.mcpserver import MCPServer as App
    except ImportError:
        from mcp.server.fastmcp import FastMCP as App
    app = App("bare")
    for i in range(7):
        def tool(port: int = 0) -> str:
            """a tool"""
            return "ok"
        app.tool(name="t%d" % i)(tool)
    app.run()
'''


def bench_startup(procs: Procs, args: argparse.Namespace, port: int) -> dict[str, Any]:
    bare = Path(HOME) / "bare_server.py"
    bare.write_text(BARE_SERVER)
    times: dict[str, list[float]] = {"bridge": [], "bareLowLevel": [], "bareHighLevel": []}
    order = list(times)
    for _ in range(args.startups):
        random.shuffle(order)  # no variant always pays for a cold cache
        for name in order:
            if name == "bridge":
                server = StdioServer(procs, port, args.server_python)
            else:
                server = StdioServer.__new__(StdioServer)
                server.started = time.perf_counter()
                server.next_id = 0
                server.proc = procs.add(subprocess.Popen(
                    [args.server_python, str(bare), "low" if name == "bareLowLevel" else "high"], cwd=HOME,
                    env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
            times[name].append(server.initialize())
            procs.reap(server.proc)
    out: dict[str, Any] = {name: summary(values) for name, values in times.items()}
    out["vsLowLevelMs"] = round(statistics.median(times["bridge"]) - statistics.median(times["bareLowLevel"]), 1)
    out["vsHighLevelMs"] = round(statistics.median(times["bridge"]) - statistics.median(times["bareHighLevel"]), 1)
    return out


def bench_memory(procs: Procs, args: argparse.Namespace) -> dict[str, Any]:
    ports = start_games(procs, [{"hz": 60.0}] * args.instances)
    server = StdioServer(procs, ports[0], args.server_python)
    server.initialize()
    server.request("tools/list", {})
    time.sleep(0.2)
    idle = server.rss_mb()
    for _ in range(max(2, args.calls // 10)):
        server.call_many(ports)  # every instance at once, pipelined
    busy = server.rss_mb()
    procs.reap(server.proc)
    return {"idleMB": round(idle, 1), "withInstancesMB": round(busy, 1), "instances": len(ports)}


# =========================================================================== report

def machine(python: str) -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    probe = subprocess.run([python, "-c", "import sys, importlib.metadata as m; "
                            "print(sys.version.split()[0], m.version('mcp'))"],
                           capture_output=True, text=True, timeout=30)
    server_python, _, mcp_version = probe.stdout.strip().partition(" ")
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "serverPython": server_python, "mcp": mcp_version, "platform": platform.platform()}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target: the figure it is judged on, and whether it was met."""
    out = []
    fast = results["latency"]["1kHz"]
    ratio = fast["bridge"]["median"] / fast["floor"]["median"]
    out.append({"target": "in-process Bridge within 1.1x of the floor (median, 1 kHz)",
                "value": f"{ratio:.2f}x", "met": ratio <= 1.1})
    gap = fast["stdio"]["median"] - fast["floor"]["median"]
    out.append({"target": "call_tool over stdio within 2 ms of the floor (median, 1 kHz)",
                "value": f"{gap:+.2f} ms", "met": gap <= 2.0})
    slow = results["latency"]["60Hz"]
    limit = slow["frameMs"] + 2
    worst = max(slow["bridge"]["p95"], slow["stdio"]["p95"])
    out.append({"target": "60 Hz: a confirmed call within one frame + 2 ms (p95, bridge and stdio)",
                "value": f"{worst:.1f} ms (limit {limit:.1f})", "met": worst <= limit})
    ext = [v["bridge"]["stateFetches"] for v in results["sizes"].values() if v["healthExtension"]]
    plain = [v["bridge"]["stateFetches"] for v in results["sizes"].values() if not v["healthExtension"]]
    out.append({"target": "/state fetches per call: 1 with the /health extension, at most 2 without",
                "value": f"{max(ext):.2f} / {max(plain):.2f}", "met": max(ext) <= 1.0 and max(plain) <= 2.0})
    inst = results["instances"]
    out.append({"target": f"{inst['instances']} instances: per-call median within 1.5x of one instance",
                "value": f"{inst['ratio']:.2f}x", "met": inst["ratio"] <= 1.5})
    out.append({"target": "calls to one instance serialised",
                "value": f"max {inst['samePort']['maxCommandsInOneFrame']} command(s) in one frame",
                "met": inst["samePort"]["serialised"]})
    start = results["startup"]
    out.append({"target": "start-up within 50 ms of a bare SDK server (low-level API, 7 tools)",
                "value": f"{start['vsLowLevelMs']:+.0f} ms", "met": start["vsLowLevelMs"] <= 50})
    return out


def table(results: dict[str, Any]) -> str:
    lines = []
    m = results["machine"]
    lines.append(f"machine: {m['nproc']} CPU ({m['cpu']}), Python {m['serverPython']}, mcp {m['mcp']}"
                 f"{' (quick run)' if results['quick'] else ''}")
    lines.append("")
    lines.append("| figure | floor | bridge in-process | call_tool over stdio |")
    lines.append("| --- | --- | --- | --- |")
    for label, entry in results["latency"].items():
        cells = [f"{entry[m]['median']:.2f} / {entry[m]['p95']:.2f} ms" for m in ("floor", "bridge", "stdio")]
        lines.append(f"| confirmed call, {label} game (median / p95) | " + " | ".join(cells) + " |")
    for label, entry in results["sizes"].items():
        cells = [f"{entry[m]['median']:.1f} ms; {entry[m]['requests']:.1f} req, "
                 f"{entry[m]['stateFetches']:.2f} /state, {fmt_bytes(entry[m]['bytes'])}"
                 for m in ("floor", "bridge", "stdio")]
        lines.append(f"| /state {label} ({fmt_bytes(entry['stateBytes'])}), 60 Hz, median; per call | "
                     + " | ".join(cells) + " |")
    lines.append("")
    inst = results["instances"]
    lines.append(f"instances: {inst['instances']} at 60 Hz from one Bridge, per call "
                 f"{inst['concurrent']['median']:.2f} ms median (p95 {inst['concurrent']['p95']:.2f}) vs "
                 f"{inst['single']['median']:.2f} ms for one alone: {inst['ratio']:.2f}x")
    same = inst["samePort"]
    lines.append(f"one instance, {same['threads']} threads at once: {same['calls']} calls in {same['wallMs']:.0f} ms, "
                 f"per call {same['median']:.1f} ms median; at most {same['maxCommandsInOneFrame']} command(s) "
                 f"applied in one frame ({'serialised' if same['serialised'] else 'NOT serialised'})")
    start = results["startup"]
    lines.append(f"start-up to the initialize answer (median / p95): bridge {start['bridge']['median']:.0f} / "
                 f"{start['bridge']['p95']:.0f} ms, bare SDK low-level {start['bareLowLevel']['median']:.0f} / "
                 f"{start['bareLowLevel']['p95']:.0f} ms, high-level {start['bareHighLevel']['median']:.0f} / "
                 f"{start['bareHighLevel']['p95']:.0f} ms")
    mem = results["memory"]
    lines.append(f"server resident memory: {mem['idleMB']:.1f} MB idle, {mem['withInstancesMB']:.1f} MB after "
                 f"driving {mem['instances']} instances")
    lines.append("")
    lines.append("| target | measured | met |")
    lines.append("| --- | --- | --- |")
    for t in results["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {'yes' if t['met'] else 'NO'} |")
    return "\n".join(lines)


def fmt_bytes(size: float) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size:.0f} B"


# =========================================================================== main

def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts and sizes (a smoke run, well under 20 s)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    parser.add_argument("--calls", type=int, default=None, help="confirmed calls per mode and figure (default 200)")
    parser.add_argument("--server-python", default=sys.executable,
                        help="interpreter that runs the MCP servers (e.g. .venv1/bin/python for mcp 1.x)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if os.sep in args.server_python:
        args.server_python = os.path.abspath(args.server_python)  # servers run in a temporary directory
    if args.quick:
        args.calls = args.calls or 6
        args.sizes_kb, args.instances, args.same_threads, args.startups = [1, 64], 3, 3, 1
    else:
        args.calls = args.calls or 200
        args.sizes_kb, args.instances, args.same_threads, args.startups = [1, 1024, 10240], 20, 4, 7
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_game"]:
        return serve_game(argv[1:])
    args = parse_args(argv)
    rng = random.Random(args.seed)
    global HOME
    HOME = tempfile.mkdtemp(prefix="gb-bench-")
    procs = Procs()
    started = time.perf_counter()
    try:
        results: dict[str, Any] = {"quick": args.quick, "machine": machine(args.server_python)}
        results["latency"] = bench_latency(procs, args, rng)
        results["sizes"] = bench_sizes(procs, args, rng)
        results["instances"] = bench_instances(procs, args, rng)
        procs.reap_all()
        results["memory"] = bench_memory(procs, args)
        procs.reap_all()
        results["startup"] = bench_startup(procs, args, port=1)
        results["targets"] = targets(results)
        results["elapsedS"] = round(time.perf_counter() - started, 1)
    finally:
        procs.reap_all()
        shutil.rmtree(HOME, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(table(results))
        print(f"\n({results['elapsedS']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
