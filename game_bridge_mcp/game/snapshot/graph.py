"""A game's state as a graph of nodes, copied and put back without the game's help.

The kit knows the game's callables (its ``state`` function, the ``update`` and ``render`` it
runs, its commands); what they reach is the game: the objects their methods are bound to,
the variables their closures hold, the module globals they read (:func:`find_roots`).
:func:`copy_graph` walks everything reachable from those roots and writes it down as nodes:
plain values, containers, objects of the game's own classes (their ``__dict__`` and slots),
random generators (their state). Functions, classes, modules, the kit itself, locks,
threads, files and sockets are *shared*: the game's machinery, not its state, kept as they
are. An object of any other type is copied whole (``copy.deepcopy``); one that cannot be is
shared, and the graph says so.

:meth:`Graph.restore` puts a graph back into the same process *in place*: every container
and object that existed at saving is emptied and refilled, so whoever holds it (a local of
the game's loop, another object) sees the restored state; objects made since are let go.
Nothing of the game's code runs: no ``__init__``, ``__setattr__`` or ``__setstate__``."""

from __future__ import annotations

import collections
import copy
import datetime
import decimal
import enum
import fractions
import functools
import io
import logging
import pathlib
import random
import socket
import sys
import threading
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

#: The kit's own modules: their objects are the machinery, never the game's state.
KIT_MODULES = ("game_bridge_mcp.game.kit", "game_bridge_mcp.game.server", "game_bridge_mcp.game.snapshot",
               "game_bridge_mcp.game.image", "game_bridge_mcp.game.wrapper")
#: Values copied as they are (immutable, no references inside).
ATOMS: tuple[type, ...] = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis))
#: Immutable values of the standard library, also kept as they are (by their exact types).
VALUES: tuple[type, ...] = (pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.PosixPath, pathlib.WindowsPath,
                            datetime.datetime, datetime.date, datetime.time, datetime.timedelta, decimal.Decimal,
                            fractions.Fraction)
_INTERNED = frozenset({type(None), bool, int, str})
_HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_LOCKS = (type(threading.Lock()), type(threading.RLock()))
_RESOURCES: tuple[type, ...] = (
    types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodWrapperType,
    types.WrapperDescriptorType, types.MethodDescriptorType, types.CodeType, types.FrameType,
    types.TracebackType, weakref.ref, weakref.finalize, threading.Thread, threading.Event, threading.Condition,
    threading.Semaphore, threading.Barrier, io.IOBase, socket.socket, logging.Logger, logging.Handler,
    functools.partial, property, staticmethod, classmethod, *_LOCKS)
#: What cannot be copied and is state all the same: a snapshot of a game holding one is refused.
_UNCOPYABLE = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)


class NotSnapshotable(Exception):
    """The game's state holds something a snapshot cannot hold (the message says what and where)."""


# ---------------------------------------------------------------------- roots
@dataclass(frozen=True)
class Slot:
    """Where a root lives: a module global (``holder`` its globals, ``name``), a closure
    cell (``holder`` the cell), or an object a method is bound to (``holder`` the object)."""

    kind: str
    holder: Any
    name: str = ""

    def get(self) -> Any:
        if self.kind == "global":
            return self.holder[self.name]
        if self.kind == "cell":
            return self.holder.cell_contents
        return self.holder

    def put(self, value: Any) -> None:
        if self.kind == "global":
            self.holder[self.name] = value
        elif self.kind == "cell":
            self.holder.cell_contents = value
        # an object a method is bound to is restored in place: nothing to rebind


def is_kit(obj: Any) -> bool:
    return type(obj).__module__.startswith(KIT_MODULES)


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _where(fn: types.FunctionType) -> str:
    return f"{fn.__module__}:{fn.__qualname__}@{fn.__code__.co_firstlineno}"


