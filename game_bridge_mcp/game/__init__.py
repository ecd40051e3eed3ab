"""Make a Python game drivable by game-bridge-mcp: the game side of the contract.

:class:`GameBridge` serves it (docs/game-side.md); ``python -m game_bridge_mcp.game.demo`` is a
small game built on it. Standard library only: importing this package imports neither the MCP
SDK nor psutil.

Its folders: ``kit/`` (GameBridge and its parts), ``server/`` (the kit's HTTP server),
``image/`` (images for ``/screenshot``), ``demo/`` (the demo game), and the wrappers that
make an unmodified game drivable, ``pygame/`` and ``browser/`` (one per row of
game_bridge_mcp/wrappers.py), on what they share, ``wrapper/``.
"""

from __future__ import annotations

from .kit.args import Arg, ArgumentError, Range
from .server.http import Answer
from .kit.outcomes import Pending
from .image import Image, ImageFormatError, Pixels, encode_png, fit_size, from_encoded, from_pixels, \
    from_surface
from .kit import (DEBUG_PORT_ENV, PROTOCOL, START_PAUSED_ENV, GameBridge, RawJson,
                  debug_port_from_argv, encode_state)

__all__ = ["Answer", "Arg", "ArgumentError", "DEBUG_PORT_ENV", "GameBridge", "Image", "ImageFormatError",
           "PROTOCOL", "Pending", "Pixels", "RawJson", "Range", "START_PAUSED_ENV", "debug_port_from_argv",
           "encode_png", "encode_state", "fit_size", "from_encoded", "from_pixels", "from_surface"]
