"""A :class:`~.graph.Graph` as bytes that are data, and back (``GET``/``POST /snapshot``).

The bytes are a first line naming the format, the SHA-256 of the rest, and JSON: the game's
name, version and build, the roots, and the nodes. They name classes and functions, but a
load never imports or looks anything up by that name: it finds them among the objects the
live game holds right now (the types of its objects, the functions and modules its state
refers to), and makes an object only of a class of the game's own whose instances are their
``__dict__`` and slots, without calling its code. Anything else is refused with the reason:
bytes any local process can POST may fail to load, or load a state, and nothing more."""

from __future__ import annotations

import base64
import collections
import datetime
import decimal
import enum
import fractions
import hashlib
import json
import math
import pathlib
import random
import types
from typing import Any, Iterable

from ...jsonio import decode_json
from .graph import KEEP, Graph, Slot, plain_class, copy_graph, is_kit

MAGIC = b"GAME-BRIDGE-KIT-SNAPSHOT 1\n"
#: The standard library's immutable values, made again from their text by a fixed constructor.
_VALUES: dict[str, Any] = {
    "PurePosixPath": lambda t: pathlib.PurePosixPath(str(t)), "PureWindowsPath": lambda t: pathlib.PureWindowsPath(str(t)),
    "PosixPath": lambda t: pathlib.PurePosixPath(str(t)) if not hasattr(pathlib, "PosixPath") else pathlib.Path(str(t)),
    "WindowsPath": lambda t: pathlib.PureWindowsPath(str(t)),
    "datetime": lambda t: datetime.datetime.fromisoformat(str(t)), "date": lambda t: datetime.date.fromisoformat(str(t)),
    "time": lambda t: datetime.time.fromisoformat(str(t)),
    "timedelta": lambda t: datetime.timedelta(days=int(t[0]), seconds=int(t[1]), microseconds=int(t[2])),
    "Decimal": lambda t: decimal.Decimal(str(t)), "Fraction": lambda t: fractions.Fraction(str(t))}
FORMAT = "game-bridge-kit-snapshot"
VERSION = 1


class Refused(ValueError):
    """Bytes that are not a snapshot this game can load (the message says why)."""


def build_of(roots: Iterable[str]) -> str:
    """This build's fingerprint: its roots (functions, with their first lines, and globals)."""
    return hashlib.sha256("\n".join(sorted(roots)).encode()).hexdigest()[:32]


# ---------------------------------------------------------------------- to bytes
def _cls(cls: type, plain: type | None = None) -> Any:
    return None if cls is plain else [cls.__module__, cls.__qualname__]


def _shared(obj: Any) -> list[Any]:
    if isinstance(obj, enum.Enum):
        return ["enum", type(obj).__module__, type(obj).__qualname__, obj.name]
    if isinstance(obj, types.ModuleType):
        return ["mod", obj.__name__]
    if isinstance(obj, type):
        return ["cls", obj.__module__, obj.__qualname__]
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return ["fn", getattr(obj, "__module__", None) or "builtins", obj.__qualname__]
    return ["kit", type(obj).__module__, type(obj).__qualname__]


def _node(node: tuple[Any, ...]) -> list[Any]:
    kind = node[0]
    if kind == "atom":
        value = node[1]
        if value is None or isinstance(value, (bool, int, str)):
            return ["a", value]
        if isinstance(value, float):
            return ["a", value] if math.isfinite(value) else ["fl", repr(value)]
        if isinstance(value, bytes):
            return ["b", base64.b64encode(value).decode()]
        if isinstance(value, complex):
            return ["c", repr(value.real), repr(value.imag)]
        if isinstance(value, range):
            return ["r", value.start, value.stop, value.step]
        if value is Ellipsis:
            return ["e"]
        return ["v", type(value).__name__, str(value) if not isinstance(value, datetime.timedelta)
                else [value.days, value.seconds, value.microseconds]]
    if kind == "shared":
        return ["sh", _shared(node[1])]
    if kind == "keep":
        return ["keep"]
    if kind == "dict":
        return ["d", _cls(node[1], dict), [[k, v] for k, v in node[2]], node[3], node[4]]
    if kind == "list":
        return ["l", _cls(node[1], list), node[2], node[3]]
    if kind == "tuple":
        return ["t", _cls(node[1], tuple), node[2]]
    if kind == "set":
        return ["s", _cls(node[1], set), node[2]]
    if kind == "frozenset":
        return ["fs", node[1]]
    if kind == "deque":
        return ["q", node[1], node[3]]
    if kind == "bytearray":
        return ["ba", base64.b64encode(node[1]).decode()]
    if kind == "random":
        version, internal, gauss = node[2]
        return ["rnd", _cls(node[1], random.Random), [version, list(internal), gauss], node[3]]
    if kind == "object":
        return ["o", _cls(node[1]), node[2], node[3], node[4]]
    if kind == "method":
        return ["m", node[1], node[2]]
    raise Refused(f"a {kind} node is not plain data")  # "copied": the graph says it is not portable


