"""Comparing a recorded answer with a replayed one: any JSON, walked together, minus the paths an
ignore rule matches (``*`` one segment, ``**`` any number: ``**.frame``, ``events.*.seq``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any, Iterable

#: What differs between two runs of the same session and says nothing about the game.
DEFAULT_IGNORE: tuple[str, ...] = (
    "**.frame",                # the process's liveness counter
    "**.elapsedMs", "**.readyInMs", "**.durationMs", "**.waitedMs",   # timings
    "**.polls",                # how many polls a wait took
    "**.commandId", "**.completedCommandId",  # count every command the process was sent
    "**.seq", "next",          # event cursors (get_events' next)
    "**.port",                 # the replay's instance has its own port
    "**.pid", "**.cwd", "**.logFile", "**.file", "**.started",  # process facts, saved files
)
#: Ignored too unless the game was started paused: with the clock stopped from the start
#: the simulation frame is deterministic and worth comparing, otherwise it is wall time.
RUNNING_CLOCK_IGNORE: tuple[str, ...] = ("**.simFrame",)

MAX_DIFFERENCES = 20
_MISSING: Any = object()


def split_path(path: str) -> tuple[str, ...]:
    text = path.replace("[", ".").replace("]", "")
    return tuple(s for s in text.split(".") if s != "")


def _matches(pattern: Sequence[str], path: Sequence[str]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    return (head == "*" or head == path[0]) and _matches(rest, path[1:])


class IgnoreRules:
    """A set of ignore patterns (see the module's docstring)."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns: list[str] = []
        self._split: list[tuple[str, ...]] = []
        for pattern in patterns:
            parts = split_path(pattern)
            if parts and parts not in self._split:
                self.patterns.append(pattern)
                self._split.append(parts)

    @classmethod
    def defaults(cls, *, paused: bool = False, extra: Iterable[str] = ()) -> "IgnoreRules":
        base = list(DEFAULT_IGNORE) + ([] if paused else list(RUNNING_CLOCK_IGNORE))
        return cls([*base, *extra])

    def ignores(self, path: Sequence[str]) -> bool:
        return any(_matches(p, path) for p in self._split)


@dataclass(frozen=True)
class Difference:
    path: str           # dotted, "" for the whole answer
    recorded: Any       # _MISSING-free: see ``recorded_text``
    replayed: Any
    kind: str           # "changed", "missing" (only recorded has it), "added" (only replayed)

    def recorded_text(self) -> str:
        return "(absent)" if self.kind == "added" else show(self.recorded)

    def replayed_text(self) -> str:
        return "(absent)" if self.kind == "missing" else show(self.replayed)


def show(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def differences(recorded: Any, replayed: Any, rules: IgnoreRules | None = None, *,
                limit: int = MAX_DIFFERENCES) -> list[Difference]:
    """The paths where two JSON values differ, in document order (recorded's keys first,
    then keys only the replay has), at most ``limit`` of them."""
    rules = rules or IgnoreRules()
    out: list[Difference] = []
    stack: list[tuple[tuple[str, ...], Any, Any]] = [((), recorded, replayed)]
    while stack and len(out) < limit:
        path, a, b = stack.pop()
        if path and rules.ignores(path):
            continue
        dotted = ".".join(path)
        if a is _MISSING:
            out.append(Difference(dotted, None, b, "added"))
        elif b is _MISSING:
            out.append(Difference(dotted, a, None, "missing"))
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            keys = list(a) + [k for k in b if k not in a]
            stack.extend((path + (str(k),), a.get(k, _MISSING), b.get(k, _MISSING)) for k in reversed(keys))
        elif isinstance(a, list) and isinstance(b, list):
            n = max(len(a), len(b))
            stack.extend((path + (str(i),), a[i] if i < len(a) else _MISSING, b[i] if i < len(b) else _MISSING)
                         for i in reversed(range(n)))
        elif isinstance(a, (Mapping, list)) or isinstance(b, (Mapping, list)) or not _same_scalar(a, b):
            out.append(Difference(dotted, a, b, "changed"))
    return out


def strip_ignored(value: Any, rules: IgnoreRules, path: tuple[str, ...] = ()) -> Any:
    """``value`` without the parts ``rules`` ignore (for showing what was compared)."""
    if isinstance(value, Mapping):
        return {k: strip_ignored(v, rules, path + (str(k),)) for k, v in value.items()
                if not rules.ignores(path + (str(k),))}
    if isinstance(value, list):
        return [strip_ignored(v, rules, path + (str(i),)) for i, v in enumerate(value)
                if not rules.ignores(path + (str(i),))]
    return value
