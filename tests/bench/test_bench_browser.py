"""scripts/bench_browser.py keeps working: --quick measures the browser wrapper's launch to
ready, screenshot and step latency, the page's fps with and without it and its memory,
each beside its floor, and leaves no process or scratch directory behind. No timing is
asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from script_runs import run_script
from web_helpers import require_browser

pytestmark = pytest.mark.timeout(150)


@pytest.mark.slow
def test_quick_mode_reports_every_figure_and_leaves_nothing_behind(short_tmp_path: Path) -> None:
    tmp_path = short_tmp_path  # Chromium's socket goes under TMPDIR: a short path
    require_browser()
    done, leftovers = run_script("bench_browser.py", "--quick", "--json", timeout=140,
                                 env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    figures = {row["figure"]: row for row in report["rows"]}
    assert set(figures) == {"launch to ready (s)", "screenshot, 800x600 page 1:1 (ms)",
                            "screenshot, 800x600 page at 768 (ms)", "step {frames: 1} (ms)"}
    for row in figures.values():
        assert row["wrapper"]["median"] > 0 and row["floor"]["median"] > 0 and row["wrapper"]["n"] >= 2
        assert row["over"]["n"] == row["wrapper"]["n"] == row["floor"]["n"] and row["ratio"] > 0  # paired rounds
    assert report["fps"]["wrapped"] > 0 and report["fps"]["plain"] > 0
    assert all(report["memory"][key] > 0 for key in ("browserMiB", "driverMiB", "wrapperMiB")), report["memory"]
    assert leftovers == []
    assert list(tmp_path.glob("gb-browserbench-*")) == []
