"""The snapshots a kit game keeps (at most 16), its save/load hooks, and ``snapshot``'s
commands and endpoints (docs/contract.md): ``snapshot_save``, ``snapshot_load {id}``,
``snapshot_drop {id}`` run on the game thread with the kit's lock held; ``GET /snapshot`` and
``POST /snapshot`` on an HTTP thread."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from ...contract import SNAPSHOT_ID, SNAPSHOT_LOADED_EVENT, SNAPSHOT_MAX_BYTES, SNAPSHOTS_KEPT
from ...jsonio import decode_json
from . import codec
from .graph import Graph, NotSnapshotable, copy_graph, find_roots

log = logging.getLogger(__name__)

HOOKS_MAGIC = b"GAME-BRIDGE-KIT-HOOKS 1\n"
TEXT = "text/plain; charset=utf-8"
OCTETS = "application/octet-stream"

#: What the endpoints answer: (status, body, content type).
Reply = tuple[int, bytes, str]


class Owner(Protocol):
    """What the snapshots need of the game's bridge."""

    name: str
    version: str
    lock: threading.RLock

    @property
    def sim_frame(self) -> int | None: ...

    @sim_frame.setter
    def sim_frame(self, value: int | None) -> None: ...

    def event(self, message: str, **fields: Any) -> None: ...

    def game_callables(self) -> list[Any]: ...


@dataclass
class Kept:
    """One snapshot: a graph (of this process, or decoded from bytes: ``imported``), or a
    hooks' data; its simFrame; its bytes when it has some (None: made on demand)."""

    sim_frame: int
    graph: Graph | None = None
    data: Any = None
    imported: bool = False
    encoded: bytes | None = None