def encode(graph: Graph, *, game: str, version: str, sim_frame: int) -> bytes:
    """The bytes of ``graph`` (which must be portable: ``graph.portable`` is None)."""
    if graph.portable is not None:
        raise Refused(graph.portable)
    doc = {"format": FORMAT, "version": VERSION, "game": game, "gameVersion": version,
           "build": build_of(graph.roots), "simFrame": sim_frame, "roots": graph.roots,
           "nodes": [_node(node) for node in graph.nodes],
           "random": [graph.random_state[0], list(graph.random_state[1]), graph.random_state[2]]}
    body = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


# ---------------------------------------------------------------------- from bytes
class Live:
    """What the game holds now, by the names the bytes use: its classes and the shared
    objects (functions, classes, modules, the kit) its state refers to."""

    def __init__(self, roots: dict[str, Slot], skip: Iterable[Any] = ()) -> None:
        graph = copy_graph(roots, skip=skip)
        self.roots = roots
        self.classes: dict[tuple[str, str], type] = {}
        self.shared: dict[tuple[Any, ...], Any] = {}
        for node, original in zip(graph.nodes, graph.originals):
            if original is None:
                continue
            cls = type(original)
            self.classes[(cls.__module__, cls.__qualname__)] = cls
            if node[0] == "shared":
                key = tuple(_shared(original))
                self.shared[key] = original if key not in self.shared or self.shared[key] is original else _AMBIGUOUS
                if isinstance(original, type):
                    self.classes[(original.__module__, original.__qualname__)] = original

    def cls(self, desc: Any, plain: type, what: str) -> type:
        if desc is None:
            return plain
        if not (isinstance(desc, list) and len(desc) == 2 and all(isinstance(p, str) for p in desc)):
            raise Refused(f"a {what} names its class badly")
        found = self.classes.get((desc[0], desc[1]))
        if found is None:
            raise Refused(f"a {what} of class {desc[0]}.{desc[1]}, which this game does not hold now "
                          "(another build?)")
        return found

    def shared_obj(self, desc: Any) -> Any:
        key = tuple(desc) if isinstance(desc, list) and all(isinstance(p, str) for p in desc) else None
        if key is None or key[0] not in ("enum", "mod", "cls", "fn", "kit"):
            raise Refused("a shared object is named badly")
        if key[0] == "enum":
            enum_cls = self.classes.get((key[1], key[2]))
            if enum_cls is None or not issubclass(enum_cls, enum.Enum) or key[3] not in enum_cls.__members__:
                raise Refused(f"the enum member {'.'.join(key[1:])} is not one this game holds")
            return enum_cls.__members__[key[3]]
        found = self.shared.get(key, _MISSING)
        if found is _MISSING or found is _AMBIGUOUS:
            raise Refused(f"{' '.join(key)} is not something this game's state refers to now (another build?)")
        return found


_MISSING: Any = object()
_AMBIGUOUS: Any = object()


def _ids(value: Any, count: int, what: str) -> list[int]:
    if not isinstance(value, list) or not all(type(i) is int and 0 <= i < count for i in value):
        raise Refused(f"a {what} refers to nodes that are not there")
    return value


def _attrs(value: Any, count: int) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and type(v) is int and 0 <= v < count
                                              for k, v in value.items()):
        raise Refused("an object's attributes are not names and nodes")
    return value


def _random_state(value: Any) -> tuple[Any, ...]:
    if (not isinstance(value, list) or len(value) != 3 or value[0] != 3 or not isinstance(value[1], list)
            or len(value[1]) != 625 or not all(type(i) is int and 0 <= i < 2**32 for i in value[1])
            or not (value[2] is None or isinstance(value[2], float))):
        raise Refused("a random generator's state is not one")
    return (3, tuple(value[1]), value[2])


def _atom(item: list[Any]) -> Any:
    tag = item[0]
    try:
        if tag == "a" and len(item) == 2 and (item[1] is None or isinstance(item[1], (bool, int, str, float))):
            return item[1]
        if tag == "fl":
            return float(str(item[1]))
        if tag == "b":
            return base64.b64decode(str(item[1]), validate=True)
        if tag == "c":
            return complex(float(str(item[1])), float(str(item[2])))
        if tag == "r" and all(type(v) is int for v in item[1:4]):
            return range(item[1], item[2], item[3])
        if tag == "e":
            return Ellipsis
        if tag == "v" and item[1] in _VALUES:
            return _VALUES[item[1]](item[2])
    except (ValueError, TypeError, IndexError):
        pass
    raise Refused(f"a value of kind {str(tag)[:10]!r} is not one")


