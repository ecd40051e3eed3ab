"""The parts :class:`~game_bridge_mcp.game.kit.GameBridge` is built from, one owner each:
the command table and queue (``commands``), outcomes and completion (``outcomes``), the
event ring (``events``), the clock (``clock``), the loop (``loop``), the ``/state``
document (``state``), the endpoints and their parameters (``routes``, ``query``), the
server and registry entry (``serving``) and the debug port switch (``ports``).

Private: a game imports :mod:`game_bridge_mcp.game`, never these.
"""
