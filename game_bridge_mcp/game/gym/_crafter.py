"""Crafter (``pip install crafter``) as Gymnasium environments: Crafter registers itself with
the old ``gym`` package only, so importing this module registers ``CrafterReward-v1`` and
``CrafterNoReward-v1`` with Gymnasium, each Crafter's own ``crafter.Env`` unchanged behind
Gymnasium's API (``reset(seed=...)``; a death terminates, the episode's length truncates).
Imports Crafter when an environment is made."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from numpy.typing import NDArray
from gymnasium import spaces

#: Crafter's own keys (crafter/run_gui.py's keymap), in pygame's key names, and arrows for moving.
KEYS = {"a": "move_left", "d": "move_right", "w": "move_up", "s": "move_down", "left": "move_left",
        "right": "move_right", "up": "move_up", "down": "move_down", "space": "do", "tab": "sleep",
        "r": "place_stone", "t": "place_table", "f": "place_furnace", "p": "place_plant",
        "1": "make_wood_pickaxe", "2": "make_stone_pickaxe", "3": "make_iron_pickaxe",
        "4": "make_wood_sword", "5": "make_stone_sword", "6": "make_iron_sword"}


class Crafter(gym.Env[NDArray[Any], np.int64]):
    """``crafter.Env`` behind Gymnasium's API."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, reward: bool = True, area: tuple[int, int] = (64, 64), view: tuple[int, int] = (9, 9),
                 size: tuple[int, int] = (64, 64), length: int = 10000, render_mode: str | None = None) -> None:
        import crafter

        self.game = crafter.Env(area=tuple(area), view=tuple(view), size=tuple(size), reward=reward, length=length,
                                seed=0)
        self.names = list(self.game.action_names)
        self.action_space = spaces.Discrete(len(self.names))
        self.observation_space = spaces.Box(0, 255, tuple(size) + (3,), np.uint8)
        self.render_mode = render_mode
        self._last: NDArray[Any] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[NDArray[Any], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:  # Crafter seeds each episode's world from (its seed, the episode's number)
            self.game._seed = int(seed)  # noqa: SLF001 - the seed Crafter takes only when made
            self.game._episode = 0  # noqa: SLF001
        last = self.game.reset()
        self._last = last
        return last, {}

    def step(self, action: Any) -> tuple[NDArray[Any], float, bool, bool, dict[str, Any]]:
        obs, reward, done, info = self.game.step(int(action))
        self._last = obs
        dead = info.get("discount", 1.0) == 0.0
        shown = {"health": 0, "food": 0, "drink": 0, "energy": 0}
        shown.update({str(k): int(v) for k, v in info.get("inventory", {}).items()})
        shown["achievements"] = sum(1 for count in info.get("achievements", {}).values() if count > 0)
        x, y = info.get("player_pos", (0, 0))
        shown.update(x=int(x), y=int(y))
        return obs, float(reward), bool(done and dead), bool(done and not dead), shown

    def render(self) -> Any:
        return self._last


for _name, _reward in (("CrafterReward-v1", True), ("CrafterNoReward-v1", False)):
    if _name not in gym.registry:
        gym.register(_name, entry_point=f"{__name__}:Crafter", kwargs={"reward": _reward})
