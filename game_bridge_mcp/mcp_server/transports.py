"""The table of transports: each way of serving MCP, the module that implements it (its
``TRANSPORT``, a ``serving.Transport``), and when it is chosen. The CLI serves through
:func:`serve`; adding a transport is its module and one row here
(tests/mcp_server/test_transports.py names whatever else it still lacks). Imports no SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import Config
from ..core.composites import Composite


@dataclass(frozen=True)
class TransportRow:
    """One transport: its name (its class's ``name``), its module under ``mcp_server``, and
    the option that chooses it (``None``: the default) with the Config field and environment
    variable that option sets."""

    name: str
    module: str
    option: str | None = None
    field: str | None = None
    environment: str | None = None
    #: Whether it speaks on the process's standard streams (a terminal there gets a hint).
    uses_stdio: bool = False

    def chosen_by(self, config: Config) -> bool:
        return self.field is None or getattr(config, self.field) is not None


#: First match wins; the default (no option) comes last.
TRANSPORTS: tuple[TransportRow, ...] = (
    TransportRow("http", "http.server", option="--http", field="http", environment="GAME_BRIDGE_HTTP"),
    TransportRow("stdio", "stdio.server", uses_stdio=True),
)


def chosen(config: Config) -> TransportRow:
    """The row that serves this configuration."""
    return next(row for row in TRANSPORTS if row.chosen_by(config))


def serve(config: Config, *, composites: Sequence[Composite] = ()) -> int:
    """Serve MCP with the transport the configuration chooses, until it ends (imports the SDK)."""
    from .serving import run

    row = chosen(config)
    module = importlib.import_module(f"{__package__}.{row.module}")
    return run(module.TRANSPORT(config, composites=composites))


__all__ = ["TRANSPORTS", "TransportRow", "chosen", "serve"]
