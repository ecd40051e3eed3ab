"""scripts/bench_advance.py keeps working: its --quick mode measures every way against real
demo games and leaves no process behind. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scripts" / "bench_advance.py"
MARK = "GB_BENCH_ADVANCE_MARK"

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


def test_quick_mode_reports_every_figure_and_reaps_its_games() -> None:
    token = uuid.uuid4().hex
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--json"], capture_output=True, text=True,
                          timeout=110, env=dict(os.environ, **{MARK: token}), cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)
    assert [row["hz"] for row in rows] == [60, 1000]
    for row in rows:
        assert set(row["msPerFrame"]) == {"bridge", "poll floor", "after floor", "frames: N"}
        assert all(ms > 0 for ms in row["msPerFrame"].values())
        assert row["bridge/poll floor"] > 0 and row["bridge/after floor"] > 0
    assert marked(token) == []
