"""``save_state`` and ``list_states``, and what restoring and forking share: a state's bytes,
the game's live copies of its snapshots, a launched paused game's journal (docs/states.md).

A game with ``snapshot`` saves its own: the bridge sends ``snapshot_save`` and keeps the id
(a live copy in the game: a restore on the same instance is one ``snapshot_load``), and takes
the bytes out (``GET /snapshot``) only when they must leave the game: a fork, a kept state,
or more live copies than it leaves in one game. A game with ``clock`` that this bridge
launched paused is saved as its journal: what was sent at which frame since its launch."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...contract import CLOCK, ENV_DATE, ENV_SEED, SCREENSHOT_FEATURE, SNAPSHOT_DROP, SNAPSHOT_FEATURE, SNAPSHOT_ID, SNAPSHOT_SAVE
from ...errors import BridgeError, BridgeUsageError, CommandFailed, NotAGameSurface
from ...jsonio import as_int
from ...wire import snapshots as wire
from ...wire.client import GameClient
from ..host import BridgeInstance, Host
from .journal import Journal, Sent
from ..outcome import command_outcome
from .reexec import screenshot_sha
from .store import SavedState, Seen, clean_label
from . import file as statefile

log = logging.getLogger(__name__)

#: The most live copies the bridge leaves in one game (the contract lets a game keep 16);
#: past it, the oldest one's bytes are taken out and its copy dropped.
LIVE_IN_GAME = 8


# ---------------------------------------------------------------------- the game's commands
def game_command(client: GameClient, cmd: str, args: dict[str, Any], *, timeout_ms: int,
                 result: bool = True) -> tuple[Any, dict[str, Any]]:
    """Send one of ``snapshot``'s commands and wait until it is done: its result (None
    with ``result=False``, for a caller that does not read it) and the whole ``/state``
    after it. A refusal is CommandFailed with the game's reason."""
    outcome = client.command_and_sync(cmd, args, timeout_ms=timeout_ms)
    state = outcome.get("state")
    if not isinstance(state, dict):
        raise NotAGameSurface(client.port, f"advertises snapshot but its '{cmd}' was not confirmed "
                              f"({outcome.get('confirmation')})", path="/command")
    done = command_outcome(state, as_int(outcome.get("commandId")), result=result)
    if done.ok is False:
        raise CommandFailed(client.port, cmd, done.reason or "", command=cmd, command_id=as_int(outcome.get("commandId")))
    return done.result, state


def drop_in_game(client: GameClient, game_id: str, *, timeout_ms: int) -> None:
    """``snapshot_drop`` a live copy; a failure is logged (the copy goes with the game anyway)."""
    try:
        client.command(SNAPSHOT_DROP, {SNAPSHOT_ID: game_id}, timeout_ms=timeout_ms)
    except BridgeError as exc:
        log.info("port %s: dropping snapshot %s failed: %s", client.port, game_id, exc.render())


# ---------------------------------------------------------------------- identity and journals
def game_identity(host: Host, port: int) -> dict[str, Any]:
    """The game's name and version, from its ``/tools``: a state goes back only into the same build."""
    game = host.manifest(port).game
    return {"name": game.get("name"), "version": game.get("version")}


def same_build(host: Host, port: int, state: SavedState) -> dict[str, Any]:
    """Refuse a state of another game or build; the game's identity."""
    here = game_identity(host, port)
    if here != state.game:
        raise BridgeUsageError(
            f"State {state.name} is of {state.game.get('name')} {state.game.get('version')}, but the game on port "
            f"{port} is {here.get('name')} {here.get('version')}: a state goes back only into the same game and "
            "build. Nothing was sent.", port=port, state=state.name, stateGame=state.game, game=here)
    return here


def launch_key(host: Host, port: int) -> tuple[Any, Any] | None:
    """The launched process on ``port`` as the bridge knows it: launched by this bridge,
    and the generation of its client (a new process there, or the bridge losing touch with
    it, starts a new one). A journal is of one such process."""
    launcher = host.launcher(create=False)
    if launcher is None or not launcher.is_launched(port):
        return None
    return ("launched", host.client(port).generation)


