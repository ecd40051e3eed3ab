#!/usr/bin/env python3
"""Where one stdio call's time goes, stretch by stretch, from marks on both sides' clock.

The real server (``python -m game_bridge_mcp``) runs with marks wrapped around the
functions a ``tools/call call_tool`` passes through (the package's source is not changed:
:data:`HOOKS` replaces attributes before the server starts, and a renamed function stops
the run with its name). Each mark is ``time.perf_counter()``, the machine's monotonic
clock, which the client shares, so the stretch from the client's write to the server's
reading thread waking is measured too. The calls are paced like ``bench.py``'s (each
started at a random point of a 1 kHz game's frame) and alternate call by call with the
C floor (the Python floor without a compiler), as the latency targets are judged: the
server runs as cold as it does there. Medians of each stretch between two consecutive
marks; the marks themselves cost a few microseconds.

    .venv/bin/python scripts/bench_timeline.py [--calls 600] [--no-ext] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench  # noqa: E402  (puts the checkout on sys.path)
import benchkit  # noqa: E402
from bench_clients import TOOL, CFloor, FloorClient, Procs, StdioServer  # noqa: E402

#: (module, attribute path, mark on entry, mark on return): the stretch between two
#: consecutive marks of a call is named by the two marks.
HOOKS: tuple[tuple[str, str, str | None, str | None], ...] = (
    ("game_bridge_mcp.mcp_server.stdio.reader", "_Parking.wait", None, "awake"),
    ("game_bridge_mcp.mcp_server.stdio.reader", "ThreadedReader._read", None, "line read"),
    ("game_bridge_mcp.mcp_server.stdio.fastpath", "FastPath.take", "taking", None),
    ("game_bridge_mcp.mcp_server.stdio.fastpath", "FastPath._run_one", "call runs", None),
    ("game_bridge_mcp.core.bridge", "Bridge.run_tool", "run_tool", None),
    ("game_bridge_mcp.core.tools.calls", "run_command", "run_command", None),
    ("game_bridge_mcp.wire.http11", "_AnswerReader.send", "request out", None),
    ("game_bridge_mcp.wire.http11", "_AnswerReader._recv", None, "answer in"),
    ("game_bridge_mcp.wire.client", "GameClient.command_and_sync", None, "confirmed"),
    ("game_bridge_mcp.core.bridge", "clean_answer", "answer made", "checked"),
    ("game_bridge_mcp.mcp_server.stdio.fastpath", "call_result_chunks", "encoding", "encoded"),
    ("game_bridge_mcp.mcp_server.stdio.pipes", "Writer.write_line", "writing", None),
)

#: Run by the server's interpreter (``python -c``): the hooks, then the server as ``-m``
#: runs it; the marks are written to ``GB_TIMELINE`` when stdin ends.
BOOT = r'''
import functools, importlib, json, os, runpy, sys, time
hooks = json.loads(os.environ["GB_TIMELINE_HOOKS"])
marks = []
mark = marks.append
clock = time.perf_counter

def wrap(fn, enter, leave):
    @functools.wraps(fn)
    def hooked(*args, **kwargs):
        if enter:
            mark((enter, clock()))
        try:
            return fn(*args, **kwargs)
        finally:
            if leave:
                mark((leave, clock()))
    return hooked

for module_name, path, enter, leave in hooks:
    owner = importlib.import_module(module_name)
    *outer, name = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    if not hasattr(owner, name):
        sys.exit(f"bench_timeline: {module_name}.{path} is gone: update HOOKS")
    setattr(owner, name, wrap(getattr(owner, name), enter, leave))

reader = importlib.import_module("game_bridge_mcp.mcp_server.stdio.reader").ThreadedReader
read = reader._read
def read_then_dump(self):
    read(self)
    if self._eof:
        with open(os.environ["GB_TIMELINE"], "w") as out:
            json.dump(marks, out)
reader._read = read_then_dump
sys.argv = ["game_bridge_mcp"] + sys.argv[1:]
runpy.run_module("game_bridge_mcp", run_name="__main__", alter_sys=True)
'''


def stretches(calls: Sequence[tuple[float, float]], marks: Sequence[tuple[str, float]]) -> list[dict[str, Any]]:
    """The median of each stretch between consecutive marks, in the order of a call."""
    found: dict[str, list[float]] = {}
    order: list[str] = []
    for start, end in calls:
        inside = [m for m in marks if start <= m[1] <= end]
        timeline = [("client writes", start)] + inside + [("client has the line", end)]
        for (a, at), (b, bt) in zip(timeline, timeline[1:]):
            key = f"{a} -> {b}"
            if key not in found:
                found[key] = []
                order.append(key)
            found[key].append((bt - at) * 1e6)
    return [{"stretch": key, "medianUs": round(benchkit.median(found[key]), 1), "n": len(found[key])}
            for key in order]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--no-ext", action="store_true", help="the game without after and view")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bench.HOME = tempfile.mkdtemp(prefix="gb-timeline-")
    procs = Procs()
    try:
        port, = bench.start_games(procs, [{"hz": 1000, "no_ext": args.no_ext}])
        env = bench.child_env()
        env["GB_TIMELINE"] = os.path.join(bench.HOME, "marks.json")
        env["GB_TIMELINE_HOOKS"] = json.dumps(HOOKS)
        server = StdioServer(procs, port, sys.executable, cwd=bench.HOME, env=env,
                             argv=[sys.executable, "-c", BOOT, "--port", str(port), "--no-scan", "--no-registry"])
        server.initialize()
        c_floor = CFloor.build(procs, bench.HOME)
        floor: Any = c_floor if c_floor is not None else FloorClient(port)
        floor_call = (lambda: floor.poll(port)) if args.no_ext else (lambda: floor.after(port))
        for _ in range(30):  # warm: the manifest, what the game advertises, the frame clock
            server.call(port)
        pacer = bench.Pacer(port, 0.001)
        rng = random.Random(1)
        assert server.proc.stdin is not None and server.proc.stdout is not None
        calls: list[tuple[float, float]] = []
        for _ in range(args.calls):
            offset = rng.uniform(0, 0.001)
            pacer.wait(offset)
            floor_call()
            pacer.wait(offset)
            server.next_id += 1
            line = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "id": server.next_id,
                               "params": {"name": "call_tool", "arguments": {"port": port, "name": TOOL,
                                                                            "arguments": {}}}}).encode() + b"\n"
            started = time.perf_counter()
            os.write(server.proc.stdin.fileno(), line)
            answer = server.proc.stdout.readline()
            calls.append((started, time.perf_counter()))
            server.check(json.loads(answer))
        pacer.close()
        server.proc.stdin.close()
        server.proc.wait(10)
        with open(env["GB_TIMELINE"]) as marks_file:
            marks = [(str(label), float(at)) for label, at in json.load(marks_file)]
        results = {"machine": benchkit.machine(), "calls": args.calls, "extensions": not args.no_ext,
                   "floorClient": "c" if c_floor is not None else "python",
                   "callMedianUs": round(benchkit.median([(b - a) * 1e6 for a, b in calls]), 1),
                   "stretches": stretches(calls, marks)}
    finally:
        procs.reap_all()
        shutil.rmtree(bench.HOME, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"a call_tool over stdio against a 1 kHz game{'' if results['extensions'] else ' without extensions'}, "
              f"alternating with the {results['floorClient']} floor; median {results['callMedianUs']} us\n")
        print("| stretch | median us | calls |")
        print("| --- | --- | --- |")
        for row in results["stretches"]:
            print(f"| {row['stretch']} | {row['medianUs']} | {row['n']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
