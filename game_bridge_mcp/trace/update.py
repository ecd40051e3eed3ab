"""``replay --update``: a new recording from a replay, for when the change is the intended one.

The calls and their arguments are the recording's, in its order; each replayed call gets
the answer (or error), duration and game identity of the replay, and its screenshot is
copied beside the new trace. Session calls (launch, list, describe, stop) are kept as
recorded. The file is replaced in one rename, so a failed update leaves the old one whole.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable

from .._version import __version__
from .format import answer_fields, dumps, header, jsonable
from .replay import DIVERGED, SAME, ReplayResult
from .report import recorded_screenshot, replayed_screenshot


def write_updated(result: ReplayResult, target: str | Path, *, identities: Mapping[int, Mapping[str, Any]],
                  summarise: Callable[[Any], dict[str, Any]]) -> Path:
    """Write the replay in ``result`` as a trace at ``target`` (atomically)."""
    target = Path(target)
    files = target.with_name(target.name + ".files")
    lines = [header("replay --update", __version__)]
    stamp = int(time.time() * 1000)
    for number, step in enumerate(result.steps, start=1):
        record = {k: v for k, v in step.call.record.items()
                  if k not in ("answer", "answerSummary", "answerBytes", "answerSha256", "error", "screenshot")}
        if step.status in (SAME, DIVERGED):
            recorded_port = step.call.port
            record["durationMs"] = step.duration_ms
            if step.error is not None:
                record["error"] = step.error
            else:
                record.update(answer_fields(step.answer, summarise))
            ident = identities.get(step.replay_port or -1)
            if ident:
                record["game"] = jsonable(ident)
            record["port"] = recorded_port
            shot = replayed_screenshot(step)
        else:
            for key in ("answer", "answerSummary", "answerBytes", "answerSha256", "error"):
                if key in step.call.record:
                    record[key] = step.call.record[key]
            shot = recorded_screenshot(step.call, result.trace.path.parent)
        if shot is not None and shot.is_file():
            files.mkdir(parents=True, exist_ok=True)
            copy = files / f"{stamp}-{number}{shot.suffix or '.png'}"
            shutil.copyfile(shot, copy)
            record["screenshot"] = {"file": str(shot), "copy": f"{files.name}/{copy.name}"}
        lines.append(record)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(dumps(line) + "\n" for line in lines), encoding="utf-8")
    tmp.replace(target)
    return target
