"""``game-bridge-mcp pygame ...``: hand the process over to the pygame wrapper.

It execs the wrapper instead of importing it: the game kit (``game_bridge_mcp.game``) is a side
branch that nothing in the bridge imports (see the package layout), and the wrapped game
must run as this very process, so that the pid a launcher started is the game's. So the
command replaces itself with ``python -m game_bridge_mcp.game.pygame ARGS``, which is
also how to run the wrapper directly.
"""

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
