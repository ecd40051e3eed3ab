"""Snapshots of the environment under the wrapper, as bytes that are data: a magic line, a
JSON header, then the sections it names (raw bytes, each with its SHA-256). The state comes
from the environment's native save where its family has one (ALE's ``cloneState`` with its
random generator, and the screen, which ALE does not keep), and otherwise from the
episode's seed and the actions since its reset, re-executed in a fresh environment and
compared before it takes the running one's place. A load checks everything before it
changes anything: bytes of another environment, build or version, or damaged, are refused
and the game stays as it was."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from dataclasses import fields
from typing import Any, Callable, cast

from ...jsonio import decode_json
from . import _spaces
from ._engine import Book, Engine, Hold
from ._families import family_of

MAGIC = b"game-bridge-gym-snapshot 1\n"
FORMAT = "game-bridge-gym"
VERSION = 2  # 2: an ALE snapshot carries the action its sticky actions repeat, no replay window
#: Most actions an episode's replay may hold (its snapshot says so past it).
MAX_JOURNAL = 1_000_000
#: Most bytes of a header or of one section.
MAX_HEADER = 64 * 1024 * 1024
#: The scalars a Gymnasium wrapper may keep about the episode (``TimeLimit``'s count).
_SCALARS = (bool, int, float, str, type(None))


class SnapshotError(ValueError):
    """Bytes that cannot be loaded here, or a state that cannot be saved (says why)."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Snapshots:
    """``save()`` and ``load(bytes)`` for the kit's ``snapshot`` (its hooks), on the frames' thread."""

    def __init__(self, engine: Engine, identity: dict[str, Any], remake: Callable[[], Any]) -> None:
        self.engine = engine
        #: What must match for bytes to load here: the environment, its arguments, the packages.
        self.identity = identity
        self.remake = remake

    # ------------------------------------------------------------------ save
    def save(self) -> bytes:
        engine = self.engine
        book = engine.book
        if book.error is not None:
            raise SnapshotError(f"the environment failed ({book.error}): reset before saving")
        sections: dict[str, bytes] = {}
        header: dict[str, Any] = {"format": FORMAT, "version": VERSION, **self.identity,
                                  "book": engine.book_data(), "keysDown": list(engine.held_keys),
                                  "hold": _hold_data(engine.hold), "typed": [_spaces.to_json(a) for a, _h in engine.typed],
                                  "wrappers": _wrapper_scalars(engine.env)}
        family: Any = engine.family
        if engine.journal is None and family.native:
            header["how"] = "native"
            try:
                sections.update(cast("dict[str, bytes]", family.native_save(book.step)))  # named sections
            except ValueError as exc:
                raise SnapshotError(str(exc)) from None
            screen = engine.picture()
            if screen is not None:
                height, width = int(screen.shape[0]), int(screen.shape[1])
                header["screen"] = [width, height]
                sections["screen"] = zlib.compress(screen.tobytes(), 1)
        else:
            journal = engine.journal or []
            if len(journal) > MAX_JOURNAL:
                raise SnapshotError(f"the episode has {len(journal)} steps, more than the {MAX_JOURNAL} a snapshot "
                                    "replays: reset, or save earlier")
            header.update(how="replay", resetOptions=engine.reset_options)
            if engine.names is not None:
                sections["journal"] = struct.pack(f"<{len(journal)}q", *journal)
            else:
                header["journal"] = journal
        header["sections"] = [[name, len(data), _sha(data)] for name, data in sections.items()]
        text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return b"".join([MAGIC, text, b"\n", *sections.values()])

    # ------------------------------------------------------------------ load
    def load(self, data: bytes) -> None:
        header, sections = self._read(bytes(data))
        book = self._book(header.get("book"))
        engine = self.engine
        try:
            hold = _read_hold(engine, header.get("hold"))
            typed = [engine.parse_action(a)[0] for a in _list(header, "typed", 100000)]
            keys = [str(k) for k in _list(header, "keysDown", 64) if str(k) in engine.keys]
        except ValueError as exc:
            raise SnapshotError(f"the snapshot's held input does not fit this environment: {exc}") from None
        wrappers = _list(header, "wrappers", 64)
        if header.get("how") == "native":
            family: Any = engine.family
            if not family.native or engine.journal is not None:
                raise SnapshotError("the snapshot holds a native state, which this environment does not load")
            screen = _screen(header, sections)
            try:
                family.native_load(sections)  # checked by the family before it changes anything
            except ValueError as exc:
                raise SnapshotError(str(exc)) from None
            engine.screen = screen
        elif header.get("how") == "replay":
            if engine.journal is None:
                raise SnapshotError("the snapshot is a replay; this environment loads native states")
            if "journal" in sections:
                raw = sections["journal"]
                if len(raw) % 8:
                    raise SnapshotError("the snapshot's journal is damaged (not whole actions)")
                journal: list[Any] = list(struct.unpack(f"<{len(raw) // 8}q", raw))
            else:
                journal = _list(header, "journal", MAX_JOURNAL)
            options = header.get("resetOptions")
            if options is not None and not isinstance(options, dict):
                raise SnapshotError("the snapshot's reset options are not an object")
            self._replay(book, journal, options)
        else:
            raise SnapshotError(f"the snapshot's kind {str(header.get('how'))[:40]!r} is not one this wrapper makes")
        _set_wrapper_scalars(engine.env, wrappers)
        engine.book = book
        engine.held_keys = keys
        engine.hold = hold
        engine.typed.clear()
        if typed:
            typing = Hold(None, "(typed)", len(typed), len(typed))
            engine.typed.extend((action, typing) for action in typed)

    def _replay(self, book: Book, journal: list[Any], options: dict[str, Any] | None) -> None:
        """The episode re-executed in a fresh environment, which replaces the running one
        only when it came out as saved."""
        engine = self.engine
        if book.seed is None:
            raise SnapshotError("the snapshot has no seed to replay from")
        if len(journal) != book.step:
            raise SnapshotError(f"the snapshot's journal has {len(journal)} actions for {book.step} steps")
        try:
            actions = [engine.parse_action(a)[0] if engine.names is None else engine.action_of(int(a) - engine.start)
                       for a in journal]
        except (TypeError, ValueError) as exc:
            raise SnapshotError(f"the snapshot's journal holds an action outside this space: {exc}") from None
        env = self.remake()
        try:
            family = family_of(env)
            family.before_reset(book.seed)
            obs, info = env.reset(seed=book.seed, options=options)
            total, terminated, truncated = 0.0, False, False
            for action in actions:
                if terminated or truncated:
                    raise SnapshotError("the replay ended its episode before the snapshot's step")
                obs, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
            if (total, bool(terminated), bool(truncated)) != (book.totalReward, book.terminated, book.truncated):
                raise SnapshotError(
                    f"the environment did not replay the same: a total reward of {total:g} (saved {book.totalReward:g}), "
                    f"terminated {bool(terminated)} ({book.terminated}), truncated {bool(truncated)} ({book.truncated}); "
                    "it is not deterministic for a seed and its actions")
        except SnapshotError:
            env.close()
            raise
        except Exception as exc:  # noqa: BLE001 - the environment failed on the way: the running one stays
            env.close()
            raise SnapshotError(f"replaying the snapshot failed: {type(exc).__name__}: {str(exc)[:300]}") from None
        old = engine.env
        engine.env, engine.family = env, family
        engine.obs, engine.info = obs, info
        engine.screen = None
        engine.journal = list(journal)
        engine.reset_options = options
        try:
            old.close()
        except Exception:  # noqa: BLE001 - the old environment's teardown is not the load's concern
            pass

    def _read(self, data: bytes) -> tuple[dict[str, Any], dict[str, bytes]]:
        if not data.startswith(MAGIC):
            raise SnapshotError("these bytes are not a snapshot of game-bridge-mcp's gym wrapper")
        end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER)
        if end < 0:
            raise SnapshotError("the snapshot's header is cut off or too large")
        try:
            header = decode_json(data[len(MAGIC):end], strict=True)
        except ValueError as exc:
            raise SnapshotError(f"the snapshot's header {exc}") from None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise SnapshotError("the snapshot's header is not the gym wrapper's")
        if header.get("version") != VERSION:
            raise SnapshotError(f"the snapshot is of format version {str(header.get('version'))[:20]}; this wrapper "
                                f"reads {VERSION}")
        for key, value in self.identity.items():
            if header.get(key) != value:
                raise SnapshotError(f"the snapshot is of another environment or build: its {key} is "
                                    f"{json.dumps(header.get(key))[:200]}, this one's {json.dumps(value)[:200]}")
        sections: dict[str, bytes] = {}
        position = end + 1
        for entry in _list(header, "sections", 16):
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                    and isinstance(entry[1], int) and 0 <= entry[1] <= MAX_HEADER and isinstance(entry[2], str)):
                raise SnapshotError("the snapshot's list of sections is damaged")
            name, size, digest = entry
            chunk = data[position:position + size]
            if len(chunk) != size or _sha(chunk) != digest:
                raise SnapshotError(f"the snapshot's {name[:40]} section is damaged or cut off")
            sections[name] = chunk
            position += size
        if position != len(data):
            raise SnapshotError(f"the snapshot has {len(data) - position} bytes more than its header says")
        return header, sections

    def _book(self, data: Any) -> Book:
        names = {f.name for f in fields(Book)}
        if not isinstance(data, dict) or set(data) != names:
            raise SnapshotError("the snapshot's episode record is damaged")
        book = Book(**data)
        for name in ("episode", "step", "steps"):
            value = getattr(book, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SnapshotError(f"the snapshot's {name} is not a count")
        if not isinstance(book.totalReward, (int, float)) or not isinstance(book.shown, (dict, type(None))):
            raise SnapshotError("the snapshot's episode record is damaged")
        book.totalReward = float(book.totalReward)
        return book


def _list(header: dict[str, Any], key: str, most: int) -> list[Any]:
    value = header.get(key, [])
    if not isinstance(value, list) or len(value) > most:
        raise SnapshotError(f"the snapshot's {key} is damaged")
    return value


def _hold_data(hold: Hold | None) -> dict[str, Any] | None:
    if hold is None:
        return None
    return {"action": _spaces.to_json(hold.action), "shown": hold.shown, "frames": hold.frames, "left": hold.left,
            "steps": hold.steps, "reward": hold.reward}


def _read_hold(engine: Engine, data: Any) -> Hold | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), int) for k in ("frames", "left", "steps")):
        raise ValueError("its act is damaged")
    action = data.get("action")
    value = engine.action_of(int(action) - engine.start) if engine.names is not None and isinstance(action, int) \
        else engine.parse_action(action)[0]
    return Hold(value, data.get("shown"), data["frames"], data["left"], data["steps"], float(data.get("reward") or 0))


