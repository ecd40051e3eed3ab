"""Play any pygame game through the bridge, unmodified: ``game-bridge-mcp pygame``.

``game-bridge-mcp pygame [--port N] [--paused] [--window] (-m MODULE | SCRIPT) [ARGS ...]``
(or ``python -m game_bridge_mcp.game.pygame ...``) runs the game in this process with
the kit's HTTP surface: each display flip is a frame; ``key``, ``mouse`` and ``text``
act as a player (:mod:`._input`); ``/screenshot`` shows the display surface with
``X-Game-Window``; ``pause``/``resume``/``step`` hold the game at its flip, with its
``pygame.time.Clock`` taking fixed steps (:mod:`._time`); ``/state`` says what the
wrapper can see (:mod:`._hooks`). Importing this package does not import pygame.

A game may add its own state without depending on the wrapper being there::

    try:
        from game_bridge_mcp.game.pygame import state_hook
    except ImportError:
        state_hook = lambda fn: fn

    @state_hook
    def bridge_state():
        return {"game": {"score": score, "lives": lives}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from ._runner import main

StateHook = Callable[[], Mapping[str, Any]]


def state_hook(func: StateHook) -> StateHook:
    """Register ``func`` (returns a dict merged into ``/state``; it runs on an HTTP
    thread, so it should only read). A no-op when the game runs without the wrapper."""
    from ._hooks import set_state_hook

    set_state_hook(func)
    return func


__all__ = ["main", "state_hook"]
