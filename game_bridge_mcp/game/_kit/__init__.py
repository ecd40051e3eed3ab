"""The parts :class:`~game_bridge_mcp.game.kit.GameBridge` is built from, one owner each.
Private: a game imports :mod:`game_bridge_mcp.game`, never these."""
