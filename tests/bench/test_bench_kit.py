"""scripts/bench_kit.py keeps working: --quick measures every section against a real demo
child and in-process kit games, and leaves no process behind. No timing is asserted."""

from __future__ import annotations

import json

import pytest

from script_runs import run_script

pytestmark = pytest.mark.timeout(120)


@pytest.mark.slow
def test_quick_mode_reports_every_figure_and_reaps_the_demo() -> None:
    done, leftovers = run_script("bench_kit.py", "--quick", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert leftovers == []
    report = json.loads(done.stdout)
    assert report["machine"]["nproc"] >= 1
    rows = report["demo"]["rows"]
    assert [row["paddingKb"] for row in rows] == [0, 256]
    for row in rows:
        assert row["full"]["bytes"] > row["digest"]["bytes"] > 0 and row["fullOverDigest"] > 0
    assert rows[1]["full"]["bytes"] > 256 * 1024 > 10 * rows[1]["digest"]["bytes"]
    live = report["live"]["rows"][0]
    for key in ("byReference", "builtEachCall", "builtEachCallWithDigestFn"):
        assert live[key]["full"]["bytes"] > 10 * live[key]["digest"]["bytes"]
        assert live[key]["digest"]["medianMs"] > 0
