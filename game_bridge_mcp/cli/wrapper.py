"""``game-bridge-mcp NAME ...`` for a wrapper of the table (game_bridge_mcp/wrappers.py): exec
it, so the wrapped game runs as this very process and the pid a launcher started is the game's."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..wrappers import Wrapper


def main(wrapper: Wrapper, argv: Sequence[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", wrapper.module, *argv])
    return 1  # pragma: no cover - execv does not return
