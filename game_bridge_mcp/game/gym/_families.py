"""What the wrapper knows of particular families of environments, beside what any
Gymnasium environment says of itself: the names of their actions (ALE's action meanings,
MiniGrid's and NetHack's enums, Gymnasium's own games'), the keys a player would press for
them, the text that shows their screen, their seeding and their native save state. An
environment of no known family is served from its spaces alone (:class:`Family`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._ale import Sticky

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
#: MiniGrid's own manual control (minigrid.manual_control), in pygame's key names.
MINIGRID_KEYS: dict[str, str] = {
    "left": "left", "right": "right", "up": "forward", "space": "toggle", "page up": "pickup",
    "tab": "pickup", "page down": "drop", "left shift": "drop", "return": "done",
}
_ANSI = re.compile(r"\x1b\[([0-9;]*)m")
MAX_ALE_STATE = 1024 * 1024


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


class ToyText(Family):
    """Gymnasium's toy-text games: FrozenLake, Taxi, CliffWalking, Blackjack."""

    label = "Gymnasium toy text"

    def text(self, obs: Any) -> str | None:
        u = self.unwrapped
        name = type(u).__name__
        if name == "BlackjackEnv" and isinstance(obs, tuple) and len(obs) == 3:
            return (f"Your hand sums to {obs[0]}; the dealer shows {obs[1]} (1 is an ace); "
                    f"you {'have' if obs[2] else 'have no'} usable ace. STICK or HIT.")
        render = getattr(u, "_render_text", None)
        if self.env.render_mode == "ansi" or callable(render):
            rendered = self.env.render() if self.env.render_mode == "ansi" else render()  # type: ignore[misc]
            if not isinstance(rendered, str):
                return None
            text = plain_text(rendered)
            if name == "TaxiEnv":
                text += "\n" + self._taxi()
            elif name == "FrozenLakeEnv":
                text += "\n@ is you. S start, F frozen, H hole, G goal."
            elif name == "CliffWalkingEnv":
                text += "\nx is you. C cliff, T target, o path."
            return text
        return super().text(obs)

    def _taxi(self) -> str:
        row, col, passenger, destination = self.unwrapped.decode(self.unwrapped.s)
        places = "RGYB"
        where = "in the taxi" if passenger == 4 else f"at {places[passenger]}"
        return (f"@ is the taxi (row {row}, column {col}); the passenger is {where}; the destination is "
                f"{places[destination]}. | walls; R G Y B the four stops.")


