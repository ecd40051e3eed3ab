"""Serve any Gymnasium environment through the bridge, unmodified: ``game-bridge-mcp gym
ENV_ID`` (docs/game-side.md, "Gymnasium environments"). Importing this package imports
neither Gymnasium nor an environment's package."""

from __future__ import annotations

from ._runner import CLI, main

__all__ = ["CLI", "main"]
