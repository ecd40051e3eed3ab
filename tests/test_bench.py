"""scripts/bench.py keeps working: its --quick mode runs once, against real games and
real servers, reports every figure and every target, and leaves no process or scratch
directory behind.
No timing is asserted: the figures are for people, on the machine they run on."""

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
BENCH = ROOT / "scripts" / "bench.py"
MARK = "GB_BENCH_TEST_MARK"

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


def scratch_dirs(tmp: Path) -> set[Path]:
    return set(tmp.glob("gb-bench-*"))


def test_quick_mode_reports_every_figure_and_reaps_its_processes(tmp_path: Path) -> None:
    # The run gets a temporary directory of its own, so other runs on the machine
    # (another checkout's suite) cannot make its scratch-directory check fail.
    token = uuid.uuid4().hex
    env = dict(os.environ, **{MARK: token}, TMPDIR=str(tmp_path))
    env.pop("GAME_BRIDGE_PORT", None)
    try:
        run = subprocess.run([sys.executable, str(BENCH), "--quick", "--json"], capture_output=True,
                             text=True, env=env, timeout=110, cwd=ROOT)
    finally:
        leftovers = marked(token)
        for proc in leftovers:
            proc.kill()
    assert run.returncode == 0, run.stderr[-3000:]
    assert leftovers == [], [p.cmdline() for p in leftovers]
    assert scratch_dirs(tmp_path) == set()  # the run's scratch directory is removed
    results = json.loads(run.stdout)

    machine = results["machine"]
    assert machine["nproc"] >= 1 and machine["cpu"] and machine["python"] and machine["mcp"]

    for rate in ("1kHz", "60Hz"):
        entry = results["latency"][rate]
        for mode in ("floor", "bridge", "stdio"):
            assert entry[mode]["median"] > 0 and entry[mode]["p95"] >= entry[mode]["median"]
        assert entry["bridgePerCall"]["requests"] >= 2 and entry["bridgePerCall"]["stateFetches"] >= 1

    sizes = results["sizes"]
    assert {v["healthExtension"] for v in sizes.values()} == {True, False}
    for entry in sizes.values():
        assert entry["stateBytes"] > 0
        for mode in ("floor", "bridge", "stdio"):
            figures = entry[mode]
            assert figures["median"] > 0 and figures["requests"] >= 2
            assert figures["stateFetches"] >= 1 and figures["bytes"] >= entry["stateBytes"] * 0.9

    instances = results["instances"]
    assert instances["instances"] >= 2 and instances["ratio"] > 0
    assert instances["single"]["median"] > 0 and instances["concurrent"]["median"] > 0
    assert instances["samePort"]["serialised"] is True  # the Bridge's per-port lock, seen by the game

    startup = results["startup"]
    for name in ("bridge", "bareLowLevel", "bareHighLevel"):
        assert startup[name]["median"] > 0

    memory = results["memory"]
    assert memory["idleMB"] > 0 and memory["withInstancesMB"] > 0

    assert len(results["targets"]) == 7
    assert all(isinstance(t["met"], bool) and t["value"] for t in results["targets"])


def test_the_table_names_every_figure() -> None:
    """The human-readable table is built from the same results (checked without running)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    summary = {"median": 1.0, "p95": 2.0, "n": 3}
    per_call = {"requests": 3.0, "bytes": 1500.0, "stateFetches": 1.0}
    results = {
        "quick": True,
        "machine": {"nproc": 2, "cpu": "Test CPU", "python": "3.11", "serverPython": "3.11", "mcp": "2.3.0"},
        "latency": {rate: {"floor": summary, "bridge": summary, "stdio": summary, "frameMs": ms,
                           "bridgePerCall": per_call, "allModesPerCall": per_call}
                    for rate, ms in (("1kHz", 1.0), ("60Hz", 16.667))},
        "sizes": {label: {"stateBytes": 1200, "healthExtension": ext, "calls": 3,
                          **{m: {**summary, **per_call} for m in ("floor", "bridge", "stdio")}}
                  for label, ext in (("1 KB", True), ("1 KB plain /health", False))},
        "instances": {"instances": 20, "callsPerInstance": 3, "single": summary, "concurrent": summary,
                      "ratio": 1.0, "samePort": {"threads": 4, "calls": 12, **summary, "wallMs": 100.0,
                                                 "maxCommandsInOneFrame": 1, "serialised": True}},
        "startup": {"bridge": summary, "bareLowLevel": summary, "bareHighLevel": summary,
                    "vsLowLevelMs": 0.0, "vsHighLevelMs": 0.0},
        "memory": {"idleMB": 60.0, "withInstancesMB": 61.0, "instances": 20},
    }
    results["targets"] = bench.targets(results)
    text = bench.table(results)
    for needle in ("Test CPU", "1kHz", "60Hz", "1 KB plain /health", "20 at 60 Hz", "serialised",
                   "start-up", "resident memory", "| target |"):
        assert needle in text
    assert text.count("| yes |") + text.count("| NO |") == 7
