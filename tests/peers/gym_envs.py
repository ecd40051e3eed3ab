"""Small Gymnasium environments of our own for the gym wrapper's tests, registered when this
module is imported (``gym_envs:GBTest/...`` on the wrapper's command line): spaces the
well-known environments lack (Dict, Box, MultiDiscrete, Text), a text observation, reset
options, and an environment that raises in ``step``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Corridor(gym.Env[str, Any]):
    """A corridor of ``length`` cells, seen only as text: ``....@....G``. The action space is
    chosen by ``space``: ``dict`` (move: Box(-1, 1, (1,)), run: Discrete(2), say: Text(8)),
    ``multi`` (MultiDiscrete([3, 2])) or ``box`` (Box(-1, 1, (2,))). ``raise_at``: step
    raises RuntimeError at that step. Reset options: ``{"start": cell}``."""

    metadata = {"render_modes": ["ansi"], "render_fps": 10}

    def __init__(self, space: str = "dict", length: int = 10, raise_at: int = 0, render_mode: str | None = None) -> None:
        self.length = length
        self.raise_at = raise_at
        self.render_mode = render_mode
        self.kind = space
        if space == "dict":
            self.action_space = spaces.Dict({"move": spaces.Box(-1.0, 1.0, (1,), np.float32),
                                             "run": spaces.Discrete(2), "say": spaces.Text(8)})
        elif space == "multi":
            self.action_space = spaces.MultiDiscrete([3, 2])
        else:
            self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Text(max_length=200)
        self.position = 0
        self.steps = 0
        self.said = ""

    def _text(self) -> str:
        cells = ["."] * self.length
        cells[-1] = "G"
        cells[self.position] = "@"
        return "".join(cells) + (f"  (said {self.said})" if self.said else "")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        start = (options or {}).get("start", int(self.np_random.integers(0, self.length // 2)))
        if not isinstance(start, int):
            raise TypeError(f"options start must be an int, got {type(start).__name__}")
        self.position, self.steps, self.said = start, 0, ""
        return self._text(), {"start": start, "big": list(range(5))}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        if self.raise_at and self.steps == self.raise_at:
            raise RuntimeError(f"the corridor collapsed at step {self.steps}")
        if self.kind == "dict":
            move = float(action["move"][0]) * (2 if action["run"] else 1)
            self.said = action["say"]
        elif self.kind == "multi":
            move = (int(action[0]) - 1) * (1 + int(action[1]))
        else:
            move = float(action[0]) + float(action[1])
        self.position = int(np.clip(self.position + round(move), 0, self.length - 1))
        done = self.position == self.length - 1
        return self._text(), 1.0 if done else 0.0, done, False, {"position": self.position, "noise": float("nan")}

    def render(self) -> str:
        return self._text()


gym.register("GBTest/Corridor-v0", entry_point=Corridor, max_episode_steps=50)