def decode(data: bytes, *, game: str, version: str, live: Live) -> tuple[Graph, int]:
    """A graph from bytes, checked whole against this game and what it holds now; its
    simFrame. Raises Refused saying why."""
    if not data.startswith(MAGIC):
        raise Refused("not a kit snapshot (its first line is not GAME-BRIDGE-KIT-SNAPSHOT 1)")
    digest, sep, body = data[len(MAGIC):].partition(b"\n")
    if not sep or hashlib.sha256(body).hexdigest().encode() != digest:
        raise Refused("damaged: its checksum does not match (cut off or changed)")
    try:
        doc = decode_json(body, strict=True)
    except ValueError as exc:
        raise Refused(f"damaged: its body {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise Refused("not a kit snapshot of version 1")
    if doc.get("game") != game or doc.get("gameVersion") != version:
        raise Refused(f"from another game or build ({str(doc.get('game'))[:60]} {str(doc.get('gameVersion'))[:20]}, "
                      f"not {game} {version})")
    if doc.get("build") != build_of(live.roots) or not isinstance(doc.get("roots"), dict) \
            or set(doc["roots"]) != set(live.roots):
        raise Refused(f"from another build of {game} {version}: its state is laid out differently")
    raw = doc.get("nodes")
    sim_frame = doc.get("simFrame")
    if not isinstance(raw, list) or type(sim_frame) is not int or sim_frame < 0:
        raise Refused("it has no nodes or no simFrame")
    count = len(raw)
    graph = Graph(slots=dict(live.roots), random_state=_random_state(doc.get("random")))
    for item in raw:
        graph.nodes.append(_decoded(item, count, live))
        graph.originals.append(None)
        graph.parents.append((-1, ""))
    for key, nid in doc["roots"].items():
        if type(nid) is not int or not 0 <= nid < count:
            raise Refused(f"root {key[:60]} refers to a node that is not there")
        graph.roots[key] = nid
    return graph, sim_frame


def _decoded(item: Any, count: int, live: Live) -> tuple[Any, ...]:
    if not isinstance(item, list) or not item or not isinstance(item[0], str):
        raise Refused("a node is not [kind, ...]")
    tag = item[0]
    try:
        if tag == "sh":
            return ("shared", live.shared_obj(item[1]))
        if tag == "keep":
            return ("keep", KEEP)
        if tag == "d":
            cls = live.cls(item[1], dict, "dict")
            if not issubclass(cls, dict):
                raise Refused("a dict of a class that is not one")
            pairs = item[2]
            if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                raise Refused("a dict's items are not pairs")
            for pair in pairs:
                _ids(pair, count, "dict")
            factory = item[3]
            if factory is not None and (type(factory) is not int or not 0 <= factory < count
                                        or not issubclass(cls, collections.defaultdict)):
                raise Refused("a dict's default factory is not one")
            return ("dict", cls, [tuple(p) for p in pairs], factory, _attrs(item[4], count))
        if tag in ("l", "t", "s"):
            plain = {"l": list, "t": tuple, "s": set}[tag]
            cls = live.cls(item[1], plain, plain.__name__)
            if not issubclass(cls, plain):  # a tuple of a subclass is made with tuple.__new__: no code of its
                raise Refused(f"a {plain.__name__} of a class that is not one")
            children = _ids(item[2], count, plain.__name__)
            if tag == "l":
                return ("list", cls, children, _attrs(item[3], count))
            return ("tuple", cls, children) if tag == "t" else ("set", cls, children)
        if tag == "fs":
            return ("frozenset", _ids(item[1], count, "frozenset"))
        if tag == "q":
            maxlen = item[2]
            if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
                raise Refused("a deque's maxlen is not one")
            return ("deque", _ids(item[1], count, "deque"), None, maxlen)
        if tag == "ba":
            return ("bytearray", base64.b64decode(str(item[1]), validate=True))
        if tag == "rnd":
            cls = live.cls(item[1], random.Random, "random generator")
            if not issubclass(cls, random.Random) or cls.__new__ is not random.Random.__new__:
                raise Refused("a random generator of a class that is not one")
            return ("random", cls, _random_state(item[2]), _attrs(item[3], count))
        if tag == "o":
            cls = live.cls(item[1], object, "object")
            if not plain_class(cls) or getattr(cls, "__new__") is not object.__new__ or is_kit(cls):  # (a class's own __new__ is typed apart from object's)
                raise Refused(f"an object of class {cls.__qualname__}, which is not made of data alone")
            slots = item[3]
            if not isinstance(slots, dict) or not all(isinstance(k, str) and type(v) is int and 0 <= v < count
                                                      for k, v in slots.items()) \
                    or not isinstance(item[4], list) or not all(isinstance(n, str) for n in item[4]):
                raise Refused("an object's slots are not names and nodes")
            return ("object", cls, _attrs(item[2], count), slots, item[4])
        if tag == "m":
            func, owner = _ids(item[1:3], count, "method")
            return ("method", func, owner)
        return ("atom", _atom(item))
    except (IndexError, TypeError, ValueError) as exc:
        if isinstance(exc, Refused):
            raise
        raise Refused(f"a node of kind {tag[:10]!r} is malformed") from None


__all__ = ["FORMAT", "Live", "MAGIC", "Refused", "VERSION", "build_of", "decode", "encode"]
