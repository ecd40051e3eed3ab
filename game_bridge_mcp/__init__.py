"""game-bridge-mcp: let an AI agent launch, drive and read games over a localhost HTTP contract.

The public names are importable from here; importing the package never imports the MCP SDK,
so it can be vendored where only the standard library and psutil are installed.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__
from .errors import BridgeError, BridgeUsageError, CommandTimeout, GameOffline, NotAGameSurface

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


def start_stdio_server(config: Any, *, composites: Any = ()) -> None:
    """Serve the bridge over stdio until the client disconnects (imports the MCP SDK)."""
    from .mcp_server.stdio import start_stdio_server as _start

    _start(config, composites=composites)


__all__ = ["__version__", "BridgeError", "BridgeUsageError", "CommandTimeout", "GameOffline",
           "NotAGameSurface", "start_stdio_server", *sorted(_LAZY)]
