"""scripts/bench_pygame.py keeps working: --quick measures the wrapper's frame overhead,
screenshot latency and input-to-visible latency against real wrapped games, and leaves
no process or scratch directory behind. No timing is asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from script_runs import run_script

pytestmark = pytest.mark.timeout(120)


@pytest.mark.slow
@pytest.mark.parametrize("script, prefix", [("bench_pygame.py", "gb-pygamebench-"),
                                            ("bench_screenshot.py", "gb-shotbench-")])
def test_quick_mode_leaves_no_scratch_directory(script: str, prefix: str, tmp_path: Path) -> None:
    # A temporary directory of the run's own: another suite running on the machine (or the
    # other parameter) cannot add or remove scratch directories under it meanwhile.
    args = ["--quick", "--json"] + (["--only", "http"] if script == "bench_screenshot.py" else [])
    done, leftovers = run_script(script, *args, env={**os.environ, "TMPDIR": str(tmp_path)})
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
    assert leftovers == []
    assert list(tmp_path.glob(prefix + "*")) == []
