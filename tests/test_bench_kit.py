"""scripts/bench_kit.py keeps working: --quick measures every section against a real demo
child and in-process kit games, and leaves no process behind. No timing is asserted."""

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
BENCH = ROOT / "scripts" / "bench_kit.py"
MARK = "GB_BENCH_KIT_MARK"

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


def test_quick_mode_reports_every_figure_and_reaps_the_demo() -> None:
    token = uuid.uuid4().hex
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--json"], capture_output=True, text=True,
                          timeout=110, env=dict(os.environ, **{MARK: token}), cwd=str(ROOT))
    leftovers = marked(token)
    for proc in leftovers:
        proc.kill()
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
