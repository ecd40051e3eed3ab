#!/usr/bin/env python3
"""What ``/state?view=digest`` saves against the whole ``/state``, in the kit.

Sections:

* **demo**: the demo game as a child process (started and reaped here) with
  ``--state-padding-kb`` of entity objects, which the demo encodes once (a ``RawJson``):
  the full ``/state`` still copies and sends it every time, the digest leaves it out.
* **live**: an in-process kit game whose state holds a live list of entity dicts, the
  usual shape of a game that returns its world by reference: the full ``/state``
  encodes the list every time; the digest is cut before encoding, so the list is never
  touched. Then the same game with a state function that BUILDS the list on every call
  (an expensive state function): the kit's digest still calls it (it cuts the result),
  and a ``digest=`` function that builds only the small part avoids it.

Each row: request to last byte on one kept-alive connection, median and p95, bytes; each
view measured in its own block of requests.

    .venv/bin/python scripts/bench_kit.py [--quick] [--json]

No figure is a pass/fail target; compare ratios on a noisy machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import benchkit
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from game_bridge_mcp.game import GameBridge  # noqa: E402


def measure(port: int, paths: list[str], reps: int) -> dict[str, dict[str, Any]]:
    """Each path ``reps`` times, interleaved, on one kept-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    samples: dict[str, list[float]] = {path: [] for path in paths}
    sizes: dict[str, int] = {}
    try:
        for _ in range(reps):
            for path in paths:
                start = time.perf_counter()
                conn.request("GET", path)
                response = conn.getresponse()
                body = response.read()
                samples[path].append(time.perf_counter() - start)
                assert response.status == 200, (path, response.status, body[:200])
                sizes[path] = len(body)
    finally:
        conn.close()
    return {path: {**benchkit.in_ms(samples[path]), "bytes": sizes[path]} for path in paths}


def compare(port: int, reps: int) -> dict[str, Any]:
    """Each view in its own block: interleaved, a digest right after a 10 MB answer pays
    for freeing that answer (2.9 ms instead of 0.7 ms measured here)."""
    digest = measure(port, ["/state?view=digest"], reps * 4)["/state?view=digest"]
    full = measure(port, ["/state"], reps)["/state"]
    return {"full": full, "digest": digest,
            "fullOverDigest": round(full["medianMs"] / max(digest["medianMs"], 1e-6), 1)}


# =========================================================================== demo

def demo_child(padding_kb: int) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "0",
                             "--no-register", "--hz", "60", "--state-padding-kb", str(padding_kb)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=str(ROOT),
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def section_demo(quick: bool) -> dict[str, Any]:
    sizes = [0, 256] if quick else [0, 1024, 10240]
    rows = []
    for padding_kb in sizes:
        proc = demo_child(padding_kb)
        try:
            assert proc.stdout is not None
            banner = proc.stdout.readline()
            match = re.search(r"127\.0\.0\.1:(\d+)", banner)
            assert match, f"the demo did not start: {banner!r}"
            reps = 5 if quick else (20 if padding_kb >= 10240 else 100)
            rows.append({"paddingKb": padding_kb, **compare(int(match.group(1)), reps)})
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
    return {"rows": rows}


# =========================================================================== live

def entities(count: int) -> list[dict[str, Any]]:
    return [{"id": i, "kind": "crate", "x": i * 0.5, "y": i % 97 * 1.25, "tags": ["static", "padding"]}
            for i in range(count)]


def in_process(bridge: GameBridge) -> Iterator[int]:
    port = bridge.start(0)
    loop = threading.Thread(target=bridge.run, kwargs={"hz": 60.0}, daemon=True)
    loop.start()
    try:
        yield port
    finally:
        bridge.request_stop()
        loop.join(5)
        bridge.stop()


def run_game(make: Callable[[], GameBridge], reps: int) -> dict[str, Any]:
    for port in in_process(make()):
        return compare(port, reps)
    raise AssertionError("unreachable")


def section_live(quick: bool) -> dict[str, Any]:
    counts = [1000] if quick else [1000, 10000, 100000]
    rows = []
    for count in counts:
        reps = 5 if quick else (10 if count >= 100000 else 50)
        world = entities(count)
        held = run_game(lambda: GameBridge("Live", "1", register=False, state=lambda: {
            "game": {"score": 1, "entities": world}}), reps)

        def built() -> dict[str, Any]:
            return {"game": {"score": 1, "entities": entities(count)}}

        costly = run_game(lambda: GameBridge("Built", "1", register=False, state=built), reps)
        cheap = run_game(lambda: GameBridge("Built+digest", "1", register=False, state=built,
                                            digest=lambda: {"game": {"score": 1}}), reps)
        rows.append({"entities": count, "byReference": held, "builtEachCall": costly,
                     "builtEachCallWithDigestFn": cheap})
    return {"rows": rows}


# =========================================================================== report

def machine() -> dict[str, Any]:
    return benchkit.machine()


def show(report: dict[str, Any]) -> str:
    lines = [f"machine: {report['machine']}", "", "demo (padding encoded once, RawJson):",
             f"{'padding':>10} {'full ms':>10} {'p95':>8} {'bytes':>11} {'digest ms':>10} {'p95':>8} "
             f"{'bytes':>7} {'ratio':>7}"]
    for row in report["demo"]["rows"]:
        f, d = row["full"], row["digest"]
        lines.append(f"{row['paddingKb']:>8}KB {f['medianMs']:>10} {f['p95Ms']:>8} {f['bytes']:>11,} "
                     f"{d['medianMs']:>10} {d['p95Ms']:>8} {d['bytes']:>7,} {row['fullOverDigest']:>6}x")
    lines += ["", "live (entity dicts in the state):",
              f"{'entities':>10} {'how':<28} {'full ms':>10} {'digest ms':>10} {'ratio':>7}"]
    for row in report["live"]["rows"]:
        for key in ("byReference", "builtEachCall", "builtEachCallWithDigestFn"):
            cell = row[key]
            lines.append(f"{row['entities']:>10} {key:<28} {cell['full']['medianMs']:>10} "
                         f"{cell['digest']['medianMs']:>10} {cell['fullOverDigest']:>6}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = {"machine": machine(), "demo": section_demo(args.quick), "live": section_live(args.quick)}
    print(json.dumps(report, indent=2) if args.json else show(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