def find_roots(callables: Iterable[Any]) -> dict[str, Slot]:
    """The game's roots, by a key that is the same in every process of the same build:
    what the given callables are bound to, hold in their closures and read as globals
    (following the functions of their own module they call)."""
    roots: dict[str, Slot] = {}
    seen: set[int] = set()
    todo = [c for c in callables if c is not None]
    while todo:
        fn = todo.pop()
        if isinstance(fn, types.MethodType):
            owner, fn = fn.__self__, fn.__func__
            if not is_kit(owner) and not isinstance(owner, (type, types.ModuleType)):
                roots.setdefault(f"self:{_where(fn) if isinstance(fn, types.FunctionType) else repr(fn)}",
                                 Slot("self", owner))
        elif isinstance(fn, functools.partial):
            todo.append(fn.func)
            continue
        elif not isinstance(fn, types.FunctionType) and callable(fn) and not isinstance(fn, (type, *_RESOURCES)) \
                and not is_kit(fn):
            roots.setdefault(f"object:{type(fn).__module__}:{type(fn).__qualname__}", Slot("self", fn))
            todo.append(getattr(type(fn), "__call__", None))  # noqa: B004 - the class's __call__ function, to follow into
            continue
        if not isinstance(fn, types.FunctionType) or id(fn) in seen:
            continue
        seen.add(id(fn))
        where = _where(fn)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # not yet assigned
                continue
            if isinstance(value, (types.FunctionType, types.MethodType)):
                todo.append(value)
            elif not isinstance(value, (type, types.ModuleType)) and not is_kit(value):
                roots[f"cell:{where}:{name}"] = Slot("cell", cell)
        module = fn.__globals__.get("__name__")
        if not isinstance(module, str) or module.startswith(KIT_MODULES):
            continue
        glob = fn.__globals__
        for name in sorted(_code_names(fn.__code__)):
            if name not in glob or name.startswith("__"):
                continue
            value = glob[name]
            if isinstance(value, types.FunctionType):
                if value.__module__ == module:
                    todo.append(value)
            elif not isinstance(value, _RESOURCES) and not is_kit(value) and not callable(value):
                roots[f"global:{module}:{name}"] = Slot("global", glob, name)
    return dict(sorted(roots.items()))


# ---------------------------------------------------------------------- the graph
@dataclass
class Graph:
    """A copy of the game's state: ``nodes[i]`` is ``(kind, ...)`` with children as node
    numbers; ``originals[i]`` the object it was made from (held, so its identity stays);
    ``roots`` each root's key and node; ``portable``: None when every node is plain data
    (bytes can be made), else why not."""

    nodes: list[tuple[Any, ...]] = field(default_factory=list)
    originals: list[Any] = field(default_factory=list)
    parents: list[tuple[int, Any]] = field(default_factory=list)
    roots: dict[str, int] = field(default_factory=dict)
    slots: dict[str, Slot] = field(default_factory=dict)
    random_state: Any = None
    numpy_state: Any = None
    portable: str | None = None
    shared_note: str | None = None

    def path(self, nid: int) -> str:
        """Where node ``nid`` sits, from its root (for messages)."""
        parts: list[str] = []
        while nid >= 0:
            parent, key = self.parents[nid]
            parts.append(f"[{key}]" if isinstance(key, int) else key if isinstance(key, str) else f"[{key[1]!r:.30}]")
            nid = parent
        return "".join(reversed(parts))

    # ------------------------------------------------------------------ putting it back
    def restore(self, *, originals: list[Any] | None = None) -> None:
        """Put the graph back: into ``originals`` (the objects it was made from, by
        default; None entries are made fresh), roots rebound, generators reseeded."""
        targets = self.originals if originals is None else originals
        nodes = self.nodes
        made: list[Any] = [_UNSET] * len(nodes)
        mutable: list[int] = []
        others: list[int] = []
        for nid, node in enumerate(nodes):
            kind = node[0]
            if kind in _MUTABLE:
                made[nid] = targets[nid] if targets[nid] is not None else _fresh(node)
                mutable.append(nid)
            elif kind in _AS_SAVED:
                made[nid] = node[1]
            else:
                others.append(nid)

        def resolve(nid: int) -> Any:
            value = made[nid]
            if value is not _UNSET:
                return value
            node = nodes[nid]
            kind = node[0]
            if kind == "copied":
                value = copy.deepcopy(node[1])
            elif kind == "tuple":
                items = [resolve(child) for child in node[2]]
                value = tuple(items) if node[1] is tuple else tuple.__new__(node[1], items)
            elif kind == "frozenset":
                value = frozenset(resolve(child) for child in node[1])
            elif kind == "method":
                value = types.MethodType(resolve(node[1]), resolve(node[2]))
            else:  # pragma: no cover - every kind is handled
                raise ValueError(f"unknown node kind {kind!r}")
            made[nid] = value
            return value

        for nid in others:  # everything made before anything of the game's is changed
            resolve(nid)
        # Every node is made now: filling reads them by number (a load of the demo's 33
        # nodes spent a third of its 47 us resolving each child through the function above).
        made_of = made.__getitem__
        for nid in mutable:
            _fill(made[nid], nodes[nid], made_of)
        for key, nid in self.roots.items():
            slot = self.slots.get(key)
            if slot is not None:
                slot.put(made[nid])
        if self.random_state is not None:
            random.setstate(self.random_state)
        if self.numpy_state is not None and "numpy" in sys.modules:
            sys.modules["numpy"].random.set_state(self.numpy_state)


