"""``game-bridge-mcp pygame ...``: exec the pygame wrapper, so the wrapped game runs as this very
process and the pid a launcher started is the game's."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

WRAPPER = "game_bridge_mcp.game.pygame"


def main(argv: Sequence[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", WRAPPER, *argv])
    return 1  # pragma: no cover - execv does not return
