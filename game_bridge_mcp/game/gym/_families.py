"""What the wrapper knows of particular families of environments, beside what any
Gymnasium environment says of itself (:class:`Family`): the names of their actions (ALE's
action meanings, MiniGrid's and NetHack's enums, Gymnasium's own games', ViZDoom's buttons),
the keys a player would press for them, the text that shows their screen, their seeding and
their native save state."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._ale import Sticky
from ._family import Family, plain_text

#: MiniGrid's own manual control (minigrid.manual_control), in pygame's key names.
MINIGRID_KEYS: dict[str, str] = {
    "left": "left", "right": "right", "up": "forward", "space": "toggle", "page up": "pickup",
    "tab": "pickup", "page down": "drop", "left shift": "drop", "return": "done",
}
MAX_ALE_STATE = 1024 * 1024
#: The keys a player presses for ViZDoom's buttons: each key's first button the scenario has.
DOOM_KEYS: dict[str, tuple[str, ...]] = {
    "left": ("TURN_LEFT", "MOVE_LEFT"), "right": ("TURN_RIGHT", "MOVE_RIGHT"), "up": ("MOVE_FORWARD",),
    "down": ("MOVE_BACKWARD",), "space": ("ATTACK",), "e": ("USE",), "a": ("MOVE_LEFT",), "d": ("MOVE_RIGHT",),
    "w": ("MOVE_FORWARD",), "s": ("MOVE_BACKWARD",), "left shift": ("SPEED",), "c": ("CROUCH",), "j": ("JUMP",),
}


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


class Doom(Family):
    """ViZDoom's scenarios: a Discrete space's actions named by the buttons each presses
    (``MOVE_LEFT``, ``MOVE_LEFT+ATTACK``, ``NOOP``), keys for the buttons, the game variables
    by name. Saved by re-execution: ZDoom's own save files are a format its engine parses,
    not data, and a load keeps the tic counter."""

    label = "ViZDoom"

    def _buttons(self) -> list[str]:
        """The binary buttons, in the order of the actions' combinations (after the delta buttons)."""
        u = self.unwrapped
        buttons = [str(button.name) for button in u.game.get_available_buttons()]
        return buttons[int(getattr(u, "num_delta_buttons", 0)):]

    def action_names(self) -> list[str] | None:
        space = self.env.action_space
        combos = getattr(self.unwrapped, "button_map", None)
        if type(space).__name__ != "Discrete" or not combos or len(combos) != int(space.n):
            return None
        buttons = self._buttons()
        names = ["+".join(b for b, on in zip(buttons, combo) if on) or "NOOP" for combo in combos]
        return names if len(set(names)) == len(names) else None

    def keys(self, names: Sequence[str]) -> dict[str, str]:
        """Key name -> the button it presses (one the actions use)."""
        pressable = {part for name in names for part in name.split("+")}
        keys = {}
        for key, buttons in DOOM_KEYS.items():
            button = next((b for b in buttons if b in pressable), None)
            if button is not None:
                keys[key] = button
        return keys

    def compose(self, held: Sequence[str], keys: Mapping[str, str], names: Sequence[str]) -> str | None:
        """The buttons of the keys held as the action that presses them all, or (when the
        scenario has no such action) as many of them as it has, the newest keys kept."""
        pressed: list[str] = []
        for key in reversed(held):
            button = keys.get(key)
            if button is not None and button not in pressed:
                pressed.append(button)
        order = self._buttons()
        while pressed:
            name = "+".join(sorted(pressed, key=lambda b: order.index(b) if b in order else len(order)))
            if name in names:
                return name
            pressed.pop()  # the oldest key held goes first
        return None

    def state(self, obs: Any) -> dict[str, Any]:
        values = obs.get("gamevariables") if isinstance(obs, Mapping) else None
        names = [str(v.name) for v in self.unwrapped.game.get_available_game_variables()]
        if values is None or len(values) != len(names):
            return {}
        return {"variables": {name: float(value) for name, value in zip(names, values)}}

    def description(self) -> str:
        return (" Keys: the arrows turn (or strafe) and move, space attacks, e uses, a and d strafe, w and s move; "
                "held together they are the action that presses all their buttons, where the scenario has it.")


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
    if module.startswith("vizdoom"):
        return Doom(env)
    return Family(env)


def make_defaults(env_id: str) -> dict[str, Any]:
    """Keyword arguments a family needs for its runs to replay (before the environment exists)."""
    if "NetHack" in env_id or env_id.startswith("MiniHack"):
        return {"fix_moon_phase": True}
    return {}

