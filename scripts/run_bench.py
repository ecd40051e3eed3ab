#!/usr/bin/env python3
"""The benchmark runner: runs the scenarios named (each a benchmark script of scripts/,
with its own options after ``--``), all with one machine description and the load
average before and after each, and prints their figures as one JSON document or a short
list. The performance docs' figures come from it.

    .venv/bin/python scripts/run_bench.py confirm discovery         # the full runs
    .venv/bin/python scripts/run_bench.py --quick all                # every scenario, smoke-sized
    .venv/bin/python scripts/run_bench.py confirm -- --before ../old --only latency
    .venv/bin/python scripts/run_bench.py --list
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchkit  # noqa: E402

#: Scenario name -> (script, its smoke-sized options, what it measures). Every script
#: prints its figures as JSON with --json.
SCENARIOS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "confirm": ("bench.py", ("--quick",), "a confirmed command against the floors: 1 kHz and 60 Hz, "
                "sizes, instances, memory, start-up"),
    "breakdown": ("bench_breakdown.py", ("--calls", "20"), "where a stdio call's time goes"),
    "timeline": ("bench_timeline.py", ("--calls", "20"), "one stdio call stretch by stretch, from marks on both "
                 "sides' clock"),
    "discovery": ("bench_discovery.py", ("--quick",), "list_instances with live games and a registry; a hung port"),
    "launch": ("bench_launch.py", ("--runs", "1"), "launch overhead and reaping"),
    "advance": ("bench_advance.py", ("--quick",), "advance a frame against stepping by hand"),
    "agent-loop": ("bench_agent_loop.py", ("--moves", "3"), "calls and characters an agent's move costs"),
    "kit": ("bench_kit.py", ("--quick",), "the kit's /state and view=digest"),
    "kit-http": ("bench_kit_http.py", ("--quick",), "the kit's server per request"),
    "decode": ("bench_decode.py", ("--runs", "1"), "the decoded-size bound's cost"),
    "screenshot": ("bench_screenshot.py", ("--quick",), "the kit's /screenshot and get_screenshot"),
    "pygame": ("bench_pygame.py", ("--quick",), "the pygame wrapper's cost a frame"),
    "http": ("bench_http.py", ("--calls", "20", "--sessions", "4"), "--http against stdio: a confirmed call, "
             "8 sessions against 8 games, memory per idle session"),
    "browser": ("bench_browser.py", ("--quick",), "the browser wrapper's launch, screenshot and one-frame step "
                "against the library driving the same page; fps; memory"),
}


def run(name: str, quick: bool, extra: Sequence[str], python: str) -> dict[str, Any]:
    script, smoke, _what = SCENARIOS[name]
    command = [python, str(HERE / script), "--json"] + (list(smoke) if quick else []) + list(extra)
    load_before, started = benchkit.load_average(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    out: dict[str, Any] = {"script": script, "argv": command[2:], "loadBefore": load_before,
                           "loadAfter": benchkit.load_average(),
                           "elapsedS": round(time.perf_counter() - started, 1), "exitCode": done.returncode}
    try:
        out["results"] = json.loads(done.stdout)
    except ValueError:
        out["output"] = done.stdout[-4000:]
    if done.returncode != 0:
        out["stderr"] = done.stderr[-4000:]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names, or all")
    parser.add_argument("--quick", action="store_true", help="every scenario smoke-sized (its smoke options)")
    parser.add_argument("--list", action="store_true", help="list the scenarios")
    parser.add_argument("--table", action="store_true", help="a short list instead of JSON")
    args = parser.parse_args(argv)
    if args.list or not args.scenarios:
        for name, (script, _smoke, what) in SCENARIOS.items():
            print(f"{name:<12} {script:<22} {what}")
        return 0
    names = list(SCENARIOS) if args.scenarios == ["all"] else args.scenarios
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; --list names them")
    report: dict[str, Any] = {"machine": benchkit.machine(), "quick": args.quick, "scenarios": {}}
    for name in names:
        print(f"({name} ...)", file=sys.stderr, flush=True)
        report["scenarios"][name] = run(name, args.quick, extra, sys.executable)
    if args.table:
        m = report["machine"]
        print(f"machine: {m['nproc']} CPU ({m['cpu']}), Python {m['python']}, mcp {m['mcp']}, "
              f"load {m['loadAverage']} at the start")
        for name, entry in report["scenarios"].items():
            state = "ok" if entry["exitCode"] == 0 else f"exit {entry['exitCode']}"
            print(f"{name:<12} {state:<8} {entry['elapsedS']:>7.1f} s  load {entry['loadBefore']} -> {entry['loadAfter']}")
    else:
        print(json.dumps(report, indent=1))
    return 0 if all(e["exitCode"] == 0 for e in report["scenarios"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
