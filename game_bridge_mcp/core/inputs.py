"""``advance {frames, inputs}``: a paused game stepped with input delivered right before the
frames it names, built from the game's own ``step``, ``key``, ``mouse`` and ``text``; the rules
are docs/clock.md's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..contract import INPUT
from ..contract import MOUSE_ACTIONS as CONTRACT_MOUSE_ACTIONS
from ..errors import BridgeUsageError
from ..jsonio import as_int
from .outcome import command_outcome

#: At most this many inputs in one advance.
MAX_INPUTS = 256
MAX_TEXT = 1000
KEY_ACTIONS = ("press", "down", "up")
MOUSE_ACTIONS = CONTRACT_MOUSE_ACTIONS
_KINDS = ("key", "mouse", "text")


class Stepper(Protocol):
    """What of :class:`~game_bridge_mcp.core.clock.Advance` this needs."""

    client: Any
    behind: int | None
    advanced: int

    def start(self) -> dict[str, Any]: ...

    def step(self, frames: int, before: dict[str, Any], generation: int) -> dict[str, Any]: ...

    def answer(self, state: Mapping[str, Any], *, matched: bool, **fields: Any) -> dict[str, Any]: ...


def parse(inputs: Any, frames: int | None) -> list[tuple[int, str, dict[str, Any]]]:
    """``(at, command, args)`` for each input, in delivery order; BridgeUsageError naming
    the first thing wrong (nothing has been sent then)."""
    if frames is None:
        raise BridgeUsageError("advance: inputs needs 'frames', the number of frames to run them over "
                               "(each input's 'at' is a frame within them).")
    if not isinstance(inputs, Sequence) or isinstance(inputs, (str, bytes)):
        raise BridgeUsageError(f"advance: 'inputs' must be a list of inputs, not {type(inputs).__name__}.")
    if not 1 <= len(inputs) <= MAX_INPUTS:
        raise BridgeUsageError(f"advance: 'inputs' holds 1 to {MAX_INPUTS} inputs, not {len(inputs)}.")
    parsed = [_one(index, entry, frames) for index, entry in enumerate(inputs)]
    return sorted(parsed, key=lambda item: item[0])  # stable: the list's order among equal frames


def _one(index: int, entry: Any, frames: int) -> tuple[int, str, dict[str, Any]]:
    where = f"advance: inputs[{index}]"
    if not isinstance(entry, Mapping):
        raise BridgeUsageError(f"{where} must be an object such as {{\"at\": 0, \"key\": \"right\"}}, "
                               f"not {type(entry).__name__}.")
    at = _whole(entry.get("at"), 0, frames - 1)
    if at is None:
        raise BridgeUsageError(f"{where}: 'at' must be a whole frame from 0 to {frames - 1} (the advance "
                               f"runs {frames} frames; 0 is before the first), not {entry.get('at')!r}.")
    kinds = [kind for kind in _KINDS if kind in entry]
    if len(kinds) != 1:
        raise BridgeUsageError(f"{where} needs exactly one of key, mouse or text, not "
                               f"{', '.join(kinds) if kinds else 'none'}.")
    kind = kinds[0]
    allowed = {"at", kind} | ({"action", "frames"} if kind == "key" else set())
    extra = sorted(set(entry) - allowed)
    if extra:
        raise BridgeUsageError(f"{where}: unknown field '{extra[0]}' for a {kind} input; it takes "
                               f"{', '.join(sorted(allowed))}.")
    if kind == "key":
        return at, "key", _key(where, entry)
    if kind == "mouse":
        return at, "mouse", _mouse(where, entry["mouse"])
    text = entry["text"]
    if not isinstance(text, str) or not 1 <= len(text) <= MAX_TEXT:
        raise BridgeUsageError(f"{where}: 'text' must be a string of 1 to {MAX_TEXT} characters.")
    return at, "text", {"text": text}


def _key(where: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    key, action = entry["key"], entry.get("action", "press")
    if not isinstance(key, str) or not key.strip():
        raise BridgeUsageError(f"{where}: 'key' must be a key name such as \"right\", \"space\" or \"a\".")
    if action not in KEY_ACTIONS:
        raise BridgeUsageError(f"{where}: 'action' is one of {', '.join(KEY_ACTIONS)}, not {action!r}.")
    args: dict[str, Any] = {"key": key, "action": action}
    if "frames" in entry:
        if action != "press":
            raise BridgeUsageError(f"{where}: 'frames' is how long a press holds the key; a {action} has none.")
        held = _whole(entry["frames"], 1, 10000)
        if held is None:
            raise BridgeUsageError(f"{where}: 'frames' must be a whole number from 1 to 10000, not "
                                   f"{entry['frames']!r}.")
        args["frames"] = held
    return args


def _mouse(where: str, mouse: Any) -> dict[str, Any]:
    if not isinstance(mouse, Mapping):
        raise BridgeUsageError(f"{where}: 'mouse' must be an object {{x, y, button?, action?, dx?, dy?, scale?}}.")
    extra = sorted(set(mouse) - {"x", "y", "button", "action", "dx", "dy", "scale"})
    if extra:
        raise BridgeUsageError(f"{where}: unknown field 'mouse.{extra[0]}'; it takes x, y, button, action, "
                               "dx, dy, scale.")
    args: dict[str, Any] = {}
    for axis in ("x", "y"):
        value = _whole(mouse.get(axis), 0, 1 << 31)
        if value is None:
            raise BridgeUsageError(f"{where}: 'mouse.{axis}' must be a whole number of pixels, 0 or more.")
        args[axis] = value
    button, action = mouse.get("button", 1), mouse.get("action", "click")
    if button not in (1, 2, 3) or isinstance(button, bool):
        raise BridgeUsageError(f"{where}: 'mouse.button' is 1 (left), 2 (middle) or 3 (right), not {button!r}.")
    if action not in MOUSE_ACTIONS:
        raise BridgeUsageError(f"{where}: 'mouse.action' is one of {', '.join(MOUSE_ACTIONS)}, not {action!r}.")
    args.update(button=button, action=action)
    for delta in ("dx", "dy"):  # the wheel's (the game checks them with the action)
        if delta in mouse:
            value = _whole(mouse[delta], -(1 << 31), 1 << 31)
            if value is None:
                raise BridgeUsageError(f"{where}: 'mouse.{delta}' must be a whole number of pixels.")
            args[delta] = value
    if "scale" in mouse:
        scale = mouse["scale"]
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1:
            raise BridgeUsageError(f"{where}: 'mouse.scale' is get_screenshot's scale, more than 0 and at most 1.")
        args["scale"] = scale
    return args


def _whole(value: Any, low: int, high: int) -> int | None:
    """``value`` as a whole number within ``low..high``, or None (not one, or a bool)."""
    number = as_int(value)
    if number is None or isinstance(value, bool) or not low <= number <= high:
        return None
    return number


def run(stepper: Stepper, frames: int, plan: list[tuple[int, str, dict[str, Any]]]) -> dict[str, Any]:
    """Step ``frames`` frames, sending each planned input right before its frame."""
    client = stepper.client
    state = stepper.start()
    features = client.features or frozenset()
    if INPUT not in features:
        shown = ", ".join(sorted(features)) or "none"
        raise BridgeUsageError(f"The game on port {client.port} does not take input: its /health features "
                               f"({shown}) do not include 'input', so advance cannot deliver inputs.",
                               port=client.port, features=sorted(features))
    generation = client.generation
    sent: list[tuple[int, str, int | None]] = []
    for at, command, args in plan:
        if at > stepper.advanced:
            state = stepper.step(at - stepper.advanced, state, generation)
        queued = client.command_and_sync(command, args, sync=False)
        command_id = as_int(queued.get("commandId"))
        sent.append((at, command, command_id))
        if command_id is not None:
            stepper.behind = max(stepper.behind or 0, command_id)  # the steps now queue behind it
    if frames > stepper.advanced:
        state = stepper.step(frames - stepper.advanced, state, generation)
    delivered = [_outcome(at, command, command_id, state) for at, command, command_id in sent]
    return stepper.answer(state, matched=True, inputs=delivered)


def _outcome(at: int, command: str, command_id: int | None, state: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"at": at, "tool": command, "commandId": command_id}
    if command_id is None:
        return entry
    done = as_int(state.get("completedCommandId"))
    if done is not None and done < command_id:
        entry["done"] = False  # still in progress (a press held past the last frame)
        return entry
    outcome = command_outcome(state, command_id)
    if outcome.ok is not None:
        entry["ok"] = outcome.ok is not False
        if outcome.ok is False:
            entry["error"] = outcome.reason
        elif outcome.has_result:
            entry["result"] = outcome.result
    return entry


__all__ = ["MAX_INPUTS", "parse", "run"]
