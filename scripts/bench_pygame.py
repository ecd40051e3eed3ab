#!/usr/bin/env python3
"""What the pygame wrapper costs a game, and how quickly an agent sees what it did.

* **overhead**: a small uncapped pygame loop (fill, a few rects, flip; headless, 640x480)
  for a few seconds, run plain (``python bench_pygame.py _game``) and through the wrapper
  (``python -m game_bridge_mcp.game.pygame bench_pygame.py _game``), unpaused, rounds
  interleaved: frames per second of each and the wrapper's cost per frame.
* **screenshot**: ``GET /screenshot`` on the wrapped game at 60 Hz, 640x480 and 1920x1080,
  at ``maxWidth=maxHeight=768`` and ``1568``: median and p95 in ms and in frames, bytes.
* **input**: a ``key`` command (space, which flips the game's background colour) until a
  screenshot shows it: ``X-Game-Frame`` of the first changed picture minus the frame the
  command was accepted at (what an agent waits, in the game's frames).

    .venv/bin/python scripts/bench_pygame.py [--quick] [--json]

The game is this script's ``_game`` mode. Every process is started and reaped here.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import benchkit
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
#: The games' registry entries go here (a scratch directory made in main(), removed after).
REGISTRY = ""
sys.path.insert(0, str(ROOT))

from game_bridge_mcp.game.image.png import decode_png  # noqa: E402
HERE = Path(__file__).resolve()


# =========================================================================== the game
def game(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--fps", type=int, default=0, help="0: uncapped")
    parser.add_argument("--size", default="640x480")
    args = parser.parse_args(argv)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame

    pygame.init()
    width, height = (int(n) for n in args.size.split("x"))
    screen = pygame.display.set_mode((width, height))
    clock = pygame.time.Clock()
    colours = [(20, 200, 90), (200, 60, 40)]
    flipped = 0
    frames = 0
    start, cpu = time.monotonic(), time.process_time()
    while time.monotonic() - start < args.seconds:
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                return 0
            if event.type == pygame.KEYDOWN and event.key == pygame.K_SPACE:
                flipped ^= 1
        screen.fill((20, 30, 90))
        screen.fill(colours[flipped], (0, 0, 100, 30))  # the indicator space toggles
        for i in range(8):
            pygame.draw.rect(screen, (240, 240, 240), ((frames * 3 + i * 70) % width, 80 + i * 40, 40, 20))
        pygame.display.flip()
        frames += 1
        if args.fps:
            clock.tick(args.fps)
    print(f"frames {frames} seconds {time.monotonic() - start:.3f} cpu {time.process_time() - cpu:.3f}", flush=True)
    return 0


# =========================================================================== measuring
def run_for_fps(wrapped: bool, seconds: float) -> tuple[float, float]:
    """(frames per second, CPU microseconds per frame) of one run of the game."""
    prefix = [sys.executable, "-m", "game_bridge_mcp.game.pygame", "--port", "0"] if wrapped else [sys.executable]
    env = dict(os.environ, GAME_BRIDGE_INSTANCES=REGISTRY)
    done = subprocess.run([*prefix, str(HERE), "_game", "--seconds", str(seconds)], capture_output=True,
                          text=True, timeout=seconds + 60, env=env, cwd=str(ROOT))
    found = re.search(r"frames (\d+) seconds ([\d.]+) cpu ([\d.]+)", done.stdout)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"the benchmark game failed: {done.stderr[-800:]}")
    frames = int(found.group(1))
    return frames / float(found.group(2)), float(found.group(3)) / frames * 1e6


def bench_overhead(quick: bool) -> dict[str, Any]:
    seconds, rounds = (1.0, 1) if quick else (4.0, 5)
    plain, wrapped = [], []
    for _ in range(rounds):
        plain.append(run_for_fps(False, seconds))
        wrapped.append(run_for_fps(True, seconds))
    fps_plain, fps_wrapped = (benchkit.median(r[0] for r in runs) for runs in (plain, wrapped))
    cpu_plain, cpu_wrapped = (benchkit.median(r[1] for r in runs) for runs in (plain, wrapped))
    return {"rows": [{"game": "uncapped loop 640x480", "plainFps": round(fps_plain), "wrappedFps": round(fps_wrapped),
                      "fpsRatio": round(fps_wrapped / fps_plain, 3), "plainCpuUs": round(cpu_plain, 1),
                      "wrappedCpuUs": round(cpu_wrapped, 1), "overheadCpuUs": round(cpu_wrapped - cpu_plain, 1)}]}


class Wrapped:
    """The game through the wrapper, on a free port read from the wrapper's banner."""

    def __init__(self, *game_args: str) -> None:
        env = dict(os.environ, GAME_BRIDGE_INSTANCES=REGISTRY)
        self.proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp.game.pygame", "--port", "0", str(HERE),
                                      "_game", "--seconds", "600", *game_args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not found:
            self.close()
            raise RuntimeError(f"the wrapper did not start: {line!r}")
        self.port = int(found.group(1))
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()

    def close(self) -> None:
        try:
            if self.proc.poll() is None and hasattr(self, "conn"):
                self.get("/command?cmd=close")
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def bench_screenshot(quick: bool) -> dict[str, Any]:
    reps = 5 if quick else 40
    rows = []
    for size in ("640x480", "1920x1080"):
        game_proc = Wrapped("--fps", "60", "--size", size)
        try:
            game_proc.get("/screenshot")
            for limit in (768, 1568):
                times, last = [], b""
                for _ in range(reps):
                    start = time.perf_counter()
                    status, _headers, last = game_proc.get(f"/screenshot?maxWidth={limit}&maxHeight={limit}")
                    times.append((time.perf_counter() - start) * 1000)
                    if status != 200:
                        raise RuntimeError(f"/screenshot answered {status}")
                stats = benchkit.summary(times, digits=2)
                width, height = (int(n) for n in _png_size(last))
                rows.append({"window": size, "limit": limit, "medianMs": stats["median"], "p95Ms": stats["p95"],
                             "medianFrames": round(stats["median"] / (1000 / 60), 2),
                             "size": f"{width}x{height}", "bytes": len(last)})
        finally:
            game_proc.close()
    return {"rows": rows}


