#!/usr/bin/env python3
"""Time ``list_instances`` and ``discover`` in the situations that matter.

1. ``typical``: the default scan range (7777,7800-7810) plus a 20-entry registry: ``--live``
   (8) FakeGames, each in its own child process (as real games are) and registered under
   that process's pid; stale entries (dead pid, quiet port) to make 15 with the live
   ones; 5 broken files (malformed JSON, missing port, pid/file-name mismatch,
   non-loopback host, oversize). ``list_instances`` is the Bridge's tool (manifests
   cached after the first listing; target: under 20 ms); ``discover`` the same report
   without a Bridge (every game's /tools read each time).
2. ``hung``: a 100-port range containing one listener that accepts and never answers.
   Target: the probe deadline plus under 50 ms.

Prints median / p95 / max over N runs (``--json``: the figures). ``--quick`` runs each once.
``--checkout DIR`` measures that checkout's package instead (run it twice for before and
after). Everything it starts (games, listeners, child processes) is stopped and reaped.

    .venv/bin/python scripts/bench_discovery.py [--runs 30] [--live 8] [--probe-ms 300] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import socket
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if "--checkout" in sys.argv[1:-1]:
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()))
else:
    sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))

import benchkit  # noqa: E402

from game_bridge_mcp.config import DEFAULT_SCAN_RANGE, Config, parse_port_spec  # noqa: E402
from game_bridge_mcp.core.bridge import Bridge  # noqa: E402
from game_bridge_mcp.discovery.report import discover  # noqa: E402


#: A child process serving one FakeGame until its stdin closes; prints the port.
GAME_HOST = """
import sys
sys.path.insert(0, {tests!r})
from peers.fakegame import FakeGame
with FakeGame(hz=60) as game:
    print(game.port, flush=True)
    sys.stdin.read()
"""


def start_game(stack: ExitStack) -> tuple[int, int]:
    """A FakeGame in its own process: (port, pid). Stopped and reaped by ``stack``."""
    child = subprocess.Popen([sys.executable, "-c", GAME_HOST.format(tests=str(ROOT / "tests"))],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def stop() -> None:
        child.stdin.close()  # type: ignore[union-attr]
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()  # type: ignore[union-attr]

    stack.callback(stop)
    line = child.stdout.readline()  # type: ignore[union-attr]
    if not line.strip().isdigit():
        raise RuntimeError(f"the game host did not start (said {line!r})")
    return int(line), child.pid


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def quiet_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def entry(reg: Path, *, port: int, pid: int, name: str | None = None, **extra: Any) -> None:
    doc = {"name": "Bench Game", "version": "1.0", "protocol": 1, "port": port, "pid": pid,
           "host": "127.0.0.1", "started": "2026-08-20T22:27:19.774Z", "cwd": "/bench", **extra}
    (reg / (name or f"{pid}.json")).write_text(json.dumps(doc))


def build_registry(stack: ExitStack, reg: Path, live: int) -> None:
    reg.mkdir(parents=True)
    for _ in range(live):
        port, pid = start_game(stack)
        entry(reg, port=port, pid=pid)
    for _ in range(max(0, 15 - live)):
        entry(reg, port=quiet_port(), pid=dead_pid())
    (reg / "900001.json").write_text('{"port": 7820, "pid": 900001,')
    (reg / "900002.json").write_text(json.dumps({"pid": 900002}))
    entry(reg, port=quiet_port(), pid=900003, name="900004.json")
    entry(reg, port=quiet_port(), pid=900005, host="10.255.255.1")
    entry(reg, port=quiet_port(), pid=900006, cwd="x" * 70_000)


def measure(fn: Callable[[], dict], runs: int) -> tuple[list[float], dict]:
    fn()  # warm up imports and thread machinery
    times: list[float] = []
    report: dict = {}
    for _ in range(runs):
        started = time.perf_counter()
        report = fn()
        times.append((time.perf_counter() - started) * 1000)
    return times, report


def summary(label: str, times: list[float], extra: str = "") -> str:
    return f"{label:<14} {benchkit.text(times)}{extra}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--live", type=int, default=8, help="live games among the registry's entries")
    parser.add_argument("--probe-ms", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="run each scenario once")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--checkout", default="", help="measure that checkout's package")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else max(1, args.runs)
    probe = args.probe_ms
    out: dict[str, Any] = {"probeMs": probe, "live": args.live}
    lines = [f"probe deadline: {probe} ms"]

    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        reg = Path(tmp) / "instances"
        build_registry(stack, reg, args.live)
        config = Config(environ={"GAME_BRIDGE_INSTANCES": str(reg), "GAME_BRIDGE_HOME": tmp,
                                 "PATH": os.environ.get("PATH", "")},
                        scan_range=parse_port_spec(DEFAULT_SCAN_RANGE))
        bridge = Bridge(config)
        stack.callback(bridge.shutdown)
        times, report = measure(lambda: bridge.run_tool("list_instances", {}), runs)
        counts = {k: len(report[k]) for k in ("live", "stale", "notAGame", "free")}
        counts["registryProblems"] = len(report.get("registryProblems", []))
        out["listInstances"] = {**benchkit.summary(times, digits=2), "counts": counts,
                                "target": "under 20 ms", "met": benchkit.median(times) < 20}
        lines.append(summary("list_instances", times, f"   {counts} (target: under 20 ms)"))
        times, _ = measure(lambda: discover(config, probe_timeout_ms=probe), runs)
        out["discover"] = benchkit.summary(times, digits=2)
        lines.append(summary("discover", times, "   (no Bridge: every /tools read each time)"))

        hung = socket.socket()
        stack.callback(hung.close)
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        port = hung.getsockname()[1]
        low = max(1024, min(port - 50, 65535 - 99))
        hung_config = Config(environ={"GAME_BRIDGE_INSTANCES": str(Path(tmp) / "empty")},
                             scan_range=tuple(range(low, low + 100)))
        times, report = measure(lambda: discover(hung_config, probe_timeout_ms=probe), runs)
        over = [t - probe for t in times]
        hung_ports = [u["port"] for u in report.get("unresponsive", [])]
        out["hung"] = {**benchkit.summary(times, digits=1), "overDeadline": benchkit.summary(over, digits=1),
                       "reported": port in hung_ports}
        lines.append(summary("hung", times, f"   over deadline: median {benchkit.median(over):.1f} ms, "
                                            f"max {max(over):.1f} ms; unresponsive={hung_ports}"))
        if port not in hung_ports:
            print("error: the hung listener was not reported", file=sys.stderr)
            return 1
    print(json.dumps(out, indent=1) if args.json else "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
