"""The trace format, written down once for the recorder, ``replay``, the report and the pytest
plugin (docs/record-replay.md, "The trace format")."""

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
