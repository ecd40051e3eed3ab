#!/usr/bin/env python3
"""What the browser wrapper costs a web game, and how quickly an agent can drive one.

Each figure beside its floor, measured in the same run on the same Chromium:

* **launch to ready**: spawning ``python -m game_bridge_mcp.game.browser PAGE`` until
  ``/health`` answers, against a Python process with the library alone launching the
  browser and loading the same page (``launch`` + ``goto``, no wrapper).
* **screenshot**: ``GET /screenshot`` at the default size (an 800x600 page, 768 x 768) on a
  paused page, against a bare ``Page.captureScreenshot`` through the library.
* **step {frames: 1}**: ``/command?cmd=step&frames=1`` then ``/state?after=<id>``, against
  its floor: two kit HTTP round trips (``/health``) plus one ``page.evaluate`` round trip.
* **fps**: the page's own animation frames per second, unpaused, through the wrapper and
  in the same browser without it.
* **memory**: per instance, USS (what ending them frees) of the browser's processes, the
  library's driver (Node) and the wrapper's Python.

    .venv/bin/python scripts/bench_browser.py [--quick] [--json] [--browser PATH]

The page is written here (a 640x480 canvas redrawn every animation frame). Every process
is started and reaped here; the browser's are found by a mark in their environment.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import benchkit

ROOT = Path(__file__).resolve().parents[1]
MARK = "GB_BROWSER_BENCH"
PAGE = """<!doctype html><html><head><title>Bench</title></head><body style="margin:0">
<canvas id="c" width="640" height="480"></canvas><script>
let frames = 0;
const g = document.getElementById('c').getContext('2d');
function frame(t) {
  frames++;
  g.fillStyle = '#123'; g.fillRect(0, 0, 640, 480);
  for (let i = 0; i < 50; i++) { g.fillStyle = `hsl(${(i * 7 + frames) % 360},70%,50%)`;
    g.fillRect((i * 37 + frames * 3) % 640, (i * 53) % 480, 20, 20); }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
window.gameBridge = { state: () => ({ game: { frames } }) };
</script></body></html>
"""


def get(port: int, path: str, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def doc(port: int, path: str) -> Any:
    return json.loads(get(port, path)[2])


class Wrapper:
    """One wrapper process on the page, paused; its port from its banner."""

    def __init__(self, page: Path, env: dict[str, str], browser: str | None) -> None:
        args = [sys.executable, "-m", "game_bridge_mcp.game.browser", "--port", "0", "--paused"]
        if browser:
            args += ["--browser", browser]
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([*args, str(page)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.port = self._banner()
        while True:
            try:
                get(self.port, "/health", timeout=5)
                break
            except OSError:
                time.sleep(0.005)
        self.ready_s = time.perf_counter() - self.started

    def _banner(self) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stderr], [], [], 1)
            if ready:
                line = self.proc.stderr.readline()
                if not line:
                    raise RuntimeError("the wrapper ended before serving")
                found = re.search(r"serving on http://127\.0\.0\.1:(\d+)", line)
                if found:
                    return int(found.group(1))
        raise RuntimeError("the wrapper did not serve within 60 s")

    def run(self, query: str) -> dict[str, Any]:
        command = doc(self.port, "/command?" + query)["commandId"]
        return dict(doc(self.port, f"/state?after={command}&waitMs=20000"))

    def close(self) -> None:
        try:
            get(self.port, "/command?cmd=close", timeout=5)
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def marked(token: str) -> list[Any]:
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def memory(token: str) -> dict[str, float]:
    """USS in MiB of the marked processes: the browser's, the library's driver (Node) and
    the wrapper's Python (with the browser's stand-in)."""
    sums = {"browserMiB": 0.0, "driverMiB": 0.0, "wrapperMiB": 0.0}
    for proc in marked(token):
        try:
            uss = proc.memory_full_info().uss / 2 ** 20
            name, argv0 = proc.name(), (proc.cmdline() or [""])[0]
        except Exception:  # noqa: BLE001 - gone meanwhile
            continue
        if "python" in Path(argv0).name:
            sums["wrapperMiB"] += uss
        elif name == "node" or Path(argv0).name == "node":
            sums["driverMiB"] += uss
        else:
            sums["browserMiB"] += uss
    return {key: round(value, 1) for key, value in sums.items()}


FLOOR_LAUNCH = """
import os, sys
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    b = p.chromium.launch(executable_path=sys.argv[1], headless=True, chromium_sandbox=os.geteuid() != 0)
    b.new_context(viewport={"width": 800, "height": 600}).new_page().goto(sys.argv[2], wait_until="load")
    print("ready", flush=True)
    sys.stdin.read()
    b.close()