def _png_size(data: bytes) -> tuple[int, int]:
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def bench_input(quick: bool) -> dict[str, Any]:
    trials = 5 if quick else 30
    game_proc = Wrapped("--fps", "60")
    frames: list[float] = []

    def indicator() -> tuple[int, bytes]:
        _status, headers, body = game_proc.get("/screenshot?maxWidth=64&maxHeight=64")
        pixels, width, _height, channels = decode_png(body, max_pixels=10**6)
        offset = (1 * width + 2) * channels  # inside the indicator square (top left)
        return int(headers["x-game-frame"]), pixels[offset:offset + 3]

    try:
        before = indicator()[1]
        for _ in range(trials):
            accepted = json.loads(game_proc.get("/command?cmd=key&key=space")[2])
            start = int(accepted["frame"])
            deadline = time.monotonic() + 10
            while True:
                frame, colour = indicator()
                if colour != before:
                    frames.append(frame - start)
                    before = colour
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the key press never showed")
    finally:
        game_proc.close()
    stats = benchkit.summary(frames, digits=2)
    return {"rows": [{"what": "key space -> first picture showing it", "medianFrames": stats["median"],
                      "p95Frames": stats["p95"], "maxFrames": max(frames), "trials": trials}]}


SECTIONS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "overhead": bench_overhead, "screenshot": bench_screenshot, "input": bench_input}


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["_game"]:
        return game(args_in[1:])
    parser = argparse.ArgumentParser(description="The pygame wrapper's frame overhead and latencies.")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(args_in)
    global REGISTRY
    REGISTRY = tempfile.mkdtemp(prefix="gb-pygamebench-")
    try:
        report = {name: run(args.quick) for name, run in SECTIONS.items()}
    finally:
        shutil.rmtree(REGISTRY, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, result in report.items():
        rows = result["rows"]
        print(f"\n== {name}")
        keys = list(rows[0])
        print("  ".join(keys))
        for row in rows:
            print("  ".join(str(row[key]) for key in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
