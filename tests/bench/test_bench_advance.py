"""scripts/bench_advance.py keeps working: its --quick mode measures every way against real
demo games and leaves no process behind. No timing is asserted."""

from __future__ import annotations

import json

import pytest

from script_runs import run_script

pytestmark = pytest.mark.timeout(120)


@pytest.mark.slow
def test_quick_mode_reports_every_figure_and_reaps_its_games() -> None:
    done, leftovers = run_script("bench_advance.py", "--quick", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)
    assert [row["hz"] for row in rows] == [60, 1000]
    for row in rows:
        assert set(row["msPerFrame"]) == {"bridge", "poll floor", "after floor", "frames: N", "frames: 1 calls"}
        assert all(ms > 0 for ms in row["msPerFrame"].values())
        assert row["bridge/poll floor"] > 0 and row["bridge/after floor"] > 0
    assert leftovers == []
