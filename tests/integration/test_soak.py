"""scripts/soak.py keeps working: a few seconds of calls, launches, kills (of games and of
a whole server), cancellations, a flood of a game's own server and the probes of the
bridge's own bounds (scripts/soak_bounds.py) against the real server,
with nothing surviving, no foreign sentinel harmed, no kit bound broken and no scratch
directory left. No figure is asserted: the soak's figures are for docs/reliability.md, on
the machine that ran it."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(420)


@pytest.mark.slow
def test_a_short_soak_leaves_nothing_behind_and_harms_nothing() -> None:
    before = set(Path(tempfile.gettempdir()).glob("gb-soak-*"))
    # Six cycles whatever the machine's speed; the bridge is SIGKILLed on cycles 2 and 5.
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "soak.py"), "--cycles", "6",
                           "--kill-bridge-every", "0", "--json"], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["survivors"] == [] and report["foreignHarmed"] == [] and report["boundsBroken"] == []
    counts = report["counts"]
    assert counts["launches"] == 6 and counts["cancellations"] == 6 and counts["bridgeKills"] == 2
    # One flood of the game's server (cycle 2): /health answered, the game held to its cap.
    assert counts["floods"] == 1 and report["floods"][0]["healthMs"] is not None
    assert all(server["atEnd"]["threads"] > 0 for server in report["servers"] if server["atEnd"])
    # The bridge's own bounds, probed once: huge screenshots, an unread flood, a crafted trace.
    bridge = report["bridgeBounds"]
    assert counts["boundProbes"] == 1 and bridge["broken"] == []
    assert bridge["flood"]["exitSeconds"] is not None and bridge["trace"]["reportMB"]
    assert set(Path(tempfile.gettempdir()).glob("gb-soak-*")) <= before
