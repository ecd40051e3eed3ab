"""``game-bridge-mcp browser ...``: hand the process over to the browser wrapper.

It execs the wrapper instead of importing it: as for ``pygame``, the game kit is a side branch
nothing in the bridge imports, and the wrapper must be this very process, so that the
pid a launcher started is the wrapper's and the browser joins that process's group. So
the command replaces itself with ``python -m game_bridge_mcp.game.browser ARGS``.
"""

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
