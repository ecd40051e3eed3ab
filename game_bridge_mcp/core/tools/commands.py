"""A command's way through the bridge: sent under the port's command lock, confirmed, a
refusal raised, waited on (``until``) and answered; ``close``, confirmed by the port going quiet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from ...contract import CLOCK, CONFIRMED_BY_FRAMES, CONFIRMED_BY_ID, PENDING, VIEW_FEATURE
from ...errors import BridgeUsageError, CommandFailed, GamePaused
from ...jsonio import as_int
from ...wire.client import GameClient
from .. import clock
from ..digest import get_path
from ..events import answer_digest
from ..host import Host
from ..outcome import command_answer, command_outcome
from ..pending import CLOCK_COMMANDS, pending_note
from ..waiting import Condition, Until, check_screen, wait_until, with_screen


def run_command(host: Host, port: int, command: str, args: Mapping[str, Any] | None = None, *,
                sync: bool = True, timeout_ms: int | None = None, tool: str | None = None,
                via: str = "raw", include_state: bool = False, until: Until | None = None) -> dict[str, Any]:
    """Send a command, wait for its confirmation, return the result digest. With
    ``until``, then wait for its condition and answer with the state that met it."""
    if command == "close":
        return close_game(host, port, timeout_ms)
    inst = host.instance(port)
    baseline: Mapping[str, Any] | None = None
    if until is not None:
        host.guarded(port, lambda: check_screen(inst.client, until.condition))  # before the command is sent
    until_digest = until is not None and not include_state and until.condition.digest_answers is not False

    may_wait = sync and command not in CLOCK_COMMANDS  # input on a paused game waits for its clock

    def send() -> dict[str, Any]:
        nonlocal baseline
        with inst.command_lock:
            if may_wait and len(inst.pending):
                inst.pending.check_room(port, inst.client.completed_id, inst.client.generation)
            if may_wait and inst.client.paused is None and CLOCK in inst.client.learn_features():
                inst.client.state(digest=True)  # once: whether its clock is stopped (each answer says after)
            if until is not None and until.condition.needs_baseline:
                baseline = with_screen(inst.client, until.condition,
                                       whole_if_needed(inst.client, until, inst.client.state(digest=until_digest)))
            outcome = inst.client.command_and_sync(command, args, timeout_ms=timeout_ms, sync=sync,
                                                   digest=not include_state and (until is None or until_digest),
                                                   pending_ok=may_wait)
            if until is not None and until_digest and isinstance(outcome.get("state"), dict):
                outcome["state"] = whole_if_needed(inst.client, until, outcome["state"])
            return outcome

    outcome = host.guarded(port, send)
    confirmation = outcome["confirmation"]
    applied = {CONFIRMED_BY_ID: True, CONFIRMED_BY_FRAMES: True}.get(
        confirmation, False if confirmation in ("not-waited", PENDING) else None)
    fields: dict[str, Any] = {"port": port, "tool": tool or command, "via": via, "command": command,
                              "applied": applied}
    if outcome.get("commandId") is not None:
        fields["commandId"] = outcome["commandId"]
    elif outcome.get("reportedCommandId") is not None:  # an id that could not confirm it (idNote says why)
        fields["commandId"] = outcome["reportedCommandId"]
    else:
        fields["commandId"] = None
    fields["confirmation"] = confirmation  # how sure "applied" is (docs/contract.md's label)
    if outcome.get("idNote"):
        fields["confirmationNote"] = outcome["idNote"]
    state = outcome.get("state")
    if confirmation == PENDING and isinstance(state, dict):  # answered now; the next advance delivers it
        fields["pending"] = True
        inst.pending.add(int(outcome["commandId"]), tool or command, inst.client.generation)
        fields["note"] = pending_note(port, tool or command, outcome["commandId"], state,
                                      clock.until_shape(until.condition) if until is not None else None)
        fields.update(inst.pending.settle(state, inst.client.generation, exclude=outcome["commandId"]))
        return command_answer(fields, digest(host, port, state))
    if isinstance(state, dict):
        done = command_outcome(state, as_int(outcome.get("commandId")))
        if done.ok is False:  # a refusal is not waited on
            raise CommandFailed(port, tool or command, done.reason or "", command=command,
                                command_id=as_int(outcome.get("commandId")),
                                after=digest(host, port, state))
        if done.has_result:
            fields["result"] = done.result
        if done.note:
            fields["resultNote"] = done.note
    elif confirmation == "not-waited" and until is None:
        fields["note"] = "Queued and not waited on (sync: false). Use wait_for to observe its effect."
    if until is not None:
        settled = settle(host, port, until, baseline=baseline, first=state if isinstance(state, dict) else None,
                         whole=include_state)
        state = settled.pop("_state")
        fields.update(settled)
    if not isinstance(state, dict):  # not waited on: the state as the command was queued
        state = host.guarded(port, lambda: inst.client.state(digest=not include_state))
    if len(inst.pending):  # what became of commands that waited for the clock
        fields.update(inst.pending.settle(state, inst.client.generation))
    answer = command_answer(fields, digest(host, port, state))  # once: it moves the events cursor
    if include_state:
        answer["state"] = state
    return answer


def refuse_other_sessions(host: Host, port: int, consequence: str) -> None:
    """An instance another MCP session of this bridge launched is that session's alone
    (--http): nothing ends it, reads its output, or saves or restores its state from here,
    whichever tool asks."""
    elsewhere = getattr(host.launcher(create=False), "launched_elsewhere", None)
    if elsewhere is not None and elsewhere(port):
        raise BridgeUsageError(
            f"Port {port} was launched by another MCP session of this bridge, not by this one, so "
            f"{consequence}. Only the session that launched it can stop, close, read the output of, save or "
            "restore it (its instances stop when that session ends); launch an instance of your own with "
            "launch_instance.",
            port=port, launchedBy="another session")


def close_game(host: Host, port: int, grace_ms: Any = None) -> dict[str, Any]:
    """Ask the game on ``port`` to close and wait up to ``grace_ms`` (default 5000) for the
    port to go quiet, which confirms it. Refused for another MCP session's instance (``close``,
    ``raw_command close`` and a game tool whose command is ``close`` all come here)."""
    refuse_other_sessions(host, port, "close will not be sent to it")
    grace = 5000 if grace_ms is None else int(grace_ms)
    inst = host.instance(port)
    inst.client.health()  # a dead port is GameOffline, not a successful close
    with inst.command_lock:
        quiet = inst.client.close_and_wait(grace)
    host.forget(port)
    result = {"port": port, "tool": "close", "closed": quiet,
              "confirmation": "port-quiet" if quiet else "still-answering"}
    if not quiet:
        result["note"] = (f"The game was asked to close but port {port} still answers after {grace}ms. "
                          + ("It was launched by this bridge: stop_instance escalates." if port in host.launched_ports()
                             else "Check the game's window or log."))
    return result


def digest(host: Host, port: int, state: Mapping[str, Any]) -> dict[str, Any]:
    """The whole digest of ``state`` for an answer about ``port``; its events are the
    ones no answer has shown yet (the port's events cursor moves past them)."""
    inst = host.instance(port)
    return answer_digest(inst.shown, inst.client, state)


def settle(host: Host, port: int, until: Until, *, baseline: Mapping[str, Any] | None,
           first: Mapping[str, Any] | None, whole: bool = False) -> dict[str, Any]:
    """Wait for ``until`` after a command: ``settled`` and what was seen, and the state
    it ended on under ``_state`` (for the caller's digest)."""
    watch = until.condition.watch(baseline)
    poll, cost = condition_polls(host, port, until.condition, whole=whole)
    if first is not None and until.condition.screen is not None:
        client = host.client(port)
        shown = dict(first)
        first = host.guarded(port, lambda: with_screen(client, until.condition, shown))
    paused = clock.RefusePaused(poll, port, until.condition, last=first)
    try:
        waited = wait_until(paused, watch, timeout_ms=until.timeout_ms, poll_cost_s=cost, first=first)
    except GamePaused as exc:  # the command was applied; only the wait is pointless
        return {"settled": False, **watch.report(), "note": exc.message, "_state": paused.last or {}}
    out: dict[str, Any] = {"settled": waited.matched, **watch.report()}
    if not waited.matched:
        out["note"] = watch.miss_note(waited.total_ms)
    out["_state"] = waited.state
    return out


def whole_if_needed(client: GameClient, until: Until, state: dict[str, Any]) -> dict[str, Any]:
    """A digest that lacks the ``game.<key>`` ``until`` reads (not a scalar now, or not
    there): the whole state instead, so the condition is judged on what the game has."""
    condition = until.condition
    if condition.digest_answers is None and client.uses(VIEW_FEATURE) and not get_path(state, condition.path or "")[0]:
        return client.state()
    return state


def condition_polls(host: Host, port: int, condition: Condition, *, whole: bool = False
                    ) -> tuple[Callable[[int | None], dict[str, Any]], Callable[[], float]]:
    """How a wait for ``condition`` fetches states (given the time left), and what the
    last fetch cost: ``view=digest`` when the digest answers the condition (and the
    caller does not want the ``whole`` state); for a ``game.<key>`` a digest without
    it is checked against the whole state, which is fetched from then on."""
    client = host.client(port)
    keeps = False if whole else condition.digest_answers

    def fetch(remaining_ms: int | None) -> dict[str, Any]:
        nonlocal keeps
        state = client.state(timeout_ms=remaining_ms, digest=keeps is not False)
        if keeps is None and client.uses(VIEW_FEATURE) and not get_path(state, condition.path or "")[0]:
            keeps = False  # not a scalar now, or not there: look at the whole state
            state = client.state(timeout_ms=remaining_ms)
        return state

    def poll(remaining_ms: int | None) -> dict[str, Any]:
        return host.guarded(port, lambda: with_screen(client, condition, fetch(remaining_ms),
                                                      timeout_ms=remaining_ms))

    return poll, lambda: client.poll_cost(keeps is not False)
