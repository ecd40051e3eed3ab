"""scripts/bench_screenshot.py keeps working: its --quick mode measures every section
against real games and leaves no process behind. No timing is asserted."""

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
BENCH = ROOT / "scripts" / "bench_screenshot.py"
MARK = "GB_BENCH_SHOT_MARK"

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
    report = json.loads(done.stdout)
    encode = report["encode"]["rows"]
    assert {(row["limit"], row["way"]) for row in encode} >= {
        (768, "box filter (raw pixels)"), (768, "smoothscale (Surface)"),
        (1568, "box filter (raw pixels)"), (1568, "smoothscale (Surface)")}
    assert {row["size"] for row in encode if row["limit"] == 768} == {"768x432"}
    http = report["http"]["rows"]
    assert {(row["game"], row["limit"]) for row in http} == {
        (game, limit) for game in ("demo (384x616 picture)", "star_catcher 640x480", "star_catcher 1920x1080")
        for limit in (768, 1568)}
    for row in encode + http:
        assert row["medianMs"] > 0 and row["p95Ms"] >= row["medianMs"] and row["bytes"] > 0
        width, height = (int(n) for n in row["size"].split("x"))
        assert row["tokens"] == round(width * height / 750)
    big = {row["limit"]: row["size"] for row in http if row["game"] == "star_catcher 1920x1080"}
    assert big == {768: "768x432", 1568: "1568x882"}
    bridge = report["bridge"]["rows"]
    assert {(row["game"], row["limit"]) for row in bridge} == {(row["game"], row["limit"]) for row in http}
    for row in bridge:
        assert row["medianMs"] > 0 and row["httpMs"] > 0 and row["bytes"] > 0
        assert row["readImageMs"] >= 0 and row["changedMs"] >= 0 and row["saveMs"] >= 0 and row["mcpResultMs"] > 0
    assert {row["size"] for row in bridge if row["game"] == "star_catcher 1920x1080"} == {"768x432", "1568x882"}
    assert marked(token) == []