_UNSET: Any = object()
#: What a "keep" node loaded from bytes stands for: the value the game has there now.
KEEP: Any = type("Keep", (), {"__repr__": lambda self: "<kept as the game has it>"})()
_MUTABLE = frozenset({"dict", "list", "set", "deque", "bytearray", "object", "random"})
#: Node kinds whose value is the one the node holds (never copied).
_AS_SAVED = frozenset({"atom", "shared", "keep"})


def _fresh(node: tuple[Any, ...]) -> Any:
    """A new, empty object for a node of a mutable kind (from bytes: no original here)."""
    kind, cls = node[0], node[1]
    if kind == "dict":
        base = next(b for b in cls.__mro__ if b in (collections.OrderedDict, collections.defaultdict, dict))
        return base.__new__(cls)
    if kind == "list":
        return list.__new__(cls)
    if kind == "set":
        return set.__new__(cls)
    if kind == "deque":
        return collections.deque(maxlen=node[3])
    if kind == "bytearray":
        return bytearray()
    if kind == "random":
        return random.Random.__new__(cls)
    return object.__new__(cls)


def _fill(target: Any, node: tuple[Any, ...], resolve: Callable[[int], Any]) -> None:
    kind = node[0]
    if kind == "dict":
        items = [(resolve(k), resolve(v)) for k, v in node[2]]
        items = [(k, dict.get(target, k) if v is KEEP else v) for k, v in items]
        dict.clear(target)
        dict.update(target, items)
        if node[3] is not None:  # a defaultdict's factory
            target.default_factory = resolve(node[3])
        _fill_attrs(target, node[4], resolve)
    elif kind == "list":
        list.__setitem__(target, slice(None), list(map(resolve, node[2])))
        _fill_attrs(target, node[3], resolve)
    elif kind == "set":
        set.clear(target)
        set.update(target, list(map(resolve, node[2])))
    elif kind == "deque":
        target.clear()
        target.extend(map(resolve, node[1]))
    elif kind == "bytearray":
        target[:] = node[1]
    elif kind == "random":
        _fill_attrs(target, node[3], resolve)
        random.Random.setstate(target, node[2])  # after: it sets gauss_next, an attribute
    elif kind == "object":
        _fill_attrs(target, node[2], resolve)
        for name, child in node[3].items():
            object.__setattr__(target, name, resolve(child))
        for name in node[4]:  # slots that were empty at saving
            try:
                object.__delattr__(target, name)
            except AttributeError:
                pass


def _fill_attrs(target: Any, attrs: dict[str, int] | None, resolve: Callable[[int], Any]) -> None:
    if attrs is None:
        return
    held = target.__dict__
    values = {name: held.get(name) if resolve(child) is KEEP else resolve(child) for name, child in attrs.items()}
    held.clear()
    held.update(values)


