"""The benchmark harness: scripts/benchkit.py computes medians, percentiles, spreads and
paired differences one way for every benchmark, and scripts/run_bench.py runs scenarios
by name with one machine description, reaping what they start. No timing is asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from script_runs import run_script

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(200)


def benchkit() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import benchkit as module
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def test_the_statistics_are_computed_one_way() -> None:
    kit = benchkit()
    values = [float(v) for v in range(1, 101)]
    assert kit.percentile(values, 95) == 95.0 and kit.p95(values) == 95.0
    assert kit.percentile([3.0], 95) == 3.0 and kit.percentile([1.0, 2.0], 50) == 1.0
    assert kit.median([5.0, 1.0, 3.0]) == 3.0
    figures = kit.summary([0.001, 0.002, 0.003, 0.004], scale=1000, digits=2)
    assert figures == {"median": 2.5, "p95": 4.0, "iqr": 2.5, "n": 4}
    assert kit.paired([2.0, 3.0, 10.0], [1.0, 1.0, 1.0])["median"] == 2.0
    with pytest.raises(ValueError):
        kit.percentile([], 50)
    machine = kit.machine()
    assert machine["nproc"] >= 1 and machine["python"] and "loadAverage" in machine


@pytest.mark.slow
def test_the_runner_runs_scenarios_by_name_with_one_machine_description() -> None:
    listed, _ = run_script("run_bench.py", "--list")
    assert listed.returncode == 0 and all(name in listed.stdout for name in ("confirm", "discovery", "http", "browser"))
    run, leftovers = run_script("run_bench.py", "--quick", "discovery", "decode", timeout=190)
    assert run.returncode == 0, run.stderr[-3000:]
    assert leftovers == []
    report = json.loads(run.stdout)
    assert report["machine"]["nproc"] >= 1 and report["quick"] is True
    discovery = report["scenarios"]["discovery"]
    assert discovery["exitCode"] == 0 and discovery["argv"][:2] == ["--json", "--quick"]
    results = discovery["results"]
    assert results["listInstances"]["counts"]["live"] == 8 and results["hung"]["reported"] is True
    assert isinstance(results["listInstances"]["met"], bool)
    assert report["scenarios"]["decode"]["exitCode"] == 0
    refused, _ = run_script("run_bench.py", "nonsense")
    assert refused.returncode != 0 and "unknown scenario" in refused.stderr
