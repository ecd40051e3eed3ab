#!/usr/bin/env python3
"""What a screenshot costs: scaling and encoding in the kit, and the whole request over HTTP.

Sections (each a function in ``SECTIONS``):

* **encode**: a 1920x1080 game frame (drawn with pygame-ce: gradient sky, shapes, text)
  scaled to fit 768 and 1568 and encoded as PNG, three ways: the kit's pure box filter
  (raw pixels, what a game without an engine gets), ``smoothscale`` (a Surface), and no
  scaling (encode only). Median and p95 per frame, bytes, image tokens (w x h / 750).
* **http**: ``GET /screenshot`` against real games started here and reaped here: the demo
  (its 384x616 picture) and ``examples/star_catcher.py`` (a pygame-ce game, 640x480 and
  1920x1080), at ``maxWidth=maxHeight=768`` and ``1568``; request to last byte, median and
  p95, in ms and in the game's frames, bytes and tokens.

* **bridge**: ``get_screenshot`` through the Bridge against the same games and limits,
  against a bare ``GET /screenshot`` interleaved with it (the difference is the bridge's
  cost: a ``/health``, reading the whole image, ``changed``, the saved copy, plus where
  the extra request lands in the game's frame), and the parts: reading the image,
  ``changed`` (SHA-256), saving the copy (with pruning), the MCP result (base64 + JSON).

    .venv/bin/python scripts/bench_screenshot.py [--quick] [--json] [--only encode|http|bridge]

No figure is a pass/fail target; compare ratios on a noisy machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import benchkit
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
#: The games' registry entries go here (a scratch directory made in main(), removed after).
REGISTRY = ""
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

from game_bridge_mcp.game import image  # noqa: E402

LIMITS = (768, 1568)
EXAMPLE = ROOT / "examples" / "star_catcher.py"


def tokens(width: int, height: int) -> int:
    """The usual estimate of what an image costs a model: one token per 750 pixels."""
    return round(width * height / 750)


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], Any]:
    samples, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return samples, result


# =========================================================================== encode
def game_frame(size: tuple[int, int] = (1920, 1080)) -> Any:
    """A deterministic frame that looks like a game: sky gradient, ground, sprites, text."""
    import pygame

    pygame.init()
    width, height = size
    surface = pygame.Surface(size)
    for y in range(height):
        shade = 40 + 120 * y // height
        pygame.draw.line(surface, (20, shade // 2, shade), (0, y), (width, y))
    pygame.draw.rect(surface, (60, 110, 40), (0, height * 3 // 4, width, height // 4))
    for i in range(60):
        x, y = (i * 397) % width, (i * 211) % (height * 3 // 4)
        pygame.draw.circle(surface, (255, 220 - i, 60 + 2 * i), (x, y), 8 + i % 20)
        pygame.draw.rect(surface, (200, 80 + i * 2, 80), (x + 30, y + 40, 50, 30))
    font = pygame.font.Font(None, 64)
    surface.blit(font.render("SCORE 123456   LIVES 3   LEVEL 7", True, (250, 250, 250)), (40, 30))
    return surface


def bench_encode(quick: bool) -> dict[str, Any]:
    import pygame

    reps = 2 if quick else 9
    frame = game_frame()
    raw = pygame.image.tobytes(frame, "RGB")
    rows: list[dict[str, Any]] = []
    for limit in LIMITS:
        for way, run in (
            ("box filter (raw pixels)", lambda lim=limit: image.from_pixels(raw, 1920, 1080, "RGB",
                                                                            max_width=lim, max_height=lim)),
            ("smoothscale (Surface)", lambda lim=limit: image.from_surface(frame, max_width=lim, max_height=lim)),
        ):
            samples, shot = timed(run, reps)
            rows.append({"limit": limit, "way": way, **benchkit.in_ms(samples, digits=2),
                         "size": f"{shot.width}x{shot.height}", "bytes": len(shot.data),
                         "tokens": tokens(shot.width, shot.height)})
    width, height = frame.get_size()
    samples, png = timed(lambda: image.encode_png(raw, width, height, 3), reps)
    rows.append({"limit": None, "way": "encode only, 1920x1080", **benchkit.in_ms(samples, digits=2),
                 "size": "1920x1080", "bytes": len(png), "tokens": tokens(width, height)})
    return {"frame": "1920x1080 RGB", "rows": rows}


# =========================================================================== http
class Game:
    """A game child process, its port read from its first line, reaped on exit."""

    def __init__(self, label: str, argv: list[str], frame_hz: float) -> None:
        self.label, self.frame_hz = label, frame_hz
        env = dict(os.environ, GAME_BRIDGE_INSTANCES=REGISTRY)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env=env, cwd=str(ROOT))
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if "http://127.0.0.1:" not in line:
            self.close()
            raise RuntimeError(f"{label} did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1].split()[0])
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
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def games() -> Iterator[tuple[str, list[str], float]]:
    py = sys.executable
    yield "demo (384x616 picture)", [py, "-m", "game_bridge_mcp.game.demo", "--port", "0", "--no-register"], 60.0
    yield "star_catcher 640x480", [py, str(EXAMPLE), "--debug-port", "0"], 60.0
    yield "star_catcher 1920x1080", [py, str(EXAMPLE), "--debug-port", "0", "--size", "1920x1080"], 60.0


def bench_http(quick: bool) -> dict[str, Any]:
    reps = 5 if quick else 40
    rows: list[dict[str, Any]] = []
    for label, argv, hz in games():
        game = Game(label, argv, hz)
        try:
            game.get("/screenshot")  # warm up (imports, first encode)
            for limit in LIMITS:
                samples: list[float] = []
                last: bytes = b""
                for _ in range(reps):
                    start = time.perf_counter()
                    status, headers, body = game.get(f"/screenshot?maxWidth={limit}&maxHeight={limit}")
                    samples.append(time.perf_counter() - start)
                    if status != 200:
                        raise RuntimeError(f"{label}: /screenshot answered {status}: {body[:200]!r}")
                    last = body
                _mime, width, height = image.image_info(last)
                stats = benchkit.in_ms(samples, digits=2)
                rows.append({"game": label, "limit": limit, **stats,
                             "medianFrames": round(stats["medianMs"] / (1000 / hz), 2),
                             "size": f"{width}x{height}", "bytes": len(last), "tokens": tokens(width, height)})
        finally:
            game.close()
    return {"rows": rows}


# =========================================================================== bridge
def bench_bridge(quick: bool) -> dict[str, Any]:
    """``get_screenshot`` through the Bridge (in-process: health, GET /screenshot, the whole
    image read and checked, ``changed``, the saved copy) against a bare ``GET /screenshot``
    of the same game, interleaved call by call; and its parts: reading the image
    (``inspect_image``), ``changed`` (SHA-256 of the body), the MCP result (base64 + JSON)."""
    import hashlib
    import tempfile

    from game_bridge_mcp.config import Config
    from game_bridge_mcp.core.bridge import Bridge
    from game_bridge_mcp.core.screenshot import IMAGE_KEY
    from game_bridge_mcp.mcp_server.results import result_of
    from game_bridge_mcp.wire.images import inspect_image

    reps = 3 if quick else 40
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gb-bench-shots-") as shots:
        for label, argv, hz in games():
            game = Game(label, argv, hz)
            try:
                bridge = Bridge(Config(port=game.port, scan=False, registry=False,
                                       environ={"GAME_BRIDGE_SCREENSHOTS": shots}))
                game.get("/screenshot")  # warm up (imports, first encode)
                for limit in LIMITS:
                    arguments = {"name": "get_screenshot", "arguments": {"maxWidth": limit, "maxHeight": limit, "always": True}}
                    through, direct = [], []
                    result: dict[str, Any] = {}
                    for _ in range(reps):
                        start = time.perf_counter()
                        result = bridge.run_tool("call_tool", arguments)
                        through.append(time.perf_counter() - start)
                        start = time.perf_counter()
                        game.get(f"/screenshot?maxWidth={limit}&maxHeight={limit}")
                        direct.append(time.perf_counter() - start)
                    body = result[IMAGE_KEY].data
                    check, _ = timed(lambda: inspect_image(body, "image/png"), reps * 3)
                    digest, _ = timed(lambda: hashlib.sha256(body).digest(), reps * 3)
                    encode, _ = timed(lambda: result_of(dict(result)), reps * 3)
                    save, _ = timed(lambda: bridge.screenshots.save(game.port, 0, body, "png"), reps * 3)
                    ms = {name: benchkit.in_ms(samples, digits=2)["medianMs"]
                          for name, samples in (("check", check), ("digest", digest), ("save", save), ("encode", encode))}
                    bridge_stats, http_stats = benchkit.in_ms(through, digits=2), benchkit.in_ms(direct, digits=2)
                    rows.append({"game": label, "limit": limit, "size": f"{result['width']}x{result['height']}",
                                 "bytes": len(body), "tokens": tokens(result["width"], result["height"]),
                                 "medianMs": bridge_stats["medianMs"], "httpMs": http_stats["medianMs"],
                                 "overheadMs": round(bridge_stats["medianMs"] - http_stats["medianMs"], 2),
                                 "readImageMs": ms["check"], "changedMs": ms["digest"], "saveMs": ms["save"],
                                 "mcpResultMs": ms["encode"],
                                 "p95Ms": bridge_stats["p95Ms"]})
            finally:
                game.close()
    return {"rows": rows}


#: name -> function(quick) -> figures.
SECTIONS: dict[str, Callable[[bool], dict[str, Any]]] = {"encode": bench_encode, "http": bench_http,
                                                         "bridge": bench_bridge}


def print_table(name: str, result: dict[str, Any]) -> None:
    rows = result["rows"]
    print(f"\n== {name}" + (f" ({result['frame']})" if "frame" in result else ""))
    columns = [key for key in rows[0] if key != "p95Ms"] + ["p95Ms"]
    widths = {key: max(len(key), *(len(str(row.get(key, ""))) for row in rows)) for key in columns}
    print("  ".join(key.ljust(widths[key]) for key in columns))
    for row in rows:
        print("  ".join(str(row.get(key, "")).ljust(widths[key]) for key in columns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshot cost: kit scaling/encoding and HTTP latency.")
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append", help="run only these sections")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"machine": f"{platform.python_implementation()} {platform.python_version()}, "
                                         f"{os.cpu_count()} CPUs"}
    global REGISTRY
    REGISTRY = tempfile.mkdtemp(prefix="gb-shotbench-")
    try:
        for name in args.only or list(SECTIONS):
            report[name] = SECTIONS[name](args.quick)
    finally:
        shutil.rmtree(REGISTRY, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"machine: {report['machine']}")
        for name in args.only or list(SECTIONS):
            print_table(name, report[name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
