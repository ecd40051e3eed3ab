"""The trace format: JSON Lines, one header line, then one line per tool call.

A format of its own, because a recording outlives the session, the bridge version and the
machine that made it, so what a line means must be written down once, here, and read
the same way by the recorder, ``replay``, the HTML report and the pytest plugin.

Line 1 (the header)::

    {"format": "game-bridge-trace", "version": 2, "created": "2026-...Z",
     "bridge": "0.1.0", "recorder": "serve"}

Every other line is an object with a ``type``; ``"call"`` lines are the calls::

    {"type": "call", "time": "2026-...Z", "session": "3f9a0c1d2e4b", "tool": "call_tool", "name": "drop",
     "port": 7820, "arguments": {"x": 1}, "options": {"until": {"path": "game.moving", "equals": 0}},
     "durationMs": 11.9,
     "answer": {...}                                  # or "error": {...}
     "game": {"name": ..., "version": ..., "cwd": ..., "paused": ..., "declaration": {...}},
     "screenshot": {"file": "/abs/saved.png", "copy": "rec.trace.files/3.png"}}

- ``tool`` is one of the seven MCP tools; for ``call_tool`` (and for the flat tools of
  ``--eager``, which are recorded as the ``call_tool`` they stand for) ``name`` is the
  tool it ran and ``arguments`` that tool's arguments, without ``port``; ``options`` is
  everything else the ``call_tool`` call carried (``until``, and any argument a later
  version adds), left out when there is none. Replay sends it all.
- ``answer`` is the answer when its JSON is at most ``ANSWER_CAP`` bytes; a bigger one is
  kept as ``answerSummary`` (the state digest), ``answerBytes`` and ``answerSha256``.
- ``error`` is ``{"error": name, "message": text, "exitCode": n}``.
- ``session`` names the bridge that made the call: one for a whole ``serve`` session, a new
  one for each ``call`` process appending to a shared trace (``GAME_BRIDGE_RECORD``).
  An answer's events depend on what the same bridge answered before (each event is shown
  once), so a replay meets each new session as a fresh bridge would. Traces without it
  are one session.
- Readers ignore line types and fields they do not know; a new ``version`` is for a
  change an old reader would misread. Version 2 added ``options`` (a version-1 reader
  would replay a call without its ``until``); version-1 files, which have none, are read
  as they always were. An option this bridge's ``call_tool`` does not take is refused
  when the trace is read, with its name.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping
from typing import Any

FORMAT = "game-bridge-trace"
VERSION = 2
#: The largest answer kept whole in a trace line (its compact JSON, in bytes).
ANSWER_CAP = 64 * 1024
#: Only ``call_tool`` calls act on the game and are replayed.
REPLAYED_TOOLS = frozenset({"call_tool"})


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps(value: Any) -> str:
    """One trace line's JSON: compact, UTF-8, no NaN, anything odd as a string."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": len(value)}  # never base64 a payload into a trace
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (what a trace line holds and a reader gets back)."""
    return json.loads(dumps(_finite(value)))


def _finite(value: Any, depth: int = 0) -> Any:
    if depth > 200:
        return "<nested too deeply>"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, depth + 1) for v in value]
    return value


def header(recorder: str, bridge_version: str) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "created": utc_now(),
            "bridge": bridge_version, "recorder": recorder}


def answer_fields(answer: Any, summarise: Any = None) -> dict[str, Any]:
    """The ``answer`` fields of a call line: the answer itself, or for one over the cap
    its digest (``summarise(answer)``), size and hash."""
    data = jsonable(answer)
    text = dumps(data)
    if len(text.encode("utf-8")) <= ANSWER_CAP:
        return {"answer": data}
    out: dict[str, Any] = {"answerBytes": len(text.encode("utf-8")),
                           "answerSha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    summary = summarise(data) if summarise is not None else {}
    if isinstance(data, Mapping) and "port" in data and isinstance(summary, dict):
        summary = {"port": data["port"], **summary}
    out["answerSummary"] = jsonable(summary)
    return out


def error_fields(name: str, message: str, exit_code: int) -> dict[str, Any]:
    return {"error": {"error": name, "message": message, "exitCode": exit_code}}
