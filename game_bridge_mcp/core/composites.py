"""Composites: tools a host application adds to the bridge by chaining commands, each a plain
``run(ctx)`` handed a context scoped to one instance and offered only to the games ``only``
names."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Protocol

from .. import polling
from ..errors import BridgeUsageError
from ..manifest.reader import Manifest, args_to_schema
from ..wire.client import GameClient
from .digest import summarise
from .waiting import Until


class BridgeCalls(Protocol):
    """What a composite's context needs of the Bridge (core/tools/calls.py lends it)."""

    def client(self, port: int) -> GameClient: ...

    def run_command(self, port: int, command: str, args: Mapping[str, Any] | None = None, *,
                    timeout_ms: int | None = None, include_state: bool = False,
                    until: Until | None = None) -> dict[str, Any]: ...

    def call_tool(self, *, name: Any, arguments: Any = None, port: Any = None) -> dict[str, Any]: ...

    def manifest(self, port: int) -> Manifest: ...


@dataclass(frozen=True)
class Composite:
    """A bridge-side tool: ``name``, ``description``, ``args`` (manifest-style argument
    declarations), ``run(ctx)`` and ``only`` (game names it suits; None for every game)."""

    name: str
    description: str
    run: Callable[["CompositeContext"], Any]
    args: Any = field(default_factory=list)
    only: str | Sequence[str] | None = None

    def suits(self, game_name: str | None) -> bool:
        if self.only is None:
            return True
        names = [self.only] if isinstance(self.only, str) else list(self.only)
        return game_name is not None and game_name in names


class CompositeContext:
    """What a composite's ``run`` is handed: the bridge, scoped to one instance."""

    def __init__(self, bridge: BridgeCalls, port: int, args: Mapping[str, Any]) -> None:
        self._bridge = bridge
        self.port = port
        self.args: dict[str, Any] = dict(args)

    def state(self) -> dict[str, Any]:
        """The full ``/state`` snapshot."""
        return self._bridge.client(self.port).state()

    def health(self) -> dict[str, Any]:
        return self._bridge.client(self.port).health()

    def command(self, cmd: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Queue a command and return the game's answer at once (not confirmed)."""
        return self._bridge.client(self.port).command(cmd, args)

    def command_and_sync(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                         timeout_ms: int | None = None, until: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Queue a command and wait until the game applied it; returns the call result
        (``commandId``, ``confirmation``, ``result``, digest fields) with the full state under
        ``state``. ``until`` (as call_tool's: ``{path, equals}``, ``{path, changes: true}`` or
        ``{event}``, with ``timeoutMs``) then waits for a condition: ``settled`` says whether it
        held, and the digest and ``state`` are of the state that met it (or the last one).
        A refusal the game reports raises CommandFailed."""
        return self._bridge.run_command(self.port, cmd, args, timeout_ms=timeout_ms, include_state=True,
                                        until=Until.parse(until))

    def call(self, tool: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run any other tool (bridge, composite, game) on this instance, as call_tool would."""
        return self._bridge.call_tool(name=tool, arguments=dict(args or {}), port=self.port)

    def manifest(self) -> Manifest:
        return self._bridge.manifest(self.port)

    def summarise(self, state: Mapping[str, Any]) -> dict[str, Any]:
        return summarise(state)

    def sleep(self, ms: float) -> None:
        """Sleep ``ms`` milliseconds (ended early when the client cancels the call)."""
        polling.sleep(max(0.0, float(ms)) / 1000.0)


def suited(composites: Sequence[Composite], manifest: Manifest) -> list[Composite]:
    """The composites that suit the game whose manifest this is."""
    name = manifest.game.get("name") if isinstance(manifest.game, Mapping) else None
    return [c for c in composites if c.suits(name)]


def composite_schema(composite: Composite) -> dict[str, Any]:
    """A composite's input schema, from its manifest-style argument declarations."""
    schema, _problems = args_to_schema(composite.args, reserved_args=frozenset({"port"}))
    return schema


def check_composites(composites: Sequence[Composite], reserved: frozenset[str]) -> tuple[Composite, ...]:
    """Validate a host's composites once, at start-up (a bad one is a programming error)."""
    seen: set[str] = set()
    for composite in composites:
        if not isinstance(composite, Composite):
            raise BridgeUsageError(f"composites must be Composite objects, not {type(composite).__name__}.")
        if composite.name in reserved:
            raise BridgeUsageError(f"Composite '{composite.name}' would hide a bridge tool of the same name; rename it.")
        if composite.name in seen:
            raise BridgeUsageError(f"Two composites are called '{composite.name}'.")
        if not callable(composite.run):
            raise BridgeUsageError(f"Composite '{composite.name}' has no callable run(ctx).")
        seen.add(composite.name)
    return tuple(composites)
