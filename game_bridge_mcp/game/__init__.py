"""Make a Python game drivable by game-bridge-mcp: the game side of the contract.

``GameBridge`` serves ``/health``, ``/state``, ``/command``, ``/tools`` and ``/events`` on
loopback, queues commands for the game's own thread, publishes ``completedCommandId``
and each command's outcome, holds ``/state?after=N`` until a command completes, serves
a digest view, optionally runs a pausable clock (``clock=True``) and ``/screenshot``,
writes the registry entry and handles ``close``. Standard library only; importing this
package imports neither the MCP SDK nor psutil. ``python -m game_bridge_mcp.game.demo``
is a small game built on it. :mod:`.image` turns what a game draws (a pygame Surface,
raw pixels, PNG/JPEG bytes) into the image ``/screenshot`` serves.
"""

from __future__ import annotations

from ._args import Arg, ArgumentError, Range
from ._http import Answer
from ._kit.outcomes import Pending
from .image import Image, ImageFormatError, Pixels, encode_png, fit_size, from_encoded, from_pixels, \
    from_surface
from .kit import (DEBUG_PORT_ENV, PROTOCOL, START_PAUSED_ENV, GameBridge, RawJson,
                  debug_port_from_argv, encode_state)

__all__ = ["Answer", "Arg", "ArgumentError", "DEBUG_PORT_ENV", "GameBridge", "Image", "ImageFormatError",
           "PROTOCOL", "Pending", "Pixels", "RawJson", "Range", "START_PAUSED_ENV", "debug_port_from_argv",
           "encode_png", "encode_state", "fit_size", "from_encoded", "from_pixels", "from_surface"]
