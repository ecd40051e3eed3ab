"""scripts/bench_timeline.py keeps working: its marks are hooked onto the functions a call
passes through by name (a renamed function stops the run, naming it), the stretches run
from the client's write to the client holding the answer's line, and nothing is left
behind. No timing is asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from script_runs import run_script

pytestmark = pytest.mark.timeout(120)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--no-ext"]], ids=["after", "no-ext"])
def test_a_short_run_times_every_stretch_of_a_call(extra: list[str], tmp_path: Path) -> None:
    done, leftovers = run_script("bench_timeline.py", "--calls", "8", "--json", *extra,
                                 env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert leftovers == [] and list(tmp_path.glob("gb-timeline-*")) == []
    report = json.loads(done.stdout)
    assert report["extensions"] is (extra == [])
    names = [row["stretch"] for row in report["stretches"]]
    # Every hooked function was passed through, in a call's order.
    assert names[0] == "client writes -> awake" and names[-1].endswith("-> client has the line")
    for expected in ("awake -> line read", "taking -> call runs", "run_tool -> run_command",
                     "run_command -> request out", "request out -> answer in", "answer in -> confirmed",
                     "confirmed -> answer made", "answer made -> checked", "encoding -> encoded",
                     "writing -> client has the line"):
        assert expected in names, (expected, names)
    requests = next(row for row in report["stretches"] if row["stretch"] == "request out -> answer in")
    assert requests["n"] >= 2 * 8  # the command and at least one /state, each call
    if extra == []:  # with after: exactly the command and one held /state
        assert requests["n"] == 2 * 8
    assert all(row["medianUs"] >= 0 and row["n"] >= 1 for row in report["stretches"])