def fixed_launch_env(host: Host) -> dict[str, str]:
    """What a paused launch fixes in the game's environment so that a re-execution starts
    alike (:data:`~.journal.REPEATED_ENV`), wherever it runs: the browser wrapper's date, now,
    unless the declaration or the bridge's own environment already sets it; and the wrappers'
    seed as this launch gets it (the declaration's, else the bridge's, else 0), so that a state
    forked or a trace replayed by a bridge whose environment says another seed starts alike."""
    declared = getattr(host.config.declaration, "env", None) or {}
    environ = host.config.environ
    fixed: dict[str, str] = {}
    if not (ENV_DATE in declared or environ.get(ENV_DATE)):
        fixed[ENV_DATE] = str(int(time.time() * 1000))
    seed = str(declared[ENV_SEED] if ENV_SEED in declared else environ.get(ENV_SEED, "")).strip() or "0"
    if seed.isdigit() and len(seed) <= 16:  # (a malformed one is the wrapper's to refuse, as it is)
        fixed[ENV_SEED] = seed
    return fixed


def start_journal(host: Host, port: int, entries: Sequence[Sent] = (), *, free_since: int | None = None,
                  env: Mapping[str, str] | None = None) -> Journal:
    """Record what is sent to the launched paused instance on ``port`` from now on,
    continuing ``entries`` (a restored or forked instance: its state's journal, and when
    its game ran on its own clock, ``free_since``); ``env``: what its launch fixed that a
    re-execution repeats."""
    inst = host.instance(port)
    fresh = Journal(inst.client.generation, entries, free_since=free_since, env=env)
    inst.journal, inst.journal_key = fresh, launch_key(host, port)
    inst.client.on_sent = fresh.record
    return fresh


def live_journal(host: Host, port: int, inst: BridgeInstance) -> Journal | None:
    """The instance's journal if it still leads to where the game is: the same process
    this bridge launched paused, and nothing it could not follow since."""
    journal = inst.journal
    if journal is None or journal.ended is not None:
        return None
    if inst.journal_key is None or launch_key(host, port) != inst.journal_key:
        journal.end("the game it recorded is no longer running")
        return None
    return journal


def why_no_journal(host: Host, port: int, inst: BridgeInstance) -> str:
    if inst.journal is not None and inst.journal.ended is not None:
        return f"its record of what was sent ended: {inst.journal.ended}"
    return ("it was not launched paused by this bridge (launch_instance {paused: true} records what is sent, "
            "which re-execution replays)")


# ---------------------------------------------------------------------- bytes
def bytes_of(host: Host, state: SavedState, *, timeout_ms: int) -> bytes | None:
    """The game's snapshot bytes of ``state`` (from its file, or taken out of the game that
    keeps its live copy, then written to this session's folder); None when the game keeps
    them in its process (``state.not_portable`` says why) or the copy is gone."""
    if state.file is not None and state.snapshot_bytes:
        try:
            return statefile.read(state.file).snapshot
        except ValueError as exc:
            raise BridgeUsageError(f"State {state.name}'s file cannot be read back: {exc}", state=state.name) from None
    if state.game_id is None or state.not_portable is not None:
        return None
    inst = host.instance(state.port)
    if inst.client.generation != state.generation:
        return None
    try:
        data = host.guarded(state.port, lambda: wire.fetch(inst.client, state.game_id or "", timeout_ms=timeout_ms))
    except wire.NotPortable as exc:
        state.not_portable = exc.reason
        return None
    state.snapshot_bytes = len(data)
    host.states.write(state, data)
    return data


def take_out(host: Host, state: SavedState, *, timeout_ms: int) -> None:
    """Move a live copy out of its game (its bytes to a file) and drop it there; a copy
    that cannot leave stays, and is dropped only when ``force``d by the game being full."""
    if state.game_id is None:
        return
    data = bytes_of(host, state, timeout_ms=timeout_ms)
    if data is None:
        return
    drop_in_game(host.client(state.port), state.game_id, timeout_ms=timeout_ms)
    state.game_id = None


