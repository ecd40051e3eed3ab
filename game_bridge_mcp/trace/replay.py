"""Re-issuing a recording's calls and comparing each answer with the recorded one, stopping at
the first divergence; knows nothing of processes or MCP."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable

from ..errors import BridgeError, GameOffline, NotAGameSurface
from .compare import Difference, IgnoreRules, differences
from .format import jsonable
from .reader import Call, Trace

#: ``run(name, arguments, port, options)``: one call_tool against the replay instance,
#: with everything else the recorded call carried (``options``: ``until`` ...).
RunCall = Callable[[str, dict[str, Any], int, dict[str, Any]], Any]
Summarise = Callable[[Any], dict[str, Any]]

SAME, DIVERGED, SKIPPED, NOT_RUN, FAILED = "same", "diverged", "skipped", "not-run", "failed"


@dataclass
class StepOutcome:
    call: Call
    status: str
    replay_port: int | None = None
    answer: Any = None
    error: dict[str, Any] | None = None
    differences: list[Difference] = field(default_factory=list)
    duration_ms: float | None = None

    @property
    def replayed_view(self) -> Any:
        if self.error is not None:
            return {"error": self.error}
        return self.answer


@dataclass
class ReplayResult:
    trace: Trace
    steps: list[StepOutcome]
    rules: IgnoreRules
    failure: BridgeError | None = None
    failed_step: StepOutcome | None = None
    notes: list[str] = field(default_factory=list)
    #: The replaying bridge's screenshot folder: the only place replayed screenshots are read from.
    screenshots: Path | None = None

    @property
    def divergences(self) -> list[StepOutcome]:
        return [s for s in self.steps if s.status == DIVERGED]

    @property
    def first_divergence(self) -> StepOutcome | None:
        found = self.divergences
        return found[0] if found else None

    def exit_code(self, *, update: bool = False) -> int:
        if self.failure is not None:
            return self.failure.exit_code
        if self.divergences and not update:
            return 1
        return 0


def _normalise_message(message: Any, ports: set[int]) -> Any:
    if not isinstance(message, str):
        return message
    for port in sorted(ports, reverse=True):
        message = re.sub(rf"(?<![0-9]){port}(?![0-9])", "<port>", message)
    return message


def error_view(error: Mapping[str, Any], ports: set[int]) -> dict[str, Any]:
    """What of an error is compared: its name and its message, ports written as <port>."""
    return {"error": error.get("error"), "message": _normalise_message(error.get("message"), ports)}


def recorded_view(call: Call) -> tuple[str, Any]:
    record = call.record
    if call.error is not None:
        return "error", call.error
    if "answer" in record:
        return "answer", record["answer"]
    return "summary", record.get("answerSummary")


def compare_step(call: Call, replay_port: int, answer: Any, error: dict[str, Any] | None,
                 rules: IgnoreRules, summarise: Summarise) -> list[Difference]:
    """The differences between the recorded outcome of ``call`` and a replayed one."""
    kind, recorded = recorded_view(call)
    ports = {p for p in (call.port, replay_port) if p is not None}
    if kind == "error" or error is not None:
        if kind != "error":
            assert error is not None
            return [Difference("error", None, f"{error.get('error')}: {error.get('message')}", "added")]
        if error is None:
            return [Difference("error", f"{recorded.get('error')}: {recorded.get('message')}", None, "missing")]
        return differences({"error": error_view(recorded, ports)}, {"error": error_view(error, ports)}, rules)
    if kind == "summary":
        summary = summarise(answer)
        if isinstance(answer, Mapping) and "port" in answer:
            summary = {"port": answer["port"], **summary}
        answer = summary
    return differences(recorded, answer, rules)


def _error_dict(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, BridgeError):
        return {"error": exc.name, "message": exc.message, "exitCode": exc.exit_code}
    return {"error": "InternalError", "message": f"{type(exc).__name__}: {exc}"[:500], "exitCode": 1}


def state_file_arguments(trace: Trace, call: Call) -> dict[str, Any]:
    """A call's arguments, with a state file it names (``restore_state {file}``,
    ``fork_instance {file}``) replaced by the copy the recorder kept beside the trace, when
    that copy is there (a file inside the trace's own folder, never a link)."""
    arguments = dict(call.arguments)
    copied = call.record.get("stateFile")
    if isinstance(copied, dict) and isinstance(copied.get("copy"), str) and "file" in arguments:
        folder = trace.path.with_name(trace.path.name + ".files")
        relative = copied["copy"].partition("/")[2]
        candidate = folder / relative
        if relative and "/" not in relative and relative not in (".", "..") and candidate.is_file() \
                and not candidate.is_symlink():
            arguments["file"] = str(candidate)
    return arguments


def replay(trace: Trace, run: RunCall, ports: Mapping[int, int], *, rules: IgnoreRules,
           summarise: Summarise, keep_going: bool = False,
           on_step: Callable[[StepOutcome], None] | None = None,
           new_session: Callable[[], None] | None = None,
           clock: Callable[[], float] = time.monotonic) -> ReplayResult:
    """Replay ``trace``; ``ports`` maps each recorded port to the port replayed against.
    ``new_session`` is called before a call recorded by another bridge session than the
    call before it (a trace appended to by several ``call`` processes): the replaying
    bridge should then answer as a fresh one would."""
    result = ReplayResult(trace=trace, steps=[], rules=rules)
    ports = dict(ports)  # a recorded fork's port joins it when the fork is replayed
    stopped = False
    session: str | None = None
    for call in trace.calls:
        if not call.replayed:
            result.steps.append(StepOutcome(call, SKIPPED))
            continue
        if stopped:
            result.steps.append(StepOutcome(call, NOT_RUN))
            continue
        if call.session is not None and session is not None and call.session != session and new_session:
            new_session()
        session = call.session if call.session is not None else session
        target = ports.get(call.port) if call.port is not None else next(iter(ports.values()), None)
        if target is None and call.name == "fork_instance":  # recorded under the fork's own port
            target = next(iter(ports.values()), None)
        if target is None:  # the caller maps every recorded port; this is a bug guard
            raise ValueError(f"no replay port for recorded port {call.port}")
        assert call.name is not None
        started = clock()
        answer: Any = None
        error: dict[str, Any] | None = None
        raised: BaseException | None = None
        try:
            answer = jsonable(run(call.name, state_file_arguments(trace, call), target, dict(call.options)))
            forked = call.record.get("answer") if call.name == "fork_instance" else None
            if isinstance(forked, dict) and isinstance(forked.get("port"), int) and isinstance(answer, dict) \
                    and isinstance(answer.get("port"), int):
                ports[forked["port"]] = answer["port"]
        except (BridgeError, RecursionError) as exc:
            error, raised = _error_dict(exc), exc
        duration = round((clock() - started) * 1000, 3)
        outcome = StepOutcome(call, SAME, replay_port=target, answer=answer, error=error, duration_ms=duration)
        recorded_error = (call.error or {}).get("error")
        if isinstance(raised, (GameOffline, NotAGameSurface)) and recorded_error != type(raised).__name__:
            outcome.status = FAILED
            result.failure, result.failed_step = raised, outcome
            stopped = True
        else:
            outcome.differences = compare_step(call, target, answer, error, rules, summarise)
            if outcome.differences:
                outcome.status = DIVERGED
                stopped = not keep_going
        result.steps.append(outcome)
        if on_step is not None:
            on_step(outcome)
    return result