"""


def floors(page: Path, browser: str, rounds: int) -> dict[str, Any]:
    """The library alone: launch + goto, a bare screenshot, an evaluate, the page's fps."""
    from playwright.sync_api import sync_playwright

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(page.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{page.name}"
    launches, shots, evals = [], [], []
    fps = 0.0
    try:
        for _ in range(rounds):  # a process of its own, as the wrapper is: Python, the driver, the browser
            started = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", FLOOR_LAUNCH, browser, url], stdout=subprocess.PIPE,
                                    stdin=subprocess.PIPE, text=True)
            assert proc.stdout is not None and proc.stdin is not None
            line = proc.stdout.readline()
            launches.append(time.perf_counter() - started)
            assert line.strip() == "ready", line
            proc.stdin.close()
            proc.wait(30)
            proc.stdout.close()
        with sync_playwright() as p:
            for index in range(1):
                chromium = p.chromium.launch(executable_path=browser, headless=True,
                                             chromium_sandbox=os.geteuid() != 0)
                tab = chromium.new_context(viewport={"width": 800, "height": 600}).new_page()
                tab.goto(url, wait_until="load")
                if index == 0:
                    cdp = tab.context.new_cdp_session(tab)
                    for _ in range(rounds * 10):
                        t = time.perf_counter()
                        cdp.send("Page.captureScreenshot", {"format": "png", "clip": {
                            "x": 0, "y": 0, "width": 800, "height": 600, "scale": 0.96}})
                        shots.append(time.perf_counter() - t)
                    for _ in range(rounds * 20):
                        t = time.perf_counter()
                        tab.evaluate("1")
                        evals.append(time.perf_counter() - t)
                    before = tab.evaluate("frames")
                    t = time.perf_counter()
                    tab.wait_for_timeout(2000)
                    fps = (tab.evaluate("frames") - before) / (time.perf_counter() - t)
                chromium.close()
    finally:
        server.shutdown()
    return {"launch": launches, "shot": shots, "eval": evals, "fps": fps}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args: Any) -> None:
        pass


def measure(args: argparse.Namespace) -> dict[str, Any]:
    browser = args.browser or shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("no chromium on PATH: apt-get install chromium, or --browser PATH")
    rounds = 2 if args.quick else 5
    scratch = Path(tempfile.mkdtemp(prefix="gb-browserbench-"))
    token = uuid.uuid4().hex
    env = {**os.environ, MARK: token, "GAME_BRIDGE_INSTANCES": str(scratch / "instances"),
           "PYTHONPATH": str(ROOT)}
    page = scratch / "bench.html"
    page.write_text(PAGE, encoding="utf-8")
    report: dict[str, Any] = {"machine": benchkit.machine()}
    try:
        floor = floors(page, browser, rounds)
        readies, shots, steps, healths = [], [], [], []
        fps = 0.0
        mem: dict[str, float] = {}
        for index in range(rounds):
            wrapper = Wrapper(page, env, browser)
            readies.append(wrapper.ready_s)
            try:
                if index == 0:
                    wrapper.run("cmd=step&frames=2")
                    for _ in range(rounds * 10):
                        t = time.perf_counter()
                        status, _headers, _body = get(wrapper.port, "/screenshot")
                        shots.append(time.perf_counter() - t)
                        assert status == 200
                    for _ in range(rounds * 20):
                        t = time.perf_counter()
                        wrapper.run("cmd=step&frames=1")
                        steps.append(time.perf_counter() - t)
                        t = time.perf_counter()
                        get(wrapper.port, "/health")
                        get(wrapper.port, "/health")
                        healths.append(time.perf_counter() - t)
                    mem = memory(token)
                    wrapper.run("cmd=resume")
                    before = doc(wrapper.port, "/state")["game"]["frames"]
                    t = time.perf_counter()
                    time.sleep(3.0 if not args.quick else 2.0)  # the page runs on its own meanwhile
                    fps = (doc(wrapper.port, "/state")["game"]["frames"] - before) / (time.perf_counter() - t)
            finally:
                wrapper.close()
        step_floor = [h + e for h, e in zip(healths, floor["eval"])]
        rows = [
            {"figure": "launch to ready (s)", "wrapper": benchkit.summary(readies, digits=2),
             "floor": benchkit.summary(floor["launch"], digits=2), "floorIs": "a process: the library launches, goto"},
            {"figure": "screenshot, 800x600 page at 768 (ms)", "wrapper": benchkit.summary(shots, scale=1000, digits=1),
             "floor": benchkit.summary(floor["shot"], scale=1000, digits=1), "floorIs": "bare Page.captureScreenshot"},
            {"figure": "step {frames: 1} (ms)", "wrapper": benchkit.summary(steps, scale=1000, digits=2),
             "floor": benchkit.summary(step_floor, scale=1000, digits=2), "floorIs": "two kit round trips + page.evaluate"},
        ]
        report["rows"] = rows
        report["fps"] = {"wrapped": round(fps, 1), "plain": round(floor["fps"], 1)}
        report["memory"] = mem
    finally:
        for proc in marked(token):  # whatever is left (nothing, when the wrappers closed)
            try:
                proc.kill()
            except Exception:  # noqa: BLE001
                pass
        shutil.rmtree(scratch, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (what the suite runs)")
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    parser.add_argument("--browser", default=None, help="the Chromium to use (default: chromium on PATH)")
    args = parser.parse_args()
    report = measure(args)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"machine: {report['machine']}")
    print(f"{'figure':40} {'wrapper median (p95)':>22} {'floor median (p95)':>20} ratio  floor")
    for row in report["rows"]:
        w, f = row["wrapper"], row["floor"]
        ratio = w["median"] / f["median"] if f["median"] else float("nan")
        print(f"{row['figure']:40} {w['median']:>12} ({w['p95']}) {f['median']:>12} ({f['p95']}) "
              f"{ratio:5.2f}x  {row['floorIs']}")
    fps = report["fps"]
    print(f"page fps unpaused: {fps['wrapped']} through the wrapper, {fps['plain']} without it")
    mem = report["memory"]
    print(f"memory per instance (USS): browser {mem.get('browserMiB')} MiB, the library's driver "
          f"{mem.get('driverMiB')} MiB, the wrapper's Python {mem.get('wrapperMiB')} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
