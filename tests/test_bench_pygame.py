"""scripts/bench_pygame.py keeps working: --quick measures the wrapper's frame overhead,
screenshot latency and input-to-visible latency against real wrapped games, and leaves
no process or scratch directory behind. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
MARK = "GB_BENCH_PYGAME_MARK"

pytestmark = pytest.mark.timeout(120)


def marked(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("script, prefix", [("bench_pygame.py", "gb-pygamebench-"),
                                            ("bench_screenshot.py", "gb-shotbench-")])
def test_quick_mode_leaves_no_scratch_directory(script: str, prefix: str) -> None:
    before = set(Path(tempfile.gettempdir()).glob(prefix + "*"))
    token = uuid.uuid4().hex
    args = ["--quick", "--json"] + (["--only", "http"] if script == "bench_screenshot.py" else [])
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True,
                          text=True, timeout=110, env=dict(os.environ, **{MARK: token}), cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    if script == "bench_pygame.py":
        overhead = report["overhead"]["rows"][0]
        assert overhead["plainFps"] > 0 and overhead["wrappedFps"] > 0
        assert {(r["window"], r["limit"]) for r in report["screenshot"]["rows"]} == {
            ("640x480", 768), ("640x480", 1568), ("1920x1080", 768), ("1920x1080", 1568)}
        assert {r["size"] for r in report["screenshot"]["rows"] if r["window"] == "1920x1080"} == {
            "768x432", "1568x882"}
        assert report["input"]["rows"][0]["medianFrames"] >= 1  # never before the frame that read it
    assert marked(token) == []
    assert set(Path(tempfile.gettempdir()).glob(prefix + "*")) == before