def _screen(header: dict[str, Any], sections: dict[str, bytes]) -> Any:
    if "screen" not in sections:
        return None
    size = header.get("screen")
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and 0 < v <= 8192 for v in size)):
        raise SnapshotError("the snapshot's screen size is damaged")
    width, height = size
    try:
        raw = zlib.decompressobj().decompress(sections["screen"], width * height * 3 + 1)
    except zlib.error:
        raise SnapshotError("the snapshot's screen is damaged") from None
    if len(raw) != width * height * 3:
        raise SnapshotError("the snapshot's screen is not its size")
    import numpy as np

    return np.frombuffer(raw, dtype=np.uint8).reshape(height, width, 3).copy()


def _chain(env: Any) -> list[Any]:
    chain: list[Any] = []
    while hasattr(env, "env") and len(chain) < 64:
        chain.append(env)
        env = env.env
    return chain


def _wrapper_scalars(env: Any) -> list[Any]:
    """The scalars each Gymnasium wrapper around the environment keeps (``TimeLimit``'s
    elapsed steps), by class name, in order."""
    return [[type(w).__name__, {k: v for k, v in vars(w).items() if isinstance(v, _SCALARS) and k != "env"}]
            for w in _chain(env)]


def _set_wrapper_scalars(env: Any, saved: list[Any]) -> None:
    for wrapper, entry in zip(_chain(env), saved):
        if not (isinstance(entry, list) and len(entry) == 2 and entry[0] == type(wrapper).__name__
                and isinstance(entry[1], dict)):
            continue
        for key, value in entry[1].items():
            current = getattr(wrapper, key, _Missing)
            if current is not _Missing and type(current) is type(value):
                setattr(wrapper, key, value)


class _Missing:
    pass
