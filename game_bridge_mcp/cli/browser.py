"""``game-bridge-mcp browser ...``: exec the browser wrapper, so the pid a launcher started is the
wrapper's and the browser joins its process group."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

WRAPPER = "game_bridge_mcp.game.browser"


def main(argv: Sequence[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", WRAPPER, *argv])
    return 1  # pragma: no cover - execv does not return
