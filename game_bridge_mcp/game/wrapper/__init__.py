"""What every wrapper shares: a wrapper makes an unmodified game of one engine drivable
(``game/pygame/``, ``game/browser/``), and is only its engine's part on top of these.

- ``options.py``: the command line (``--port``, ``--paused``, ``--init``, ``--force``,
  ``--help``; ``--seed`` and ``--size`` for a wrapper that takes them), read up to the
  game's name; the ``gamebridge.json`` that ``--init`` writes.
- ``input.py``: ``key``, ``mouse`` and ``text``, their schemas and checks, timed in frames;
  the wrapper gives the devices and the words.
- ``frames.py``: when input reaches the engine (now, before the next frame, after N frames).
- ``serve.py``: the GameBridge assembled (the clock, the ``input`` toolset, ``--paused``),
  started and announced; the loop that drives an engine frame by frame.
- ``main.py``: ``main`` (usage errors, ``--help``, ``--init``, the run).

docs/design.md ("Adding a wrapper") says how a new one is made: its package here beside
the others and one row in game_bridge_mcp/wrappers.py.
"""
