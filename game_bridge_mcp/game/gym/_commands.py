"""The wrapper's commands: ``act`` (an action for N steps, its argument's schema from the
action space), ``type`` (keys as actions, NetHack's way), ``reset`` (a new episode, with a
seed), and the keys ``key`` holds down for the family's ``input`` toolset."""

from __future__ import annotations

from typing import Annotated, Any

from ...contract import MAX_STEP_FRAMES
from ..kit import GameBridge
from ..kit.args import Arg
from ..kit.outcomes import Pending
from ..wrapper.input import Words
from . import _spaces
from ._engine import Engine, Hold

#: The toolsets, and what a caller reaches for each to do.
ACTIONS = "actions"
EPISODE = "episode"
#: The largest seed ``reset`` takes (JSON's exact integers).
MAX_SEED = 2 ** 53
SEED_HELP = f"The episode's seed, 0 to {MAX_SEED} (default: the next of the run's seeds, drawn from --seed)."
#: Most characters one ``type`` sends.
MAX_TYPED = 256
#: Key names an agent may use for others.
KEY_ALIASES = {"enter": "return", "esc": "escape", "pageup": "page up", "pagedown": "page down", "fire": "space"}


def action_argument(engine: Engine) -> Any:
    """The ``action`` argument's annotation: a name from the environment's own, or a value
    shaped as its action space says."""
    space = engine.space
    if engine.names is not None:
        return Annotated[str, Arg("The action, by its name.", choices=engine.names)]
    name = _spaces.kind(space)
    schema = {k: v for k, v in _spaces.schema(space).items() if k not in ("type", "description", "minimum", "maximum")}
    words = f"An action of the space {str(space)[:200]}{_spaces.bounds_text(space)}."
    if name == "Discrete":
        low, high = _spaces.discrete_range(space)
        return Annotated[int, Arg(words, minimum=low, maximum=high)]
    if name == "Box" and not tuple(space.shape):
        item = _spaces.schema(space)
        return Annotated[float, Arg(words, minimum=item.get("minimum"), maximum=item.get("maximum"))]
    if name == "Text":
        return Annotated[str, Arg(words, schema=schema)]
    if name == "Dict":
        return Annotated[dict[str, Any], Arg(words, schema=schema)]
    if name in ("Box", "MultiDiscrete", "MultiBinary", "Tuple"):
        return Annotated[list[Any], Arg(words, schema=schema)]
    return Annotated[str, Arg(words + " As JSON text.")]


def _decode_unknown(engine: Engine, value: Any) -> Any:
    """An action of a space the schema cannot say, given as JSON text."""
    from ...jsonio import decode_json

    if isinstance(value, str) and engine.names is None and _spaces.kind(engine.space) not in ("Text", "Discrete", "Box"):
        try:
            return decode_json(value.encode("utf-8"), strict=True)
        except ValueError as exc:
            raise ValueError(f"the action must be JSON text: it {exc}") from None
    return value


def register(bridge: GameBridge, engine: Engine) -> None:
    """``act``, ``type`` (where typed text means actions) and ``reset`` on ``bridge``."""

    def act(action: Any, frames: int = 1) -> Pending:
        value, shown = engine.parse_action(_decode_unknown(engine, action))
        if engine.book.ended:
            raise ValueError(f"cannot act: {engine.ended_text()}")
        return _hold(bridge, engine, Hold(value, shown, frames, frames), frames)

    act.__annotations__ = {
        "action": action_argument(engine),
        "frames": Annotated[int, Arg(f"Steps to take it for, 1 to {MAX_STEP_FRAMES}.", minimum=1,
                                     maximum=MAX_STEP_FRAMES)],
        "return": Pending}
    act.__doc__ = (
        "Take an action for the next frames steps (a step a frame): on a paused game they run now, as\n"
        "step runs them, and the answer says what they gave (action, frames, steps, reward: their sum,\n"
        "totalReward, terminated, truncated, lives); on a running game the action is held for them.\n"
        "Refused once the episode has ended: reset starts the next.")
    bridge.command(act, toolset=ACTIONS)

    def reset(seed: Annotated[int, Arg(SEED_HELP, minimum=0, maximum=MAX_SEED)] = None,  # type: ignore[assignment]
              options: Annotated[dict[str, Any],
                                 Arg("The environment's reset options, a JSON object.")] = None  # type: ignore[assignment]
              ) -> dict[str, Any]:
        """Start a new episode: env.reset(seed, options). The same seed gives the same episode for
        the same actions."""
        return engine.reset(seed, options)

    bridge.command(reset, toolset=EPISODE)
    if engine.names is not None and engine.family.text_actions("", engine.names) is not None:
        _register_type(bridge, engine)