# ---------------------------------------------------------------------- walking
def _slots_of(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__slots__", ())
        for name in (declared,) if isinstance(declared, str) else declared:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return names


def plain_class(cls: type) -> bool:
    """A class of the game's own (every class in its line a class statement's), whose
    instances are their ``__dict__`` and slots."""
    return all(k is object or k.__flags__ & _HEAP for k in cls.__mro__)


def copy_graph(roots: dict[str, Slot], *, skip: Iterable[Any] = ()) -> Graph:
    """Copy what ``roots`` reach (see the module docstring). ``skip``: objects to share,
    never copy (the game said so). Raises NotSnapshotable."""
    graph = Graph(slots=dict(roots))
    memo: dict[int, int] = {id(obj): -1 for obj in skip}
    nodes, originals, parents = graph.nodes, graph.originals, graph.parents
    work: list[tuple[int, Any]] = []
    shared_unnamed: list[int] = []

    atoms: dict[tuple[type, Any], int] = {}  # None, bools, ints and strings, one node each

    def visit(obj: Any, parent: int, key: Any) -> int:
        kind = type(obj)
        if kind in _INTERNED:
            found = atoms.get((kind, obj))
            if found is not None:
                return found
            nid = atoms[(kind, obj)] = len(nodes)
            parents.append((parent, key))
            originals.append(None)
            nodes.append(("atom", obj))
            return nid
        known = memo.get(id(obj))
        if known is not None and known >= 0:
            return known
        nid = len(nodes)
        parents.append((parent, key))
        originals.append(None)
        if kind in ATOMS or kind in VALUES:
            nodes.append(("atom", obj))
            return nid
        memo[id(obj)] = nid
        originals[nid] = obj
        if known == -1:  # the game keeps it out of snapshots: whatever is there stays
            nodes.append(("keep", obj))
            return nid
        if isinstance(obj, _RESOURCES) or is_kit(obj) or isinstance(obj, enum.Enum):
            nodes.append(("shared", obj))
            if not _named(obj):
                shared_unnamed.append(nid)
            return nid
        if isinstance(obj, _UNCOPYABLE):
            raise NotSnapshotable(f"{graph.path(nid)} is a {kind.__name__} ({obj!r:.60}), whose progress cannot be "
                                  "copied: keep what it stands for as data, or give the kit save/load hooks")
        if isinstance(obj, types.MethodType):
            nodes.append(("method", -1, -1))
        else:
            nodes.append(("pending",))
        work.append((nid, obj))
        return nid

    for key, slot in roots.items():
        try:
            value = slot.get()
        except (KeyError, ValueError):
            continue
        graph.roots[key] = visit(value, -1, f"[{key}]")  # a root's key: text
    while work:
        nid, obj = work.pop()
        nodes[nid] = _describe(obj, nid, visit, graph)
    graph.random_state = random.getstate()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        graph.numpy_state = numpy.random.get_state()
    if graph.portable is None and shared_unnamed:
        first = shared_unnamed[0]
        graph.portable = (f"{graph.path(first)} is a {type(graph.originals[first]).__name__}, which is not plain "
                          "data (it stays in the game's process)")
    return graph


def _named(obj: Any) -> bool:
    """A shared object another process of the same build can find by name."""
    if isinstance(obj, (types.FunctionType, type, types.BuiltinFunctionType)):
        return "<locals>" not in getattr(obj, "__qualname__", "<locals>")
    return isinstance(obj, (types.ModuleType, enum.Enum)) or is_kit(obj)


def _describe(obj: Any, nid: int, visit: Callable[[Any, int, Any], int], graph: Graph) -> tuple[Any, ...]:
    cls = type(obj)
    if isinstance(obj, types.MethodType):
        return ("method", visit(obj.__func__, nid, ".__func__"), visit(obj.__self__, nid, ".__self__"))
    if isinstance(obj, dict):
        factory = obj.default_factory if isinstance(obj, collections.defaultdict) else None
        items = [(visit(k, nid, ("k", k)), visit(v, nid, ("k", k))) for k, v in list(obj.items())]
        return ("dict", cls, items, None if factory is None else visit(factory, nid, ".default_factory"),
                _attrs(obj, nid, visit))
    if isinstance(obj, list):
        return ("list", cls, [visit(v, nid, i) for i, v in enumerate(list(obj))], _attrs(obj, nid, visit))
    if isinstance(obj, tuple):
        return ("tuple", cls, [visit(v, nid, i) for i, v in enumerate(obj)])
    if isinstance(obj, (set, frozenset)):
        children = [visit(v, nid, "{}") for v in list(obj)]
        return ("frozenset", children) if isinstance(obj, frozenset) else ("set", cls, children)
    if cls is collections.deque:
        return ("deque", [visit(v, nid, i) for i, v in enumerate(list(obj))], None, obj.maxlen)
    if cls is bytearray:
        return ("bytearray", bytes(obj))
    if isinstance(obj, random.Random) and not isinstance(obj, random.SystemRandom):
        return ("random", cls, obj.getstate(), _attrs(obj, nid, visit, skip=("gauss_next",)))
    if plain_class(cls) and (hasattr(obj, "__dict__") or _slots_of(cls)):
        slots, empty = {}, []
        for name in _slots_of(cls):
            try:
                slots[name] = visit(object.__getattribute__(obj, name), nid, f".{name}")
            except AttributeError:
                empty.append(name)
        return ("object", cls, _attrs(obj, nid, visit), slots, empty)
    try:
        copied = copy.deepcopy(obj)
    except Exception as exc:  # noqa: BLE001 - whatever it is, it cannot be copied: shared
        log.warning("game-bridge kit: %s (a %s) cannot be copied (%s); snapshots share it as it is",
                    graph.path(nid), cls.__name__, exc)
        graph.shared_note = graph.shared_note or f"{graph.path(nid)} (a {cls.__name__}) is shared, not copied"
        if graph.portable is None:
            graph.portable = f"{graph.path(nid)} is a {cls.__name__}, which cannot be copied"
        return ("shared", obj)
    if graph.portable is None and not _is_ndarray(obj):
        graph.portable = f"{graph.path(nid)} is a {cls.__module__}.{cls.__qualname__}, which is not plain data"
    return ("copied", copied)


def _is_ndarray(obj: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(obj, numpy.ndarray) and obj.dtype.kind in "biufc?"


def _attrs(obj: Any, nid: int, visit: Callable[[Any, int, Any], int], skip: tuple[str, ...] = ()) -> dict[str, int] | None:
    held = getattr(obj, "__dict__", None)
    if not isinstance(held, dict):
        return None
    return {name: visit(value, nid, "." + name) for name, value in list(held.items()) if name not in skip}


__all__ = ["ATOMS", "Graph", "KEEP", "KIT_MODULES", "NotSnapshotable", "Slot", "copy_graph", "find_roots", "is_kit"]
