"""What a tool's handler is given of the Bridge (the :class:`Host` protocol), and the
:class:`BridgeInstance` record the Bridge keeps for each port.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeVar

from ..config import Config
from ..manifest.choose import RecentMisses
from ..manifest.reader import Manifest
from ..wire.client import GameClient
from ..wire.transport import Opener
from .composites import Composite
from .events import Shown
from .states.journal import Journal
from .pending import PendingCommands
from .screenshot import Screenshots
from .states.store import StateStore
from .tools.unit import ToolDef

T = TypeVar("T")

#: A progress callback: (elapsed ms, total ms or None, a line to show).
Progress = Callable[[float, float | None, str], None]


@dataclass
class BridgeInstance:
    """What the bridge keeps about one port. What is known about the game's answers (its
    frames, what /health carries, restarts) is the GameClient's; the Bridge keeps the
    manifest it read, for the client's generation it was read in, and what the agent has
    been shown."""

    client: GameClient
    command_lock: threading.Lock = field(default_factory=threading.Lock)
    manifest: Manifest | None = None
    manifest_generation: int = -1
    manifest_key: str | None = None
    #: Names missing from the manifest after a re-fetch: not re-fetched again for a moment.
    misses: RecentMisses = field(default_factory=RecentMisses)
    #: Commands answered as pending, waiting for the game's clock (core/pending.py).
    pending: PendingCommands = field(default_factory=PendingCommands)
    #: What the agent has been shown of it: the events cursor (core/events.py).
    shown: Shown = field(default_factory=Shown)
    #: What was sent to it since this bridge launched it paused (core/journal.py), and the
    #: launched process that is of, (pid, started); None: not recorded.
    journal: Journal | None = None
    journal_key: tuple[Any, Any] | None = None


class Host(Protocol):
    """The Bridge, as a tool's handler sees it."""

    @property
    def config(self) -> Config: ...

    @property
    def screenshots(self) -> Screenshots: ...

    @property
    def composites(self) -> tuple[Composite, ...]: ...

    @property
    def states(self) -> StateStore: ...

    @property
    def opener(self) -> Opener | None: ...

    @property
    def toolset(self) -> tuple[ToolDef, ...]: ...

    def instance(self, port: int) -> BridgeInstance: ...

    def client(self, port: int) -> GameClient: ...

    def resolve_port(self, port: Any) -> int: ...

    def guarded(self, port: int, fn: Callable[[], T]) -> T: ...

    def forget(self, port: int) -> None: ...

    def manifest(self, port: int, *, refresh: bool = False, timeout_ms: int | None = None) -> Manifest: ...

    def refetch_for(self, port: int, name: str, look: Callable[[Manifest], Any]) -> Any: ...

    def launcher(self, *, create: bool = True) -> Any: ...

    def launched_ports(self) -> list[int]: ...


