#!/usr/bin/env python3
"""Where a confirmed call's time goes on the stdio path, before and after the fast path.

One run, against a 1 kHz benchmark game (``bench.py _game``) with and without the kit's
extensions, every way of calling interleaved round by round, each round's calls started at
the same point of a frame (``bench.Pacer``), so each difference below is paired:

* **floor**: the best client (``bench_clients.FloorClient``: one kept-alive raw socket,
  ``/command`` then ``/state`` back to back, or one ``/state?after=<id>``);
* **bridge in-process**: ``Bridge.run_tool("call_tool", ...)``; what it adds over the
  floor is the bridge's own work (confirmation strategy, digest, events, result);
* **stdio**: the real server, with the fast path (the default) and with the SDK's request
  machinery (``GAME_BRIDGE_SDK_DISPATCH=1``, what every call went through before it); what
  it adds over in-process is the MCP layer: reading the line, the hand-off to a worker
  thread, encoding and writing the answer.

The MCP layer is then split with calls that reach no game: a bare Python process that
reads a line and writes one (the least any stdio server costs), ``ping`` (a line in, a line out,
no tool) and ``tools/call list_instances`` with nothing to list (the whole tool path), each
over both servers and in-process. Finally the in-process pieces are timed on their own
(encoding a result, building a digest, one thread hand-off) and ``cProfile`` lists the
functions the in-process bridge spends its CPU in.

    .venv/bin/python scripts/bench_breakdown.py [--calls 300] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import shutil
import benchkit
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench  # noqa: E402  (puts the checkout on sys.path)
from bench_clients import FloorClient, InProcess, Procs, StdioServer  # noqa: E402

Mode = Callable[[], Any]

#: The least a Python stdio server can do: read a line, decode it, write an answer line.
ECHO_SERVER = (
    "import json, sys\n"
    "for line in sys.stdin.buffer:\n"
    "    message = json.loads(line)\n"
    "    sys.stdout.buffer.write(json.dumps({'jsonrpc': '2.0', 'id': message.get('id'), 'result': {}}).encode() + b'\\n')\n"
    "    sys.stdout.buffer.flush()\n")


def rounds(modes: dict[str, Mode], calls: int, pacer: bench.Pacer | None, rng: random.Random) -> dict[str, list[float]]:
    """``calls`` rounds, each calling every mode once in a shuffled order; times in ms."""
    times: dict[str, list[float]] = {name: [] for name in modes}
    names = list(modes)
    for _ in range(calls):
        rng.shuffle(names)
        offset = rng.uniform(0, pacer.period) if pacer is not None else 0.0
        for name in names:
            if pacer is not None:
                pacer.wait(offset)
            started = time.perf_counter()
            modes[name]()
            times[name].append((time.perf_counter() - started) * 1000)
    return times


def paired(times: dict[str, list[float]], mode: str, base: str) -> float:
    return benchkit.median([a - b for a, b in zip(times[mode], times[base])], 3)


def micro(fn: Mode, repeat: int = 2000) -> float:
    """Median microseconds of ``fn`` over ``repeat`` calls (in batches of 20)."""
    batches = []
    for _ in range(repeat // 20):
        started = time.perf_counter()
        for _ in range(20):
            fn()
        batches.append((time.perf_counter() - started) * 1e6 / 20)
    return round(benchkit.median(batches), 2)


def pieces(inproc: InProcess, port: int) -> dict[str, float]:
    """The in-process pieces of a call, each on its own (microseconds)."""
    from game_bridge_mcp.core.digest import summarise
    from game_bridge_mcp.mcp_server.results import call_result_line

    result = inproc.call(port)
    state = inproc.bridge.client(port).state()
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(lambda: None).result()
        return {"encode the answer line (us)": micro(lambda: call_result_line(7, result)),
                "digest of the /state (us)": micro(lambda: summarise(state)),
                "one worker-thread hand-off and back (us)": micro(lambda: pool.submit(lambda: None).result())}
    finally:
        pool.shutdown()


def profile(inproc: InProcess, port: int, calls: int) -> list[str]:
    """The in-process bridge's own functions by CPU time over ``calls`` confirmed calls."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(calls):
        inproc.call(port)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(14)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return lines[start:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="rounds per figure (default 300)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    bench.HOME = tempfile.mkdtemp(prefix="gb-breakdown-")
    procs = Procs()
    results: dict[str, Any] = {"machine": bench.machine(sys.executable), "calls": args.calls}
    try:
        ports = bench.start_games(procs, [{"hz": 1000.0, "no_ext": True}, {"hz": 1000.0}])
        env = bench.child_env()
        inproc = InProcess(ports, env)
        fast = StdioServer(procs, ports[0], sys.executable, cwd=bench.HOME, env=env)
        sdk = StdioServer(procs, ports[0], sys.executable, cwd=bench.HOME,
                          env={**env, "GAME_BRIDGE_SDK_DISPATCH": "1"})
        echo = StdioServer(procs, ports[0], sys.executable, cwd=bench.HOME, env=env,
                           argv=[sys.executable, "-c", ECHO_SERVER])
        for server in (fast, sdk):
            server.initialize()
        floor_clients = {port: FloorClient(port) for port in ports}
        nothing = {"scan": False, "registry": False}
        for label, port, floor in (("1 kHz game, no extensions", ports[0], "poll"),
                                   ("1 kHz game, after and view", ports[1], "after")):
            client = floor_clients[port]
            modes: dict[str, Mode] = {
                "floor": getattr(client, floor),
                "in-process": lambda p=port: inproc.call(p),
                "stdio, fast path": lambda p=port: fast.call(p),
                "stdio, SDK dispatch": lambda p=port: sdk.call(p)}
            rounds(modes, max(5, args.calls // 10), None, rng)  # warm: manifests, features, caches
            pacer = bench.Pacer(port, 1 / 1000)
            times = rounds(modes, args.calls, pacer, rng)
            pacer.close()
            entry: dict[str, Any] = {name: benchkit.median(values, 3) for name, values in times.items()}
            entry["bridge over the floor"] = paired(times, "in-process", "floor")
            for server in ("stdio, fast path", "stdio, SDK dispatch"):
                entry[f"{server}: MCP layer (over in-process)"] = paired(times, server, "in-process")
                entry[f"{server}: over the floor"] = paired(times, server, "floor")
            results[label] = entry
        layer: dict[str, Mode] = {
            "a line in and out of a bare Python process": lambda: echo.request("ping", {}),
            "ping, fast path": lambda: fast.request("ping", {}),
            "ping, SDK dispatch": lambda: sdk.request("ping", {}),
            "list_instances in-process": lambda: inproc.bridge.run_tool("list_instances", nothing),
            "list_instances, fast path": lambda: fast.tool("list_instances", nothing),
            "list_instances, SDK dispatch": lambda: sdk.tool("list_instances", nothing)}
        rounds(layer, 20, None, rng)
        times = rounds(layer, args.calls, None, rng)
        split = {name: benchkit.median(values, 3) for name, values in times.items()}
        for server in ("fast path", "SDK dispatch"):
            split[f"tools/call over ping, {server}"] = paired(times, f"list_instances, {server}",
                                                              f"ping, {server}")
        results["the MCP layer, no game"] = split
        results["pieces"] = pieces(inproc, ports[0])
        results["profile"] = profile(inproc, ports[0], args.calls)
        inproc.bridge.shutdown()
        for client in floor_clients.values():
            client.close()
    finally:
        procs.reap_all()
        shutil.rmtree(bench.HOME, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"machine: {results['machine']}; {args.calls} rounds a figure, medians in ms")
    for section, entry in results.items():
        if section in ("machine", "calls", "profile"):
            continue
        print(f"\n{section}")
        for name, value in entry.items():
            print(f"  {name:<48} {value:>9}")
    print("\nthe in-process bridge's CPU, by function (cProfile, process time)")
    for line in results["profile"]:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
