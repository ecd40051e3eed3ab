"""``restore_state`` and ``fork_instance`` (docs/states.md): a state goes back into a game
by the game's own ``snapshot_load`` (its live copy, or its bytes posted to it), or by
re-execution (a fresh process launched paused, sent what its journal says); then what the
game shows is compared with what was saved, and the answer says ``exact`` or what differed.
Nothing is half-restored: a load the game refuses leaves it as it was, and a re-execution
that fails on the instance's own port brings the instance back to where it was."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ...contract import SNAPSHOT_FEATURE, SNAPSHOT_ID, SNAPSHOT_LOAD
from ...errors import BridgeError, BridgeUsageError
from ...wire import snapshots as wire
from .. import clock
from . import file as statefile
from ..events import answer_digest
from ..host import Host
from .journal import Sent, repeatable_env
from .reexec import compare, replay, screenshot_sha
from .saving import (bytes_of, drop_in_game, game_command, live_journal, same_build, save, start_journal,
                     why_no_journal)
from .store import SavedState, from_file

log = logging.getLogger(__name__)


def resolve(host: Host, state: Any, file: Any, port: int) -> SavedState:
    """The state an agent named: one of this session's, or read from a state file."""
    if (state is None) == (file is None):
        raise BridgeUsageError("Give either state (a name save_state answered; list_states shows them) or file "
                               "(a .gbstate file, such as a kept state's), not both and not neither.")
    if state is not None:
        return host.states.get(state)
    path = Path(str(file)).expanduser()
    try:
        data = statefile.read(path)
    except ValueError as exc:
        raise BridgeUsageError(f"file: {exc}. Nothing was sent.", file=str(file)) from None
    name = data.header.get("name")
    found = from_file(data, name if isinstance(name, str) and name else path.stem, port)
    found.file = path  # read again when its bytes are needed; never deleted by the bridge
    found.kept = True
    return found


def _check_restorable(host: Host, port: int, state: SavedState) -> None:
    """What restore_state refuses before touching the game: another build, a running
    game, commands that still wait for the clock."""
    inst = host.instance(port)
    same_build(host, port, state)
    paused = inst.client.paused  # the newest answer's word (the agent pauses through the bridge)
    if paused is None:
        paused = host.guarded(port, lambda: inst.client.state(digest=True)).get("paused")
    if paused is not True:
        raise BridgeUsageError(
            f"restore_state: the game on port {port} is running (paused is not true), and a restore into a running "
            "game goes on before anyone looks at it. Pause it first (call_tool pause), then restore.",
            port=port, paused=paused)
    if len(inst.pending):
        raise BridgeUsageError(
            f"restore_state: {len(inst.pending)} command(s) on port {port} wait for the game's clock, and would be "
            "delivered into the restored state. Deliver them with call_tool advance first.", port=port)


# ---------------------------------------------------------------------- by the game's own snapshot
def load(host: Host, port: int, state: SavedState, *, timeout_ms: int) -> dict[str, Any] | None:
    """Load ``state`` into the game on ``port`` with its own ``snapshot_load``: its live
    copy when it is there, else its bytes posted. The state after; None when there are no
    bytes to post (the game keeps them in its process: re-execution is the way)."""
    client = host.client(port)
    if state.game_id is not None and state.port == port and state.generation == client.generation:
        _result, after = host.guarded(port, lambda: game_command(client, SNAPSHOT_LOAD, {SNAPSHOT_ID: state.game_id},
                                                                 timeout_ms=timeout_ms, result=False))
        return after
    data = bytes_of(host, state, timeout_ms=timeout_ms)
    if data is None:
        return None
    posted = host.guarded(port, lambda: wire.store(client, data, timeout_ms=timeout_ms))
    try:
        _result, after = host.guarded(port, lambda: game_command(client, SNAPSHOT_LOAD, {SNAPSHOT_ID: posted},
                                                                 timeout_ms=timeout_ms, result=False))
    finally:
        drop_in_game(client, posted, timeout_ms=timeout_ms)
    return after


def _continue_journal(host: Host, port: int, state: SavedState) -> None:
    """After a load, the instance's journal is the state's (what re-executes it), when the
    instance was launched paused and the state has one; else it ends."""
    inst = host.instance(port)
    if inst.journal is None:
        return
    if state.journal is None:
        inst.journal.end(f"the game was restored to state {state.name}, which has no journal")
        return
    start_journal(host, port, state.journal, free_since=state.free_since, env=state.launch_env)


