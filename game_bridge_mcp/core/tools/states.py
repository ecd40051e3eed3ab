"""The states tools: ``save_state``, ``restore_state``, ``fork_instance`` and ``list_states``
(core/saving.py and core/restoring.py do the work; docs/states.md says what they answer)."""

from __future__ import annotations

from typing import Any

from ..host import Host
from ..states import restoring, saving
from .commands import refuse_other_sessions
from .shapes import BOOL, INT, INT_OR_NULL, STR, STR_OR_NULL, answer, rooted, with_digest
from .unit import PORT, ToolDef, schema

_HOW = {"type": "string", "enum": ["snapshot", "re-execution"],
        "description": "How it is saved or comes back: the game's own snapshot, or re-execution (a fresh instance "
                       "launched paused and sent what was sent, at the same frames)"}
_EXACT = {"type": "boolean", "description": "Whether the game came back exactly as saved: its /state (less frame, "
                                            "completedCommandId, commandResults, events and paused) and, where the "
                                            "state has one, its screenshot, equal to the ones at saving"}
_STATE = {"type": "string", "minLength": 1, "maxLength": 200,
          "description": "A state's name as save_state answered it (s1, s2, ...; list_states shows them), or its label."}
_FILE = {"type": "string", "minLength": 1, "maxLength": 4096,
         "description": "Instead of state: a state file (.gbstate), such as a kept state's file or one checked in "
                        "beside a test."}

# ----------------------------------------------------------------------------- save_state

SAVE_ANSWER = answer("save_state's answer", {
    "port": INT, "state": STR, "label": STR, "simFrame": INT_OR_NULL, "bytes": INT, "how": _HOW, "exact": _EXACT,
    "kept": BOOL, "file": STR, "elapsedMs": {"type": "number", "description": "How long it took"},
    "dropped": {"type": "array", "items": STR, "description": "States dropped to stay within the session's bounds"},
    "note": STR,
}, ("port", "state", "simFrame", "bytes", "how", "exact", "kept"))


def save_state(bridge: Host, *, port: Any = None, label: Any = None, keep: bool | None = None,
               screenshot: bool | None = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    refuse_other_sessions(bridge, target, "save_state will not leave a copy in it (a game keeps 16 at most, "
                          "and that session's own saves need the places)")
    return saving.save(bridge, target, label=label, keep=bool(keep), screenshot=bool(screenshot))


SAVE_STATE = ToolDef(
    "save_state", "Save the game's state",
    "Save the game at its current frame, to come back to it later (restore_state) or to start another instance "
    "from it (fork_instance): try a move and take it back, explore two branches. Works on a game with the "
    "snapshot extension, and on any game with a clock that this bridge launched paused (it is then re-executed). "
    "Pause the game first. Returns the state's name; states last as long as this session unless kept.",
    schema({"port": PORT,
            "label": {"type": "string", "maxLength": 64, "description": "A name of your own for it (also accepted by restore_state)."},
            "keep": {"type": "boolean", "description": "Also write it to a file in the bridge's home that outlives the session (answered as file), to hand to a test or a tester."},
            "screenshot": {"type": "boolean", "description": "Also compare the screenshot when it is restored (always done for a re-executed game)."}}),
    save_state, SAVE_ANSWER)

# ----------------------------------------------------------------------------- restore_state

RESTORE_ANSWER = with_digest(answer("restore_state's answer", {
    "port": INT, "tool": STR, "state": STR, "how": _HOW, "exact": _EXACT, "bytes": INT,
    "differed": {"type": "array", "items": STR, "description": "With exact false: what differed (path: saved -> now)"},
    "elapsedMs": {"type": "number", "description": "How long it took"}, "file": STR,
}, ("port", "state", "how", "exact")))


def restore_state(bridge: Host, *, port: Any = None, state: Any = None, file: Any = None) -> dict[str, Any]:
    target = bridge.resolve_port(port)
    refuse_other_sessions(bridge, target, "restore_state will not change its game (nor replace its process)")
    return restoring.restore(bridge, target, state=state, file=file)


RESTORE_STATE = ToolDef(
    "restore_state", "Restore a saved state",
    "Bring the paused game back to a state save_state saved (or a state file): the same world at the same "
    "frame, events and the command counter going on. Answers exact (the game shows what it showed at saving) "
    "or what differed, and the digest. A re-executed game is replaced by a fresh process on the same port.",
    schema({"port": PORT, "state": _STATE, "file": _FILE}),
    restore_state, rooted(RESTORE_ANSWER), destructive=True)

# ----------------------------------------------------------------------------- fork_instance

FORK_ANSWER = with_digest(answer("fork_instance's answer", {
    "port": INT, "tool": STR, "pid": INT_OR_NULL, "state": STR, "how": _HOW, "exact": _EXACT, "bytes": INT,
    "logFile": STR_OR_NULL,
    "differed": {"type": "array", "items": STR, "description": "With exact false: what differed"},
    "elapsedMs": {"type": "number", "description": "How long it took"}, "file": STR, "paused": BOOL,
}, ("port", "pid", "state", "how", "exact")))


def fork_instance(bridge: Host, *, state: Any = None, file: Any = None, port: Any = None,
                  paused: bool | None = None) -> dict[str, Any]:
    if state is None and file is None:  # forking a port's current frame saves it first
        refuse_other_sessions(bridge, bridge.resolve_port(port), "fork_instance will not save a copy in it to fork "
                              "from (a game keeps 16 at most, and that session's own saves need the places)")
    return restoring.fork(bridge, state=state, file=file, port=port, paused=paused)


FORK_INSTANCE = ToolDef(
    "fork_instance", "Fork a new instance at a state",
    "Launch another instance of this project's game (as launch_instance does, on a free port, stopped with this "
    "session) at a saved state, or at a port's current frame: explore a branch beside the original. It starts "
    "paused unless paused is false. Answers its port, exact and the digest.",
    schema({"state": _STATE, "file": _FILE,
            "port": {**PORT, "description": "Instead of state: fork this instance at its current frame (saved first)."},
            "paused": {"type": "boolean", "description": "Keep the fork paused (default true); false lets it run once restored."}}),
    fork_instance, rooted(FORK_ANSWER), destructive=False)

# ----------------------------------------------------------------------------- list_states

_LISTED = answer("a saved state", {
    "state": STR, "label": STR, "port": INT, "simFrame": INT_OR_NULL, "game": STR_OR_NULL, "version": STR_OR_NULL,
    "how": _HOW, "bytes": INT, "kept": BOOL, "file": STR, "journal": INT,
    "exact": {"type": "boolean", "description": "Whether a restore of it is expected to be exact"},
}, ("state", "port", "simFrame", "how", "kept", "exact"))

LIST_ANSWER = answer("list_states' answer", {
    "states": {"type": "array", "items": _LISTED}, "count": INT, "bytes": INT, "maxStates": INT, "maxBytes": INT,
}, ("states", "count", "bytes", "maxStates", "maxBytes"))


def list_states(bridge: Host, *, port: Any = None) -> dict[str, Any]:
    return saving.listing(bridge, None if port is None else bridge.resolve_port(port))


LIST_STATES = ToolDef(
    "list_states", "List saved states",
    "The states this session saved, oldest first: name, label, port, frame, how each comes back and whether "
    "exactly, and the session's bounds (the oldest unkept state is dropped past them).",
    schema({"port": {**PORT, "description": "Only the states saved from this port (default: all)."}}),
    list_states, LIST_ANSWER, read_only=True, idempotent=True)
