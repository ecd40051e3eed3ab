"""The game kit: :class:`GameBridge` (``bridge.py``) serves the game-bridge contract from a
Python game, and the parts it is built from, one owner each: typed commands (``args.py``),
the command queue (``commands.py``), the clock, events, outcomes, ``/state``, the routes,
``/screenshot``, serving and the registry entry. A game imports :mod:`game_bridge_mcp.game`;
these names are importable from here too.
"""

from __future__ import annotations

from .bridge import (BASE_FEATURES, DEBUG_PORT_ENV, KIT_STATE_KEYS, PROTOCOL, START_PAUSED_ENV, GameBridge, Pending,
                     RawJson, debug_port_from_argv, encode_state)

__all__ = ["BASE_FEATURES", "DEBUG_PORT_ENV", "GameBridge", "KIT_STATE_KEYS", "PROTOCOL",
           "Pending", "RawJson", "START_PAUSED_ENV", "debug_port_from_argv", "encode_state"]