def forget_live(host: Host, state: SavedState, *, timeout_ms: int) -> bool:
    """Drop a live copy that cannot leave its game; whether the state still comes back
    (by its journal)."""
    if state.game_id is not None:
        drop_in_game(host.client(state.port), state.game_id, timeout_ms=timeout_ms)
        state.game_id = None
    return state.journal is not None


# ---------------------------------------------------------------------- save_state
def save(host: Host, port: int, *, label: Any = None, keep: bool = False, screenshot: bool = False) -> dict[str, Any]:
    inst = host.instance(port)
    client = inst.client
    timeout_ms = host.config.timeout_ms
    features = host.guarded(port, lambda: client.learn_features())
    game = game_identity(host, port)
    journal = live_journal(host, port, inst)
    own = SNAPSHOT_FEATURE in features
    if not own and (CLOCK not in features or journal is None):
        why = ("it has no clock either" if CLOCK not in features else why_no_journal(host, port, inst))
        raise BridgeUsageError(
            f"save_state: the game on port {port} cannot be saved: it does not advertise 'snapshot' (saving "
            f"its own state), and it cannot be re-executed, since {why}. Launch it with launch_instance "
            "{paused: true} and play it from there, or give it the snapshot extension (docs/contract.md).",
            port=port, features=sorted(features))
    store = host.states
    dropped: list[str] = []
    notes: list[str] = []
    started = time.monotonic()
    with inst.command_lock:
        if len(inst.pending):
            raise BridgeUsageError(
                f"save_state: {len(inst.pending)} command(s) on port {port} wait for the game's clock; a state "
                "saved now would not hold them. Deliver them with call_tool advance first.", port=port)
        game_id = None
        sim_frame: int | None
        if own:
            result, state = _save_in_game(host, port, store, dropped, timeout_ms)
            game_id = str(result.get("id"))
            sim_frame = as_int(result.get("simFrame"), minimum=0)
            size = as_int(result.get("bytes"), minimum=0) or 0
        else:
            state = host.guarded(port, lambda: client.state())
            sim_frame, size = as_int(state.get("simFrame"), minimum=0), 0
        shot = None
        if SCREENSHOT_FEATURE in features and (screenshot or not own):
            shot = host.guarded(port, lambda: screenshot_sha(client, timeout_ms=timeout_ms))
    entries = journal.entries() if journal is not None else None
    saved = SavedState(store.new_name(), clean_label(label), port, client.generation, game, sim_frame,
                       Seen.of(state, shot), journal=entries, free_since=journal.free_since if journal else None,
                       game_id=game_id, snapshot_bytes=size, launch_env=dict(journal.env) if journal else {})
    exact = True
    if as_int(state.get("simFrame"), minimum=0) != sim_frame:
        exact = False
        notes.append(f"The game ran on while saving (saved at simFrame {sim_frame}, showed "
                     f"{state.get('simFrame')} after): pause it (call_tool pause) for a state a restore can check.")
    if not own and saved.free_since is not None:
        exact = False
        notes.append(f"The game ran on its own clock from simFrame {max(saved.free_since, 0)} (resume): "
                     "re-execution replays what was sent at the frames it was sent at, which may not come "
                     "out the same.")
    if not own:
        store.write(saved)  # its journal, in the session's folder
    dropped += [s.name for s in _add(host, saved, timeout_ms)]
    if keep:
        keep_file(host, saved, timeout_ms=timeout_ms)
    _bound_live(host, port, timeout_ms)
    answer: dict[str, Any] = {"port": port, "state": saved.name, "simFrame": sim_frame, "bytes": saved.size,
                              "how": saved.how, "exact": exact, "kept": saved.kept,
                              "elapsedMs": round((time.monotonic() - started) * 1000, 2)}
    if saved.label:
        answer["label"] = saved.label
    if saved.file is not None and saved.kept:
        answer["file"] = str(saved.file)
    if dropped:
        answer["dropped"] = dropped
        notes.append(f"Dropped to stay within this session's bounds ({store.max_states} states, "
                     f"{store.max_bytes // 2**20} MiB): {', '.join(dropped)}.")
    if notes:
        answer["note"] = " ".join(notes)
    return answer