class Ale(Family):
    """The Arcade Learning Environment's Atari 2600 games (ale-py)."""

    label = "Atari 2600 (Arcade Learning Environment)"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._init_native()

    def action_names(self) -> list[str] | None:
        return [str(name) for name in self.unwrapped.get_action_meanings()]

    def keys(self, names: Sequence[str]) -> dict[str, str]:
        """Arrows and space for the directions and fire that some action has."""
        keys = {}
        for part, key in (("UP", "up"), ("DOWN", "down"), ("LEFT", "left"), ("RIGHT", "right"), ("FIRE", "space")):
            if any(part in name for name in names):
                keys[key] = part
        return keys

    def compose(self, held: Sequence[str], keys: Mapping[str, str], names: Sequence[str]) -> str | None:
        """The held arrows and fire as one of the game's actions (``UPRIGHTFIRE``), the
        newest arrow winning on an axis; a combination the game lacks loses fire, then an
        axis, until one it has remains."""
        vertical = next((keys[k] for k in reversed(held) if k in ("up", "down") and k in keys), "")
        horizontal = next((keys[k] for k in reversed(held) if k in ("left", "right") and k in keys), "")
        fire = "FIRE" if "space" in held and "space" in keys else ""
        for v, h, f in ((vertical, horizontal, fire), (vertical, horizontal, ""), (vertical, "", fire),
                        ("", horizontal, fire), (vertical, "", ""), ("", horizontal, ""), ("", "", fire)):
            name = v + h + f
            if name and name in names:
                return name
        return None

    def default_fps(self) -> float:
        frameskip = getattr(self.unwrapped, "_frameskip", 1)
        skip = frameskip if isinstance(frameskip, int) and frameskip > 0 else 1
        return 60.0 / skip

    # ------------------------------------------------------------------ the native state
    def _init_native(self) -> None:
        u = self.unwrapped
        #: Sticky actions: ALE repeats the action it last took, which its clone leaves out,
        #: so a :class:`Sticky` follows it (but not through a continuous action's strength,
        #: which is sticky too: such an environment is re-executed).
        self.sticky: Sticky | None = None
        self.native = True
        if float(u.ale.getFloat("repeat_action_probability")) > 0:
            if getattr(u, "continuous", False):
                self.native = False
            else:
                self.sticky = Sticky(u)

    def _rng(self) -> Any:
        return self.unwrapped.np_random.bit_generator.state

    def stepped(self, step: int, action: Any) -> None:
        if self.sticky is not None:
            self.sticky.stepped(int(action))

    def was_reset(self) -> None:
        if self.sticky is not None:
            self.sticky.sync()  # ALE's reset put NOOP in place

    def native_save(self, step: int) -> dict[str, bytes]:
        """ALE's whole machine with its random generator, the environment's own generator
        and, with sticky actions, the action ALE applied last (which its clone leaves out)."""
        data = bytes(self.unwrapped.ale.cloneState(include_rng=True).serialize())
        window: dict[str, Any] = {"rng": self._rng()}
        if self.sticky is not None:
            window["last"] = self.sticky.last_action(data)
        return {"ale": data, "aleWindow": json.dumps(window, separators=(",", ":")).encode()}

    def native_load(self, sections: Mapping[str, bytes]) -> None:
        import ale_py

        from ...jsonio import decode_json

        data = sections.get("ale")
        if data is None or len(data) > MAX_ALE_STATE:
            raise ValueError("the snapshot holds no ALE state of a sane size")
        try:
            target = ale_py.ALEState(data)
        except Exception as exc:  # noqa: BLE001 - bytes ALE cannot read
            raise ValueError(f"ALE cannot read the snapshot's state: {exc}") from None
        try:
            window = decode_json(sections.get("aleWindow", b"{}"), strict=True)
        except ValueError as exc:
            raise ValueError(f"the snapshot's ALE window {exc}") from None
        if not isinstance(window, dict):
            raise ValueError("the snapshot's ALE window is damaged")
        generator = self.unwrapped.np_random.bit_generator
        try:
            type(generator)().state = window.get("rng")  # checked on a spare before the real one changes
        except Exception:  # noqa: BLE001 - numpy refuses a state of another shape as it sees fit
            raise ValueError("the snapshot's environment generator is damaged or of another kind") from None
        if self.sticky is not None:
            last = window.get("last")
            tries = self.sticky.check(data, last)  # type: ignore[arg-type]
            self.sticky.restore(target, data, last, tries)  # type: ignore[arg-type]
        else:
            self.unwrapped.ale.restoreState(target)
        generator.state = window["rng"]

    def description(self) -> str:
        return (" Keys: arrows and space (fire), held together for the diagonal and firing actions "
                "(up + right + space is UPRIGHTFIRE where the game has it).")


class MiniGrid(Family):
    """MiniGrid and BabyAI gridworlds."""

    label = "MiniGrid"

    def action_names(self) -> list[str] | None:
        return [member.name for member in self.unwrapped.actions][: int(self.env.action_space.n)]

    def keys(self, names: Sequence[str]) -> dict[str, str]:
        return {key: action for key, action in MINIGRID_KEYS.items() if action in names}

    def text(self, obs: Any) -> str | None:
        u = self.unwrapped
        grid = u.pprint_grid()
        mission = getattr(u, "mission", "")
        return (f"{grid}\nMission: {mission}\n"
                ">> VV << ^^ you, facing right, down, left, up. Each cell is two letters: the object "
                "(W wall, F floor, D door, K key, A ball, B box, G goal, V lava; L a locked door, __ an "
                "open one) and its colour (R red, G green, B blue, P purple, Y yellow, G grey).")

    def state(self, obs: Any) -> dict[str, Any]:
        u = self.unwrapped
        pos = getattr(u, "agent_pos", None)
        out: dict[str, Any] = {"mission": str(getattr(u, "mission", ""))[:300]}
        if pos is not None:
            out.update(agentX=int(pos[0]), agentY=int(pos[1]), agentDir=int(u.agent_dir))
        return out

    def description(self) -> str:
        return " Keys as MiniGrid's manual control: left, right, up (forward), space (toggle), tab (pickup), " \
               "left shift (drop), return (done)."


