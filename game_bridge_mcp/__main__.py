"""``python -m game_bridge_mcp``: the same as the ``game-bridge-mcp`` command."""

from __future__ import annotations

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