def _register_type(bridge: GameBridge, engine: Engine) -> None:
    def type_keys(text: Annotated[str, Arg(f"The keys, each one step's action (at most {MAX_TYPED}).")]) -> Pending:
        """Type keys as actions, one step each (k north, e eat, s search, < up the stairs): on a paused
        game the steps run now, as step runs them. The answer says what they gave."""
        if not text or len(text) > MAX_TYPED:
            raise ValueError(f"type takes 1 to {MAX_TYPED} characters, got {len(text)}")
        assert engine.names is not None
        indices = engine.family.text_actions(text, engine.names) or []
        if engine.book.ended:
            raise ValueError(f"cannot type: {engine.ended_text()}")
        actions = [engine.action_of(i) for i in indices]
        hold = Hold(None, text, len(actions), len(actions))
        engine.typed.extend((action, hold) for action in actions)
        return _hold(bridge, engine, hold, len(actions), typed=True)

    bridge.command(type_keys, name="type", toolset=ACTIONS)


def _hold(bridge: GameBridge, engine: Engine, hold: Hold, frames: int, *, typed: bool = False) -> Pending:
    paused = bridge.paused
    pending = bridge.defer(hold=paused)
    hold.pending = pending
    if not typed:
        engine.hold = hold
    if paused:
        bridge.owe_frames(frames)

    def result() -> dict[str, Any]:
        book = engine.book
        return {"action": hold.shown, "frames": hold.frames, "steps": hold.steps, "reward": hold.reward,
                "totalReward": book.totalReward, "terminated": book.terminated, "truncated": book.truncated,
                "lives": book.lives, "episode": book.episode, "step": book.step}

    pending.complete_after_sim_frames(frames, result)
    return pending


class Keys:
    """The keys ``key`` holds down: each stands for an action (the family's map), and the
    ones held together for the action the family makes of them."""

    pointer: tuple[int, int] | None = None

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def key_code(self, name: str) -> str:
        key = str(name).strip().lower()
        key = KEY_ALIASES.get(key, key)
        if key not in self.engine.keys:
            raise ValueError(f"no action has the key {str(name)[:40]!r} here; {key_list(self.engine)}")
        return key

    def key(self, code: Any, name: str, down: bool) -> None:
        held = self.engine.held_keys
        if code in held:
            held.remove(code)
        if down:
            held.append(code)

    def move(self, x: int, y: int, shown: tuple[int, int]) -> None:
        raise ValueError("an environment has no pointer")

    def button(self, button: int, down: bool) -> None:
        raise ValueError("an environment has no pointer")

    def text(self, text: str) -> None:
        raise ValueError("use type or act")


def key_list(engine: Engine) -> str:
    if not engine.keys:
        return "this environment's actions have no keys: use act"
    return "its keys: " + ", ".join(f"{key} ({action})" for key, action in engine.keys.items())


def words(engine: Engine) -> Words:
    return Words(
        key_names=f"A key ({key_list(engine)}).",
        frames="steps",
        key="Press, hold down or release a key that stands for an action, as a player would: while it is\n"
            "down each step takes its action (keys held together make the combined action where the game\n"
            "has it). On a paused game it waits for the next step (advance delivers it).",
        mouse="", text="",
        area="screen", x_more="", no_area="an environment has no pointer")
