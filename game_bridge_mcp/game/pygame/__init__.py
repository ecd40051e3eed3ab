"""Play any pygame game through the bridge, unmodified: ``game-bridge-mcp pygame``
(docs/game-side.md). Importing this package does not import pygame.

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

from ._runner import CLI, main

StateHook = Callable[[], Mapping[str, Any]]


def state_hook(func: StateHook) -> StateHook:
    """Register ``func`` (returns a dict merged into ``/state``; it runs on an HTTP
    thread, so it should only read). A no-op when the game runs without the wrapper."""
    from ._hooks import set_state_hook

    set_state_hook(func)
    return func


__all__ = ["CLI", "main", "state_hook"]
