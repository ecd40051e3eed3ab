"""``replay --update``: a new recording from a replay (the recording's calls, the replay's
answers), replacing the old file in one rename."""

from __future__ import annotations

import os
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, Iterator

from .._version import __version__
from .format import answer_fields, dumps, header, jsonable
from .replay import DIVERGED, SAME, ReplayResult
from .files import CopyFolder
from .report import recorded_image, replayed_image


def write_updated(result: ReplayResult, target: str | Path, *, identities: Mapping[int, Mapping[str, Any]],
                  summarise: Callable[[Any], dict[str, Any]]) -> Path:
    """Write the replay in ``result`` as a trace at ``target`` (atomically), a line at a time."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(dumps(line) + "\n" for line in _lines(result, CopyFolder(target), identities, summarise))
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _lines(result: ReplayResult, files: CopyFolder, identities: Mapping[int, Mapping[str, Any]],
           summarise: Callable[[Any], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield header("replay --update", __version__)
    stamp = int(time.time() * 1000)
    for number, step in enumerate(result.steps, start=1):
        recorded = step.call.record
        record = {k: v for k, v in recorded.items()
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
            shot = replayed_image(step, result.screenshots)
        else:
            for key in ("answer", "answerSummary", "answerBytes", "answerSha256", "error"):
                if key in recorded:
                    record[key] = recorded[key]
            shot = recorded_image(step.call, result.trace.path.parent)
        if shot is not None and shot[1] is not None:
            suffix = ".jpg" if shot[1].startswith(b"\xff\xd8") else ".png"
            record["screenshot"] = {"file": shot[0], "copy": files.write(f"{stamp}-{number}{suffix}", shot[1])}
        yield record