class Nle(Family):
    """The NetHack Learning Environment: NetHack as keys, its screen as text."""

    label = "NetHack (NLE)"
    _ARROWS = {"up": "k", "down": "j", "left": "h", "right": "l", "return": "\r", "escape": "\x1b", "space": " "}

    def action_names(self) -> list[str] | None:
        """NLE's action enums' names; a name an earlier action has (``N``, the one-step move)
        is given its enum's (``CompassDirectionLonger.N``, the long move)."""
        names: list[str] = []
        for member in self.unwrapped.actions:
            name = member.name if member.name not in names else f"{type(member).__name__}.{member.name}"
            names.append(name)
        return names

    def _codes(self) -> list[int]:
        return [int(member) for member in self.unwrapped.actions]

    def keys(self, names: Sequence[str]) -> dict[str, str]:
        """A key whose character is an action's (``k`` is north, ``e`` eat), the arrows as
        ``hjkl``, return, escape and space."""
        by_code = {code: name for code, name in zip(self._codes(), names)}
        keys = {}
        for key, char in self._ARROWS.items():
            if ord(char) in by_code:
                keys[key] = by_code[ord(char)]
        for code, name in by_code.items():
            char = chr(code)
            if char.isprintable() and not char.isspace() and not char.isupper() and char not in keys:
                keys[char] = name
        return keys

    def text_actions(self, text: str, names: Sequence[str]) -> list[int] | None:
        codes = self._codes()
        indices = []
        for char in text:
            if ord(char) not in codes:
                available = "".join(sorted(chr(c) for c in codes if chr(c).isprintable()))
                raise ValueError(f"{char!r} is not one of this environment's actions; its keys are {available!r} "
                                 "(and return, escape)")
            indices.append(codes.index(ord(char)))
        return indices

    def make_defaults(self) -> dict[str, Any]:
        return {"fix_moon_phase": True}  # the moon's phase from the seed, not today's date

    def before_reset(self, seed: int) -> None:
        core = seed % (2 ** 63)
        self.unwrapped.seed(core=core, disp=(core * 2654435761 + 1) % (2 ** 63), reseed=False)

    def text(self, obs: Any) -> str | None:
        if isinstance(obs, Mapping) and "tty_chars" in obs:
            rows = [bytes(row).decode("latin-1").rstrip() for row in obs["tty_chars"]]
            while rows and not rows[-1]:
                rows.pop()
            return "\n".join(rows)
        return super().text(obs)

    def state(self, obs: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if not isinstance(obs, Mapping):
            return out
        if "message" in obs:
            out["message"] = bytes(obs["message"]).split(b"\0", 1)[0].decode("latin-1")[:256]
        if "blstats" in obs:
            from nle import nethack as compiled

            nethack: Any = compiled  # its NLE_BL_* constants come from a compiled module type checkers cannot read

            stats = obs["blstats"]
            for key, index in (("hp", nethack.NLE_BL_HP), ("maxHp", nethack.NLE_BL_HPMAX),
                               ("depth", nethack.NLE_BL_DEPTH), ("gold", nethack.NLE_BL_GOLD),
                               ("score", nethack.NLE_BL_SCORE), ("turn", nethack.NLE_BL_TIME),
                               ("x", nethack.NLE_BL_X), ("y", nethack.NLE_BL_Y)):
                out[key] = int(stats[index])
        return out

    def description(self) -> str:
        return (" NetHack is played by keys: text {text} sends each character as the action of that key "
                "(k north, j south, h west, l east, e eat, s search, < > stairs); return answers --More--.")


class Crafter(Family):
    """Crafter: its actions by its names, its keys as its own viewer's."""

    label = "Crafter"

    def action_names(self) -> list[str] | None:
        return list(self.unwrapped.names)

    def keys(self, names: Sequence[str]) -> dict[str, str]:
        from ._crafter import KEYS

        return {key: action for key, action in KEYS.items() if action in names}

    def description(self) -> str:
        return (" Keys as Crafter's own viewer: w a s d or the arrows move, space does (collect, attack), tab "
                "sleeps, r t f p place stone, table, furnace, plant, 1-6 make tools.")


def family_of(env: Any) -> Family:
    """The family of ``env`` (by the module of its unwrapped class)."""
    module = type(env.unwrapped).__module__
    if module.startswith("ale_py"):
        return Ale(env)
    if module.startswith("minigrid"):
        return MiniGrid(env)
    if module.startswith(("nle.", "minihack")):
        return Nle(env)
    if module.startswith("gymnasium.envs.toy_text"):
        return ToyText(env)
    if module.endswith("gym._crafter"):
        return Crafter(env)
    return Family(env)


def make_defaults(env_id: str) -> dict[str, Any]:
    """Keyword arguments a family needs for its runs to replay (before the environment exists)."""
    if "NetHack" in env_id or env_id.startswith("MiniHack"):
        return {"fix_moon_phase": True}
    return {}
