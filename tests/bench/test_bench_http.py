"""scripts/bench_http.py keeps working: a short run measures a confirmed call over HTTP
and stdio, 8 sessions against 8 games and memory per idle session, against real games and
real servers, and leaves no process or scratch directory behind. No timing is asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from script_runs import run_script

pytestmark = pytest.mark.timeout(240)


@pytest.mark.slow
def test_a_short_run_reports_every_figure_and_reaps_its_processes(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("GAME_BRIDGE_TOKEN", None)
    done, leftovers = run_script("bench_http.py", "--calls", "10", "--sessions", "3", "--json", env=env, timeout=230)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    call = report["a confirmed call_tool, 1 kHz game (ms)"]
    for mode in ("stdio, fast path", "stdio, SDK dispatch", "HTTP, fast path", "HTTP, SDK dispatch",
                 "HTTP, the SDK's client"):
        assert call[mode]["n"] == 10 and call[mode]["median"] > 0
    # each HTTP mode measured the path it names: the fast path answers JSON, the SDK's an SSE stream
    assert call["answered as"] == {"HTTP, fast path": "application/json", "HTTP, SDK dispatch": "text/event-stream"}
    assert call["target"]["under (ms)"] == 1.0 and isinstance(call["target"]["met"], bool)
    many = report["8 sessions against 8 games (ms)"]
    assert many["8 sessions at once, every call"]["n"] == 8 * 10 and many["calls per second, all sessions"] > 0
    assert report["memory"]["sessions"] == 3 and report["memory"]["rss with them idle (MB)"] > 0
    assert leftovers == []
    assert list(tmp_path.glob("gb-bench-http-*")) == []
