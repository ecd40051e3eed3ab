"""The instance registry: one small JSON file per running game, so a bridge can find it.
Standard library only (psutil when present); where the directory is comes from
:mod:`game_bridge_mcp.paths`."""

from __future__ import annotations

from .entry import InvalidEntry, RegistryEntry, RegistryProblem, is_loopback_literal, load_entry, parse_entry
from .reader import RegistryScan, pid_alive, prune_entry, read_registry
from .writer import Registration, entry_document, register_instance

__all__ = ["InvalidEntry", "Registration", "RegistryEntry", "RegistryProblem", "RegistryScan",
           "entry_document", "is_loopback_literal", "load_entry", "parse_entry", "pid_alive",
           "prune_entry", "read_registry", "register_instance"]
