#!/usr/bin/env python3
"""What ``advance {until}`` costs a frame, against the floors of doing it by hand.

``advance`` with ``until`` steps one frame at a time and looks at the state after each,
so a frame costs one confirmed ``step {frames: 1}``. Measured against real demo games
started here (paused, reaped here), at 60 Hz and 1000 Hz, over HTTP on one kept-alive
connection:

* **bridge**: the ``advance`` tool's handler (core/tools/clock.py) with ``until: {path: "simFrame", equals: start + N}``
  (so exactly N frames), per frame;
* **poll floor**: ``/command?cmd=step&frames=1``, ``/health`` polled back to back until
  ``completedCommandId`` reaches it, then one ``/state``: the best a client can do
  without ``after``;
* **after floor**: ``/command`` then one ``/state?after=<id>`` (the ``after`` extension).

And ``advance {frames: N}`` (one ``step`` of N frames) per frame, for contrast; and N calls
of ``advance {frames: 1}`` on a second demo that only the bridge commands, per frame (a game
the bridge has seen paused is stepped without a look first: the step and its held answer;
the floors' steps on the first demo would rightly make it look first, core/clock.py).

    .venv/bin/python scripts/bench_advance.py [--quick] [--json]

No figure is a pass/fail target; compare ratios on a noisy machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from game_bridge_mcp.config import Config  # noqa: E402
from game_bridge_mcp.core.bridge import Bridge  # noqa: E402
from game_bridge_mcp.core.tools.clock import advance  # noqa: E402
from game_bridge_mcp.core.tools.state import get_state  # noqa: E402


@contextmanager
def demo(hz: int) -> Iterator[int]:
    env = dict(os.environ, GAME_BRIDGE_START_PAUSED="1", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "0", "--hz", str(hz),
                             "--start", "--no-register"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, cwd=str(ROOT))
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        banner = proc.stdout.readline() if ready and proc.stdout else ""
        if "serving on http://127.0.0.1:" not in banner:
            raise RuntimeError(f"the demo did not start: {banner!r}")
        yield int(banner.rsplit(":", 1)[1].split()[0])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout:
            proc.stdout.close()


class Raw:
    """One kept-alive connection doing a step by hand."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def get(self, path: str) -> Any:
        self.conn.request("GET", path)
        return json.loads(self.conn.getresponse().read())

    def poll_step(self) -> Any:
        cid = self.get("/command?cmd=step&frames=1")["commandId"]
        while self.get("/health")["completedCommandId"] < cid:
            pass
        return self.get("/state")

    def after_step(self) -> Any:
        cid = self.get("/command?cmd=step&frames=1")["commandId"]
        return self.get(f"/state?after={cid}&waitMs=5000")


def per_frame_ms(run: Any, frames: int) -> float:
    started = time.perf_counter()
    run(frames)
    return (time.perf_counter() - started) * 1000 / frames


def measure(hz: int, frames: int, rounds: int) -> dict[str, Any]:
    with demo(hz) as port, demo(hz) as solo:
        bridge = Bridge(Config(port=port, environ={}, scan=False, registry=False))
        alone = Bridge(Config(port=solo, environ={}, scan=False, registry=False))
        raw = Raw(port)

        def by_bridge(n: int) -> None:
            start = get_state(bridge, port=port, summary=True)["simFrame"]
            answer = advance(bridge, port=port, until={"path": "simFrame", "equals": start + n}, max_frames=n)
            assert answer["matched"] and answer["framesAdvanced"] == n, answer

        def by_steps(n: int) -> None:
            assert advance(bridge, port=port, frames=n)["framesAdvanced"] == n

        def by_calls(n: int) -> None:
            for _ in range(n):
                assert advance(alone, port=solo, frames=1)["framesAdvanced"] == 1

        ways = {"bridge": by_bridge,
                "poll floor": lambda n: [raw.poll_step() for _ in range(n)],
                "after floor": lambda n: [raw.after_step() for _ in range(n)],
                "frames: N": by_steps, "frames: 1 calls": by_calls}
        by_bridge(5)  # warm up: the bridge learns the game's frames
        by_calls(5)
        results: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):  # interleaved, so a noisy moment hits every way
            for name, run in ways.items():
                results[name].append(per_frame_ms(run, frames))
        best = {name: min(values) for name, values in results.items()}
        return {"hz": hz, "frames": frames, "msPerFrame": best,
                "bridge/poll floor": best["bridge"] / best["poll floor"],
                "bridge/after floor": best["bridge"] / best["after floor"],
                "frames 1 calls/after floor": best["frames: 1 calls"] / best["after floor"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few frames, one round (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    frames, rounds = (20, 1) if args.quick else (200, 3)
    rows = [measure(hz, frames, rounds) for hz in (60, 1000)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"advance until, {frames} frames, best of {rounds} (ms a frame):")
    for row in rows:
        ms = row["msPerFrame"]
        print(f"  demo at {row['hz']:>4} Hz: bridge {ms['bridge']:.2f}  poll floor {ms['poll floor']:.2f}  "
              f"after floor {ms['after floor']:.2f}  ->  {row['bridge/poll floor']:.2f}x / "
              f"{row['bridge/after floor']:.2f}x;  advance {{frames: N}} {ms['frames: N']:.3f};  "
              f"advance {{frames: 1}} calls {ms['frames: 1 calls']:.2f} ({row['frames 1 calls/after floor']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
