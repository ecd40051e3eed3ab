"""scripts/bench_states.py keeps working: its --quick mode measures save, restore, fork and
re-execution (the demo, and a web page and a pygame game where they can run) against their
floors, with every figure and ratio there, and leaves no process behind. No timing is asserted."""

from __future__ import annotations

import json

import pytest

from script_runs import run_script

pytestmark = pytest.mark.timeout(600)


@pytest.mark.slow
def test_quick_mode_reports_every_figure_and_reaps_its_games() -> None:
    done, leftovers = run_script("bench_states.py", "--quick", "--json", timeout=560)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    saving = report["save and restore (demo)"]
    assert saving["exact"] is True and saving["restore/get_state"] > 0
    assert all(saving[name]["medianMs"] > 0 for name in ("get_state", "save_state", "restore_state"))
    fork = report["fork (demo)"]
    assert fork["exact"] is True and fork["fork/launch"] > 0
    reexecuted = [key for key in report if key.startswith("re-execution: ")]
    assert "re-execution: demo --no-snapshot" in reexecuted and len(reexecuted) == 3  # demo, web page, pygame
    for key in reexecuted:
        row = report[key]
        assert row["exact"] is True, (key, row)
        assert row["restore/by hand"] > 0 and row["frames"] == 30
    assert leftovers == []
