"""Make a Python game drivable by game-bridge-mcp: the game side of the contract.

``GameBridge`` serves ``/health``, ``/state``, ``/command`` and ``/tools`` on loopback,
queues commands for the game's own thread, publishes ``completedCommandId``, writes
the registry entry and handles ``close``. Standard library only; importing this
package imports neither the MCP SDK nor psutil. ``python -m game_bridge_mcp.game.demo``
is a small game built on it. :mod:`.image` turns what a game draws (a pygame Surface,
raw pixels, PNG/JPEG bytes) into the image ``/screenshot`` serves.
"""

from __future__ import annotations

from ._args import ArgumentError
from .image import Image, ImageFormatError, Pixels, encode_png, fit_size, from_encoded, from_pixels, \
    from_surface
from .kit import (DEBUG_PORT_ENV, PROTOCOL, GameBridge, RawJson, debug_port_from_argv,
                  encode_state)

__all__ = ["ArgumentError", "DEBUG_PORT_ENV", "GameBridge", "Image", "ImageFormatError", "PROTOCOL",
           "Pixels", "RawJson", "debug_port_from_argv", "encode_png", "encode_state", "fit_size",
           "from_encoded", "from_pixels", "from_surface"]
