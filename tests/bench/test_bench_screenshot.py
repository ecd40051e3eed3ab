"""scripts/bench_screenshot.py keeps working: its --quick mode measures every section
against real games and leaves no process behind. No timing is asserted."""

from __future__ import annotations

import json

import pytest

from script_runs import run_script

pytestmark = pytest.mark.timeout(120)


@pytest.mark.slow
def test_quick_mode_reports_every_figure_and_reaps_its_games() -> None:
    done, leftovers = run_script("bench_screenshot.py", "--quick", "--json")
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
    assert leftovers == []
