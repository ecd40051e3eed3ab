"""scripts/bench_gym.py keeps working: --quick measures a one-step advance and a long one
against the bare loop, the game's own save and load, and two instances launched by one
bridge and stepped round-robin, and leaves no process or scratch directory behind. No
timing is asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gym_helpers import require
from script_runs import run_script

pytestmark = pytest.mark.timeout(200)


@pytest.mark.slow
def test_quick_mode_reports_every_figure_and_leaves_nothing(tmp_path: Path) -> None:
    require("ale_py")
    done, leftovers = run_script("bench_gym.py", "--quick", "--json", timeout=190,
                                 env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    step = report["step"]
    assert step["oneStep"]["bridgeMs"] > 0 and step["oneStep"]["floorMs"] > 0 and step["longAdvance"]["steps"] == 100
    assert step["oneStep"]["requests"] == 2  # a game seen paused: the step and its held answer
    assert step["oneWire"]["ms"] > 0 and step["oneWire"]["cpuMs"] > 0
    snapshot = report["snapshot"]
    assert "skipped" in snapshot or (snapshot["saveMs"] > 0 and snapshot["loadMs"] > 0 and snapshot["bytes"] > 0)
    many = report["many"]
    assert many["instances"] == 2 and many["measured"] == 2 and many["ussMiB"] > 0
    assert many["stepsPerSecond"]["frames1"] > 0 and many["stepsPerSecond"]["frames100"] > 0
    assert leftovers == []
    assert list(tmp_path.glob("gb-gymbench-*")) == []