class Snapshots:
    """The game's snapshots (see the module docstring). ``hooks``: ``(save, load)``, the
    game's own: ``save()`` returns JSON-able data (or bytes), ``load(data)`` puts it back."""

    def __init__(self, owner: Owner, hooks: tuple[Callable[[], Any], Callable[[Any], Any]] | None = None,
                 *, max_bytes: int = SNAPSHOT_MAX_BYTES) -> None:
        self.owner = owner
        self.hooks = hooks
        self.max_bytes = max_bytes
        self._kept: dict[str, Kept] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._skip: list[Any] = []
        self._roots: tuple[list[Any], dict[str, Any]] | None = None  # the callables, and their roots

    def skip(self, *objects: Any) -> None:
        """Keep these objects out of snapshots: a load leaves them as they are."""
        self._skip.extend(objects)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def _keep(self, kept: Kept) -> str:
        with self._lock:
            if len(self._kept) >= SNAPSHOTS_KEPT:
                raise ValueError(f"{SNAPSHOTS_KEPT} snapshots are kept already: snapshot_drop one first")
            snapshot_id = f"k{next(self._ids)}"
            self._kept[snapshot_id] = kept
            return snapshot_id

    def _get(self, snapshot_id: Any) -> Kept:
        with self._lock:
            kept = self._kept.get(str(snapshot_id))
        if kept is None:
            raise ValueError(f"no snapshot {str(snapshot_id)[:64]!r} (snapshot_save answers the ids)")
        return kept

    # ------------------------------------------------------------------ the commands (game thread)
    def save(self) -> dict[str, Any]:
        frame = int(self.owner.sim_frame or 0)
        if self.hooks is not None:
            encoded = self._hook_bytes(self.hooks[0](), frame)
            kept = self._decode(encoded)
        else:
            try:
                graph = copy_graph(self.roots(), skip=self._skip)
            except NotSnapshotable as exc:
                raise ValueError(f"the game's state cannot be saved: {exc}") from None
            encoded = None
            if graph.portable is None:
                encoded = codec.encode(graph, game=self.owner.name, version=self.owner.version, sim_frame=frame)
            kept = Kept(frame, graph=graph, encoded=encoded)
        snapshot_id = self._keep(kept)
        return {"id": snapshot_id, "simFrame": frame, "bytes": len(kept.encoded or b"")}

    def load(self, id: str) -> dict[str, Any]:  # noqa: A002 - the contract's argument name
        """Put snapshot ``id`` back (commands in flight and the clock as they are)."""
        kept = self._get(id)
        if kept.graph is not None:
            originals = self._live_originals(kept.graph) if kept.imported else None
            kept.graph.restore(originals=originals)
        else:
            assert self.hooks is not None
            kind, data = kept.data
            self.hooks[1](base64.b64decode(data) if kind == "bytes" else json.loads(json.dumps(data)))  # a copy
        self.owner.sim_frame = kept.sim_frame
        self.owner.event(SNAPSHOT_LOADED_EVENT, id=id)
        return {"id": id, "simFrame": kept.sim_frame}

    def drop(self, id: str) -> dict[str, Any]:  # noqa: A002 - the contract's argument name
        with self._lock:
            if self._kept.pop(str(id), None) is None:
                raise ValueError(f"no snapshot {str(id)[:64]!r}")
        return {"dropped": id}

    def roots(self) -> dict[str, Any]:
        """The game's roots (graph.find_roots), found again only when its callables change."""
        callables = self.owner.game_callables()
        known = self._roots
        if known is None or len(known[0]) != len(callables) or any(a is not b for a, b in zip(known[0], callables)):
            known = self._roots = (callables, find_roots(callables))
        return known[1]

    def commands(self) -> list[Callable[..., Any]]:
        """``snapshot_save``, ``snapshot_load`` and ``snapshot_drop``, for the kit to register."""

        def snapshot_save() -> dict[str, Any]:
            """Save the game as it is now; the result's id loads it back."""
            return self.save()

        def snapshot_load(id: str) -> dict[str, Any]:  # noqa: A002
            """Put the game back where snapshot id was saved."""
            return self.load(id)

        def snapshot_drop(id: str) -> dict[str, Any]:  # noqa: A002
            """Forget snapshot id."""
            return self.drop(id)

        return [snapshot_save, snapshot_load, snapshot_drop]

    def _live_originals(self, graph: Graph) -> list[Any]:
        """For a graph from bytes: the game's own root objects, refilled in place (so whoever
        holds them sees the load); everything else is made fresh."""
        originals: list[Any] = [None] * len(graph.nodes)
        for key, nid in graph.roots.items():
            slot = graph.slots.get(key)
            node = graph.nodes[nid]
            if slot is None or len(node) < 2 or not isinstance(node[1], type):
                continue
            try:
                live = slot.get()
            except (KeyError, ValueError):
                continue
            if type(live) is node[1]:
                originals[nid] = live
        return originals

    # ------------------------------------------------------------------ bytes (HTTP threads)
    def _hook_bytes(self, data: Any, frame: int) -> bytes:
        kind = "bytes" if isinstance(data, (bytes, bytearray)) else "json"
        if kind == "bytes":
            data = base64.b64encode(bytes(data)).decode()
        doc = {"game": self.owner.name, "gameVersion": self.owner.version, "simFrame": frame, "kind": kind,
               "data": data}
        try:
            body = json.dumps(doc, separators=(",", ":"), allow_nan=False, sort_keys=True).encode()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the game's snapshot hook returned something that is not JSON data: {exc}") from None
        return HOOKS_MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body

    def get(self, query: dict[str, str]) -> Reply:
        """``GET /snapshot?id=``: the bytes, 404 for an unknown id, 409 when they cannot leave."""
        try:
            kept = self._get(query.get(SNAPSHOT_ID, ""))
        except ValueError as exc:
            return 404, str(exc).encode(), TEXT
        if kept.encoded is None:
            reason = kept.graph.portable if kept.graph is not None else "no bytes"
            return 409, (f"this snapshot stays in the game's process: {reason}. The bridge re-executes "
                         "instead; or give GameBridge snapshot hooks (save, load) that return data.").encode(), TEXT
        return 200, kept.encoded, OCTETS

    def post(self, body: bytes) -> Reply:
        """``POST /snapshot``: bytes stored to be loaded with snapshot_load (400 with the
        reason when they are not this build's)."""
        try:
            with self.owner.lock:  # what the game holds now is what the bytes are checked against
                kept = self._decode(body)
            snapshot_id = self._keep(kept)
        except ValueError as exc:
            return 400, str(exc).encode(), TEXT
        return 200, json.dumps({"id": snapshot_id}).encode(), "application/json"

    def _decode(self, body: bytes) -> Kept:
        if self.hooks is not None:
            if not body.startswith(HOOKS_MAGIC):
                raise ValueError("not this game's snapshot (its first line is not GAME-BRIDGE-KIT-HOOKS 1)")
            digest, sep, rest = body[len(HOOKS_MAGIC):].partition(b"\n")
            if not sep or hashlib.sha256(rest).hexdigest().encode() != digest:
                raise ValueError("damaged: its checksum does not match (cut off or changed)")
            try:
                doc = decode_json(rest, strict=True)
            except ValueError as exc:
                raise ValueError(f"damaged: its body {exc}") from None
            if not isinstance(doc, dict) or doc.get("game") != self.owner.name \
                    or doc.get("gameVersion") != self.owner.version:
                raise ValueError(f"from another game or build, not {self.owner.name} {self.owner.version}")
            frame, kind = doc.get("simFrame"), doc.get("kind")
            if type(frame) is not int or frame < 0 or kind not in ("bytes", "json") or (
                    kind == "bytes" and not isinstance(doc.get("data"), str)):
                raise ValueError("it has no simFrame, or its data is not what it says")
            if kind == "bytes":
                try:
                    base64.b64decode(doc["data"], validate=True)
                except ValueError:
                    raise ValueError("its data is not the base64 it says") from None
            return Kept(frame, data=(kind, doc.get("data")), imported=True, encoded=body)
        live = codec.Live(self.roots(), skip=self._skip)
        graph, frame = codec.decode(body, game=self.owner.name, version=self.owner.version, live=live)
        return Kept(frame, graph=graph, imported=True, encoded=body)


__all__ = ["HOOKS_MAGIC", "Kept", "Owner", "Reply", "Snapshots"]
