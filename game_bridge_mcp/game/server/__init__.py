"""The kit's HTTP server: loopback only, strict framing, bounded connections (``http.py``,
``connections.py``), and the query parameters it reads (``query.py``). It knows nothing of
games: the kit (:mod:`game_bridge_mcp.game.kit`) gives it routes."""
