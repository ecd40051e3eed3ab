"""Play any web game through the bridge, unmodified: ``game-bridge-mcp browser``, in headless
Chromium (docs/game-side.md). Importing this package imports neither the browsing library
nor a browser."""

from __future__ import annotations

from ._runner import CLI, main

__all__ = ["CLI", "main"]