# ---------------------------------------------------------------------- by re-execution
def _launch_paused(host: Host, port: int | None, fixed: Mapping[str, str]) -> dict[str, Any]:
    """A fresh instance of the declaration, paused, owned like any launch, with what the
    state's launch fixed in its environment (``fixed``, e.g. the browser wrapper's date)."""
    env = {**repeatable_env(fixed), clock.START_PAUSED_ENV: "1"}
    launched: dict[str, Any] = host.launcher().launch(port=port, env=env)
    new_port = int(launched["port"])
    host.forget(new_port)
    try:
        launched.update(clock.confirm_paused_launch(host.client(new_port), lambda: _stop(host, new_port),
                                                    timeout_ms=host.config.timeout_ms))
    except BridgeError:
        host.forget(new_port)
        raise
    return launched


def _stop(host: Host, port: int) -> None:
    try:
        host.launcher().stop(port, grace_ms=1000)
    except BridgeError as exc:
        log.warning("port %s: stopping failed: %s", port, exc.render())
    host.forget(port)


def _reexecute(host: Host, port: int, entries: Sequence[Sent], sim_frame: int | None, free_since: int | None,
               env: Mapping[str, str]) -> dict[str, Any]:
    """Replay ``entries`` into the fresh paused instance on ``port``; the state then."""
    start_journal(host, port, free_since=free_since, env=env)
    return host.guarded(port, lambda: replay(host.client(port), entries, sim_frame, timeout_ms=host.config.timeout_ms))


def reexecute_in_place(host: Host, port: int, state: SavedState) -> tuple[dict[str, Any], list[str]]:
    """Restore ``state`` on ``port`` by re-execution: the process there is stopped and a
    fresh one launched paused on the same port and replayed. A failure brings the
    instance back to where it was (its own journal replayed), and says so."""
    assert state.journal is not None
    inst = host.instance(port)
    journal = live_journal(host, port, inst)
    if journal is None:
        raise BridgeUsageError(
            f"restore_state: state {state.name} is restored by re-execution, which replaces the process on port "
            f"{port} by a fresh one, and the instance there cannot be brought back if that fails, since "
            f"{why_no_journal(host, port, inst)}. fork_instance {{state: {state.name!r}}} restores it in a new "
            "instance instead.", port=port, state=state.name)
    before, before_frame = journal.entries(), host.client(port).known.sim_frame
    notes: list[str] = []
    _stop(host, port)
    try:
        _launch_paused(host, port, state.launch_env)
        return _reexecute(host, port, state.journal, state.sim_frame, state.free_since, state.launch_env), notes
    except BridgeError as exc:
        back = _roll_back(host, port, before, before_frame, journal.free_since, journal.env)
        exc.message += f" The restore was not made; {back}"
        raise


def _roll_back(host: Host, port: int, entries: Sequence[Sent], sim_frame: int | None, free_since: int | None,
               env: Mapping[str, str]) -> str:
    try:
        if port in host.launched_ports():
            _stop(host, port)
        _launch_paused(host, port, env)
        _reexecute(host, port, entries, sim_frame, free_since, env)
    except BridgeError as exc:
        return (f"bringing the instance back to simFrame {sim_frame} failed too ({exc.render()}); launch_instance "
                "starts a new one.")
    return f"the instance on port {port} was brought back to simFrame {sim_frame} (re-executed)."


# ---------------------------------------------------------------------- the tools
def restore(host: Host, port: int, *, state: Any = None, file: Any = None) -> dict[str, Any]:
    saved = resolve(host, state, file, port)
    started = time.monotonic()
    _check_restorable(host, port, saved)
    inst = host.instance(port)
    timeout_ms = host.config.timeout_ms
    after: dict[str, Any] | None = None
    how = "snapshot"
    notes: list[str] = []
    if saved.how == "snapshot" and SNAPSHOT_FEATURE in inst.client.learn_features():
        with inst.command_lock:
            after = load(host, port, saved, timeout_ms=timeout_ms)
        if after is not None:
            _continue_journal(host, port, saved)
        elif saved.journal is None:
            raise BridgeUsageError(
                f"restore_state: state {saved.name} was saved in the game's own process and cannot leave it "
                f"({saved.not_portable or 'its live copy is gone: the game restarted'}), and it has no journal to "
                "re-execute. Nothing was changed.", port=port, state=saved.name)
    if after is None:
        if saved.journal is None:
            raise BridgeUsageError(f"restore_state: state {saved.name} holds the game's snapshot bytes, but the game "
                                   f"on port {port} does not advertise 'snapshot' to load them.", port=port)
        how = "re-execution"
        if saved.how == "snapshot":
            notes.append(f"The game keeps its snapshots in its process ({saved.not_portable}); re-executed instead.")
        after, more = reexecute_in_place(host, port, saved)
        notes += more
    answer = _answer(host, port, saved, after, how, started, notes, tool="restore_state")
    if file is not None:
        answer["file"] = str(saved.file)
    return answer


