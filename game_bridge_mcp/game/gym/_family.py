"""What the wrapper knows of any Gymnasium environment, from its spaces and render modes
(:class:`Family`), and the names and keys every family shares; the families that know more
of theirs are in :mod:`._families`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: Gymnasium's own games' actions, as their documentation names them (by class name).
GYMNASIUM_NAMES: dict[str, list[str]] = {
    "FrozenLakeEnv": ["LEFT", "DOWN", "RIGHT", "UP"],
    "CliffWalkingEnv": ["UP", "RIGHT", "DOWN", "LEFT"],
    "TaxiEnv": ["SOUTH", "NORTH", "EAST", "WEST", "PICKUP", "DROPOFF"],
    "BlackjackEnv": ["STICK", "HIT"],
    "CartPoleEnv": ["LEFT", "RIGHT"],
    "MountainCarEnv": ["LEFT", "NOOP", "RIGHT"],
    "AcrobotEnv": ["TORQUE_NEGATIVE", "NOOP", "TORQUE_POSITIVE"],
    "LunarLander": ["NOOP", "FIRE_LEFT", "FIRE_MAIN", "FIRE_RIGHT"],
}
#: The key a player presses for an action of this name (pygame's key names).
NAME_KEYS: dict[str, str] = {
    "UP": "up", "DOWN": "down", "LEFT": "left", "RIGHT": "right", "FIRE": "space",
    "NORTH": "up", "SOUTH": "down", "EAST": "right", "WEST": "left",
    "PICKUP": "p", "DROPOFF": "d", "HIT": "h", "STICK": "s",
}
_ANSI = re.compile(r"\x1b\[([0-9;]*)m")


class Family:
    """Any Gymnasium environment: what its spaces and render modes give."""

    label = "Gymnasium"
    #: Whether the family saves the environment's own state (``native_save`` and
    #: ``native_load``); otherwise a snapshot re-executes the episode.
    native = False

    def __init__(self, env: Any) -> None:
        self.env = env
        self.unwrapped = env.unwrapped

    # ------------------------------------------------------------------ actions
    def action_names(self) -> list[str] | None:
        """Names of a Discrete space's actions, in order (None: it has none)."""
        names = GYMNASIUM_NAMES.get(type(self.unwrapped).__name__)
        space = self.env.action_space
        if names is not None and type(space).__name__ == "Discrete" and int(space.n) == len(names):
            return list(names)
        return None

    def keys(self, names: Sequence[str]) -> dict[str, str]:
        """Key name -> action name, for the actions a single key stands for."""
        return {NAME_KEYS[name]: name for name in names if name in NAME_KEYS}

    def compose(self, held: Sequence[str], keys: Mapping[str, str], names: Sequence[str]) -> str | None:
        """The action the keys held down (oldest first) stand for: the newest one's."""
        for key in reversed(held):
            if key in keys:
                return keys[key]
        return None

    def text_actions(self, text: str, names: Sequence[str]) -> list[int] | None:
        """Typed text as a sequence of action indices (None: text means nothing here)."""
        return None

    def stepped(self, step: int, action: Any) -> None:
        """Step ``step`` of the episode was taken with ``action``."""

    def was_reset(self) -> None:
        """A new episode began."""

    # ------------------------------------------------------------------ episodes
    def make_defaults(self) -> dict[str, Any]:
        return {}

    def before_reset(self, seed: int) -> None:
        """Seed what ``reset(seed=...)`` does not (NetHack's own generators)."""

    def default_fps(self) -> float:
        fps = (getattr(self.env, "metadata", None) or {}).get("render_fps")
        try:
            value = float(fps)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return 30.0
        return value if 1 <= value <= 1000 else 30.0

    # ------------------------------------------------------------------ what it shows
    def text(self, obs: Any) -> str | None:
        """A text picture of the screen, or None."""
        if isinstance(obs, str):
            return obs
        if getattr(self.env, "render_mode", None) == "ansi":
            rendered = self.env.render()
            if isinstance(rendered, str):
                return plain_text(rendered)
        return None

    def state(self, obs: Any) -> dict[str, Any]:
        """Scalars of the family's own for ``/state.game``."""
        return {}

    def description(self) -> str:
        return ""


def plain_text(text: str) -> str:
    """ANSI-coloured text as plain text: a highlighted character (a background colour, how
    Gymnasium's toy-text games mark where the player is) becomes ``@``."""
    out: list[str] = []
    highlight = False
    position = 0
    for match in _ANSI.finditer(text):
        out.append(_mark(text[position:match.start()], highlight))
        codes = [c for c in match.group(1).split(";") if c]
        if not codes or "0" in codes:
            highlight = False
        if any(c.isdigit() and 40 <= int(c) <= 47 for c in codes):
            highlight = True
        position = match.end()
    out.append(_mark(text[position:], highlight))
    return "".join(out)


def _mark(segment: str, highlight: bool) -> str:
    if not highlight or not segment:
        return segment
    return "".join(ch if ch == "\n" else "@" for ch in segment)
