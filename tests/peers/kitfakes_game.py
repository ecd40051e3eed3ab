"""A kit-based game script that gets the registry rules wrong on request, for
``check --launch`` tests: ``python tests/peers/kitfakes_game.py --port N [--register-early]
[--leave-entry]``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from game_bridge_mcp.game import GameBridge  # noqa: E402
from game_bridge_mcp.registry import register_instance  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--register-early", action="store_true",
                        help="write the registry entry half a second before binding the port")
    parser.add_argument("--leave-entry", action="store_true",
                        help="do not remove the registry entry on close")
    args = parser.parse_args()
    entry = None
    if args.register_early:
        entry = register_instance(port=args.port, name="Early Bird", version="1", remove_at_exit=False)
        time.sleep(0.5)
    bridge = GameBridge("Early Bird", "1", register=False, state=lambda: {"game": {"ok": 1}})
    bridge.start(args.port)
    if not args.register_early:
        entry = register_instance(port=args.port, name="Early Bird", version="1", remove_at_exit=False)
    bridge.run(hz=200)
    if entry is not None and not args.leave_entry:
        entry.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
