"""game-bridge-mcp: let an AI agent launch, drive and read games over a localhost HTTP contract.

The public names are importable from here; importing the package never imports the MCP SDK,
so it can be vendored where only the standard library and psutil are installed. The error
types are imported at once (a small module); the rest is imported on first use, and the
``TYPE_CHECKING`` block below tells type checkers (mypy, pyright) what each name is.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (BridgeError, BridgeUsageError, ClockBroken, CommandFailed, CommandRejected, CommandTimeout,
                     GameOffline, GamePaused, NotAGameSurface, ScreenshotUnavailable)

if TYPE_CHECKING:  # what the lazy names below are, for type checkers; never run
    from .config import Config as Config, parse_cli as parse_cli
    from .core.bridge import Bridge as Bridge
    from .core.composites import Composite as Composite, CompositeContext as CompositeContext
    from .launch.declaration import apply_project_config as apply_project_config
    from .launch.launcher import Launcher as Launcher
    from .manifest.reader import Manifest as Manifest, normalise_manifest as normalise_manifest
    from .registry import read_registry as read_registry, register_instance as register_instance
    from .wire.client import GameClient as GameClient
    from .wire.transport import HttpResponse as HttpResponse, TransportError as TransportError

#: Each lazily imported name and the module that defines it (a test keeps this table and the
#: block above the same).
_LAZY = {
    "Bridge": ".core.bridge",
    "Composite": ".core.composites",
    "CompositeContext": ".core.composites",
    "GameClient": ".wire.client",
    "Launcher": ".launch.launcher",
    "read_registry": ".registry",
    "register_instance": ".registry",
    "normalise_manifest": ".manifest.reader",
    "Manifest": ".manifest.reader",
    "parse_cli": ".config",
    "apply_project_config": ".launch.declaration",
    "Config": ".config",
    "HttpResponse": ".wire.transport",
    "TransportError": ".wire.transport",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'game_bridge_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def start_stdio_server(config: Config, *, composites: Sequence[Composite] = ()) -> None:
    """Serve the bridge over stdio until the client disconnects (imports the MCP SDK)."""
    from .mcp_server.stdio.server import start_stdio_server as _start

    _start(config, composites=composites)


__all__ = ["__version__", "BridgeError", "BridgeUsageError", "ClockBroken", "CommandFailed", "CommandRejected",
           "CommandTimeout", "GameOffline", "GamePaused", "NotAGameSurface", "ScreenshotUnavailable",
           "start_stdio_server",
           # the lazy names (a literal list, as type checkers read it; a test keeps it _LAZY's):
           "Bridge", "Composite", "CompositeContext", "Config", "GameClient", "HttpResponse", "Launcher", "Manifest",
           "TransportError", "apply_project_config", "normalise_manifest", "parse_cli", "read_registry",
           "register_instance"]
