"""``snapshot`` for kit games (docs/game-side.md, "Save states"): the game's state copied and
put back without its help (``graph``), as bytes that are data when it is plain data
(``codec``), and the snapshots a game keeps, its hooks and the extension's commands and
endpoints (``store``)."""