def fork(host: Host, *, state: Any = None, file: Any = None, port: Any = None, paused: bool | None = None) -> dict[str, Any]:
    started = time.monotonic()
    notes: list[str] = []
    if state is None and file is None:
        source = host.resolve_port(port)
        made = save(host, source, label="fork")
        saved = host.states.get(made["state"])
        notes.append(f"Saved port {source}'s current frame as state {saved.name} to fork from.")
    else:  # call_tool gives every bridge tool its port: with a state, it names no source
        saved = resolve(host, state, file, 0)
    launched = _launch_paused(host, None, saved.launch_env)
    new_port = int(launched["port"])
    try:
        same_build(host, new_port, saved)
        after = None
        how = "snapshot"
        if saved.how == "snapshot" and SNAPSHOT_FEATURE in host.client(new_port).learn_features():
            inst = host.instance(new_port)
            with inst.command_lock:
                after = load(host, new_port, saved, timeout_ms=host.config.timeout_ms)
            if after is not None:
                start_journal(host, new_port, saved.journal or (), free_since=saved.free_since, env=saved.launch_env)
                if saved.journal is None:
                    inst.journal.end(f"forked from state {saved.name}, which has no journal")  # type: ignore[union-attr]
        if after is None:
            if saved.journal is None:
                raise BridgeUsageError(
                    f"fork_instance: state {saved.name} was saved in the game's own process and cannot leave it "
                    f"({saved.not_portable or 'its live copy is gone'}), and it has no journal to re-execute (the "
                    "game was not launched paused by this bridge).", state=saved.name)
            how = "re-execution"
            after = _reexecute(host, new_port, saved.journal, saved.sim_frame, saved.free_since, saved.launch_env)
        answer = _answer(host, new_port, saved, after, how, started, notes, tool="fork_instance")
        if paused is False:
            host.client(new_port).command_and_sync("resume", {}, timeout_ms=host.config.timeout_ms)
            answer["paused"] = False
    except BaseException:
        _stop(host, new_port)
        raise
    answer.update({"pid": launched.get("pid"), "logFile": launched.get("logFile")})
    if file is not None:
        answer["file"] = str(saved.file)
    return answer


def _answer(host: Host, port: int, saved: SavedState, after: dict[str, Any], how: str, started: float,
            notes: list[str], *, tool: str) -> dict[str, Any]:
    client = host.client(port)
    shot = screenshot_sha(client, timeout_ms=host.config.timeout_ms) if saved.seen.screenshot is not None else None
    exact, differed = compare(saved.seen, after, shot)
    if not exact and saved.free_since is not None and how == "re-execution":
        notes.append(f"The recorded game ran on its own clock from simFrame {max(saved.free_since, 0)} (resume), "
                     "so its re-execution is not expected to be exact.")
    elif not exact:
        notes.append("The game does not come back the same from the same inputs: what differed is listed. "
                     "It depends on something the bridge does not replay (time, unseeded randomness, input from "
                     "outside); `game-bridge-mcp check` tests a game's snapshot.")
    inst = host.instance(port)
    shown = answer_digest(inst.shown, inst.client, after)  # the events since, each once
    if shown.get("note"):
        notes.append(str(shown.pop("note")))
    answer: dict[str, Any] = {"port": port, "tool": tool, "state": saved.name, "how": how, "exact": exact,
                              "bytes": saved.snapshot_bytes,
                              "elapsedMs": round((time.monotonic() - started) * 1000, 2)}
    if differed:
        answer["differed"] = differed
    answer.update(shown)
    if notes:
        answer["note"] = " ".join(notes)
    return answer


__all__ = ["fork", "load", "reexecute_in_place", "resolve", "restore"]