def _save_in_game(host: Host, port: int, store: Any, dropped: list[str], timeout_ms: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``snapshot_save``; when the game refuses (full), the oldest live copy this session
    keeps there makes room, once."""
    client = host.client(port)
    for attempt in (1, 2):
        try:
            result, state = host.guarded(port, lambda: game_command(client, SNAPSHOT_SAVE, {}, timeout_ms=timeout_ms))
        except CommandFailed:
            live = [s for s in store.all(port) if s.game_id is not None and s.generation == client.generation]
            if attempt == 2 or not live:
                raise
            oldest = live[0]
            take_out(host, oldest, timeout_ms=timeout_ms)
            if oldest.game_id is not None and not forget_live(host, oldest, timeout_ms=timeout_ms):
                store.drop(oldest)
                dropped.append(oldest.name)
            continue
        if not isinstance(result, dict) or not wire.is_snapshot_id(result.get("id")):
            raise NotAGameSurface(port, "advertises snapshot but snapshot_save's result has no id of 1-64 "
                                  "[A-Za-z0-9._-] (it must be {id, simFrame, bytes})", path="/command")
        return result, state
    raise AssertionError("unreachable")


def _add(host: Host, saved: SavedState, timeout_ms: int) -> list[SavedState]:
    dropped = host.states.add(saved)
    for old in dropped:
        if old.game_id is not None and host.instance(old.port).client.generation == old.generation:
            drop_in_game(host.client(old.port), old.game_id, timeout_ms=timeout_ms)
    return dropped


def _bound_live(host: Host, port: int, timeout_ms: int) -> None:
    """Leave at most :data:`LIVE_IN_GAME` live copies in the game on ``port``."""
    generation = host.client(port).generation
    live = [s for s in host.states.all(port) if s.game_id is not None and s.generation == generation
            and s.not_portable is None]
    for state in live[:max(0, len(live) - LIVE_IN_GAME)]:
        host.guarded(port, lambda: take_out(host, state, timeout_ms=timeout_ms))


def keep_file(host: Host, state: SavedState, *, timeout_ms: int) -> None:
    """Write ``state`` to ``<home>/states/kept``, to outlive the session (its bytes, or its journal)."""
    data = bytes_of(host, state, timeout_ms=timeout_ms) or b""
    if not data and state.journal is None:
        raise BridgeUsageError(
            f"save_state {{keep: true}}: state {state.name} was saved in the game's own process and cannot "
            f"leave it ({state.not_portable or 'its copy is gone'}), and the game was not launched paused by "
            "this bridge, so there is no journal to re-execute either. It stays in this session only.",
            state=state.name)
    host.states.write(state, data, kept=True)


# ---------------------------------------------------------------------- list_states
def listing(host: Host, port: int | None) -> dict[str, Any]:
    store = host.states
    states = [s.describe() for s in store.all(port)]
    for item, state in zip(states, store.all(port)):
        item["exact"] = state.free_since is None or state.how == "snapshot"
    count, size = store.totals()
    return {"states": states, "count": count, "bytes": size, "maxStates": store.max_states,
            "maxBytes": store.max_bytes}


def close_session(host: Host) -> None:
    """The session ends: its states go (kept ones stay as files); live copies in games
    this bridge did not launch are dropped there (a launched game goes with the session)."""
    launched = set(host.launched_ports())
    for state in host.states.close():
        if state.port in launched or state.game_id is None:
            continue
        client = host.client(state.port)
        if client.generation == state.generation:
            drop_in_game(client, state.game_id, timeout_ms=min(1000, host.config.timeout_ms))


__all__ = ["LIVE_IN_GAME", "bytes_of", "close_session", "drop_in_game", "game_command", "game_identity",
           "keep_file", "launch_key", "listing", "live_journal", "same_build", "save", "start_journal",
           "why_no_journal"]
