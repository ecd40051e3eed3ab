"""``python -m game_bridge_mcp.game.gym ...``: the Gymnasium wrapper (see the package)."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover - exercised through subprocess tests
    sys.exit(main())
