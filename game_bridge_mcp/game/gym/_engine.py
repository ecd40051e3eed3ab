"""One environment under the wrapper: its frames (one ``env.step`` each, with the action
held), its episodes, the events they make, and what ``/state`` shows. Runs on the one
thread that drives it (``serve.drive``); each frame is taken under the kit's lock, so
``/state`` (an HTTP thread, under the same lock) never sees half a step."""

from __future__ import annotations

import collections
import hashlib
import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from ..kit import GameBridge
from ..kit.outcomes import Pending
from ..wrapper.frames import Schedule
from . import _spaces
from ._family import Family

log = logging.getLogger(__name__)

#: Frames run between two looks at the commands, at most (a long step runs in chunks).
MAX_CHUNK = 500
#: Longest error text kept from an environment that raised.
MAX_ERROR = 500
#: Most characters of an action shown in /state and results.
MAX_SHOWN_ACTION = 300


def episode_seed(base: int, episode: int) -> int:
    """The seed of episode ``episode`` (1, 2, ...) of a run seeded ``base``: ``base`` itself
    for the first, then drawn from it (the same run gives the same seeds)."""
    if episode <= 1:
        return base
    return int(hashlib.sha256(f"{base}:{episode}".encode()).hexdigest()[:8], 16)


@dataclass
class Book:
    """What the wrapper keeps of the episode, as plain data (a snapshot holds it as is)."""

    episode: int = 0
    step: int = 0
    steps: int = 0
    reward: float = 0.0
    totalReward: float = 0.0  # noqa: N815 - the /state field's name
    terminated: bool = False
    truncated: bool = False
    lives: int | None = None
    seed: int | None = None
    action: Any = None
    error: str | None = None
    ended: bool = False
    #: The reward every step of the episode has had so far (a dense per-step reward, whose
    #: steps make no "reward" events), None once two steps differed.
    steady: float | None = None
    steadySteps: int = 0  # noqa: N815
    #: What /state shows of the observation, the info, the family and the screen's text,
    #: worked out when first asked for after a step (None: not yet).
    shown: dict[str, Any] | None = field(default=None)


@dataclass
class Hold:
    """An ``act``: its action over its frames, and what they gave."""

    action: Any
    shown: Any
    frames: int
    left: int
    steps: int = 0
    reward: float = 0.0
    #: The command's completion, failed when the environment raises during its steps.
    pending: Pending | None = None


class Engine:
    """The environment, its clock's frames and its episodes (see the module docstring)."""

    def __init__(self, env: Any, family: Family, bridge: GameBridge, *, env_id: str, seed_base: int,
                 autoreset: bool, journal: bool) -> None:
        self.env = env
        self.family = family
        self.bridge = bridge
        self.env_id = env_id
        self.seed_base = seed_base
        self.autoreset = autoreset
        self.space = env.action_space
        self.names = family.action_names() if _spaces.kind(self.space) == "Discrete" else None
        self.start = _spaces.discrete_range(self.space)[0] if self.names else 0
        self.index = {name: i for i, name in enumerate(self.names or ())}
        self.keys = family.keys(self.names) if self.names else {}
        self.noop = self._noop()
        self.schedule = Schedule(at_once=True, name="gym")
        self.held_keys: list[str] = []
        self.hold: Hold | None = None
        #: Typed keys waiting for their steps: (action, the ``type`` they belong to).
        self.typed: collections.deque[tuple[Any, Hold]] = collections.deque()
        self.book = Book()
        self.obs: Any = None
        self.info: dict[str, Any] = {}
        #: The actions since the episode's reset, as JSON (None: the snapshot is native).
        self.journal: list[Any] | None = [] if journal else None
        self.reset_options: dict[str, Any] | None = None
        self.gone: str | None = None
        self.pointer: tuple[int, int] | None = None  # (no pointer: the Devices protocol's field)
        #: A picture to show instead of rendering (a native load restores no screen).
        self.screen: Any = None
        #: Whether the rendering gives pictures (learned at the start), and their size shown.
        self.pictures = False
        self.size: tuple[int, int] | None = None
        #: What the environment cannot show (said once at the start, and in /state).
        self.notes: list[str] = []
        #: The snapshot hooks (``_snapshot.Snapshots``), once made.
        self.snapshots: Any = None

    # ------------------------------------------------------------------ actions
    def _noop(self) -> Any:
        noop = next((name for name in self.names or () if name.lower() == "noop"), None)
        if noop is not None:  # (ALE's NOOP, Crafter's noop, MountainCar's)
            return self.action_of(self.index[noop])
        if _spaces.kind(self.space) == "Box":
            import numpy as np

            zero = np.zeros(self.space.shape, dtype=self.space.dtype)
            return zero if self.space.contains(zero) else None
        return None

    def action_of(self, index: int) -> Any:
        import numpy as np

        return np.int64(self.start + index)

    def parse_action(self, value: Any) -> tuple[Any, Any]:
        """An agent's action (a name where the actions have names) as ``(action, shown)``."""
        if self.names is not None and isinstance(value, str):
            if value not in self.index:
                raise ValueError(f"unknown action {value[:60]!r}; this environment's actions: {', '.join(self.names)}")
            return self.action_of(self.index[value]), value
        action = _spaces.to_action(self.space, value)
        return action, self.show(action)

    def show(self, action: Any) -> Any:
        if self.names is not None:
            index = int(action) - self.start
            if 0 <= index < len(self.names):
                return self.names[index]
        shown = _spaces.to_json(action)
        if len(repr(shown)) > MAX_SHOWN_ACTION:
            return repr(shown)[:MAX_SHOWN_ACTION] + "..."
        return shown

    def held_action(self) -> Any:
        """The action the next frame takes: typed keys, then an ``act``, then the keys held
        down, then the no-op (None: the frame passes without a step)."""
        if self.typed:
            return self.typed[0][0]
        if self.hold is not None:
            return self.hold.action
        if self.held_keys and self.names is not None:
            name = self.family.compose(self.held_keys, self.keys, self.names)
            if name is not None:
                return self.action_of(self.index[name])
        return self.noop

    # ------------------------------------------------------------------ frames (serve.Engine)
    def frames(self, count: int) -> None:
        """Run ``count`` frames, each one step with the held action (none once the episode
        has ended, or when nothing is held and the environment has no no-op)."""
        lock = self.bridge.lock
        for _ in range(count):
            with lock:
                self._frame()
                self.bridge.end_sim_frame()
            self.schedule.frame_ended()

    def _frame(self) -> None:
        typed = self.typed[0][1] if self.typed else None
        hold = typed or self.hold
        action = self.held_action()
        if self.book.ended:
            if self.autoreset and self.book.error is None:
                try:
                    self.reset(None, self.reset_options)
                except ValueError:
                    pass  # said by the reset:failed event and /state's error
        elif action is not None:
            self.step(action, hold)
        if typed is not None:
            self.typed.popleft()
        elif hold is not None:
            hold.left -= 1
            if hold.left <= 0 and self.hold is hold:
                self.hold = None

    def step(self, action: Any, hold: Hold | None = None) -> None:
        """One ``env.step``, its bookkeeping and events."""
        book = self.book
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:  # noqa: BLE001 - the environment's own failure: reported, the wrapper stays
            book.error = f"step {book.step + 1} of episode {book.episode} raised {type(exc).__name__}: {exc}"[:MAX_ERROR]
            book.ended = True
            book.shown = None
            self.bridge.event("step:failed", episode=book.episode, step=book.step, error=book.error)
            log.warning("game-bridge gym: %s", book.error)
            if hold is not None and hold.pending is not None:
                hold.pending.fail(f"{book.error}; reset to start another episode")
            return
        if self.journal is not None:
            self.journal.append(_spaces.to_json(action))
        self.family.stepped(book.step + 1, action)
        self.obs, self.info = obs, info
        self.screen = None
        value = float(reward)
        book.step += 1
        book.steps += 1
        book.reward = value
        book.totalReward += value
        book.terminated, book.truncated = bool(terminated), bool(truncated)
        book.action = self.show(action)
        book.shown = None
        if hold is not None:
            hold.steps += 1
            hold.reward += value
        lives = info.get("lives") if isinstance(info, dict) else None
        if lives is not None:
            lives = int(lives)
            if book.lives is not None and lives < book.lives:
                self.bridge.event("life:lost", episode=book.episode, step=book.step, lives=lives)
            book.lives = lives
        self._reward_event(value)
        if terminated or truncated:
            book.ended = True
            self.bridge.event("episode:end", episode=book.episode, steps=book.step, totalReward=book.totalReward,
                              terminated=book.terminated, truncated=book.truncated)

    def _reward_event(self, value: float) -> None:
        book = self.book
        if book.step == 1:
            book.steady, book.steadySteps = value, 1
        elif book.steady is not None and value == book.steady:
            book.steadySteps += 1
        else:
            book.steady = None
        if value != 0 and book.steady is None:
            self.bridge.event("reward", episode=book.episode, step=book.step, reward=value,
                              totalReward=book.totalReward)

    def deliver(self) -> None:
        self.schedule.deliver(lambda exc: log.warning("game-bridge gym: input failed: %s", exc))

    def frames_to_due(self) -> int:
        return self.schedule.frames_to_due(MAX_CHUNK)

    def idle(self) -> None:
        """Paused, nothing owed: an environment does nothing between steps."""

    # ------------------------------------------------------------------ episodes
    def reset(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        """A new episode (``seed`` None: the run's next seed); ValueError when it fails."""
        book = self.book
        episode = book.episode + 1
        if seed is None:
            seed = episode_seed(self.seed_base, episode)
        try:
            self.family.before_reset(seed)
            obs, info = self.env.reset(seed=seed, options=options)
        except Exception as exc:  # noqa: BLE001 - a bad option, or the environment's own failure
            book.error = f"reset (seed {seed}) raised {type(exc).__name__}: {exc}"[:MAX_ERROR]
            book.ended = True
            book.shown = None
            self.bridge.event("reset:failed", episode=book.episode, error=book.error)
            raise ValueError(book.error) from None
        lives = info.get("lives") if isinstance(info, dict) else None
        self.book = Book(episode=episode, steps=book.steps, seed=seed, lives=None if lives is None else int(lives))
        self.obs, self.info = obs, info
        self.screen = None
        self.reset_options = options
        if self.journal is not None:
            self.journal = []
        self.family.was_reset()
        self.bridge.event("episode:start", episode=episode, seed=seed)
        return {"episode": episode, "seed": seed}

    def ended_text(self) -> str:
        book = self.book
        if book.error is not None:
            return f"the environment failed ({book.error}); reset to start another episode"
        how = "terminated" if book.terminated else "was truncated"
        return (f"episode {book.episode} {how} at step {book.step} with a total reward of {book.totalReward:g}; "
                "reset {seed} to start another")

    # ------------------------------------------------------------------ commands' timing (wrapper.input.Frames)
    def defer(self) -> Pending:
        return self.bridge.defer()

    def soon(self, action: Callable[[], None]) -> None:
        self.schedule.soon(action)

    def after_frames(self, frames: int, action: Callable[[], None]) -> None:
        self.schedule.after_frames(frames, action)

    def window_size(self) -> tuple[int, int] | None:
        return None

    def pointer_origin(self) -> tuple[int, int]:
        return 0, 0

    # ------------------------------------------------------------------ the picture
    def picture(self) -> Any:
        """The screen as an RGB array (height, width, 3) from the rgb_array rendering (a
        native load's saved screen until the next step), or None."""
        if self.screen is not None:
            return self.screen
        if not self.pictures:
            return None
        return rgb(self.env.render())

    def capture(self) -> Any:
        """``/screenshot``'s capture (the kit's, on this thread): the picture, at ``size``."""
        from ..image import Pixels

        frame = self.picture()
        if frame is None:
            return None
        if self.size is not None:
            frame = scaled(frame, self.size)
        height, width = int(frame.shape[0]), int(frame.shape[1])
        return Pixels(frame.tobytes(), width, height, "RGB")

    # ------------------------------------------------------------------ what /state shows
    def shown(self) -> dict[str, Any]:
        """The observation's summary, the info's scalars, the family's fields and the text,
        worked out once a step (under the kit's lock)."""
        book = self.book
        shown = book.shown
        if shown is None or "observation" not in shown:  # (None, or only what the digest needed)
            screen = self._screen_shown()
            shown = book.shown = {"observation": _spaces.summary(self.obs),
                                  "info": _spaces.scalars(self.info) if isinstance(self.info, dict) else {},
                                  "extra": screen["extra"], "text": screen["text"]}
        return shown

    def _screen_shown(self) -> dict[str, Any]:
        """The family's fields and the text (all the digest shows of :meth:`shown`), worked out
        once a step: the book's ``shown`` holds them, the rest of it to come."""
        book = self.book
        if book.shown is None:
            try:
                text = self.family.text(self.obs)
            except Exception as exc:  # noqa: BLE001 - a text rendering that failed: said in place of the text
                text = f"(the text rendering failed: {type(exc).__name__}: {str(exc)[:200]})"
            try:
                extra = self.family.state(self.obs)
            except Exception as exc:  # noqa: BLE001
                extra = {"familyError": f"{type(exc).__name__}: {str(exc)[:200]}"}
            book.shown = {"extra": extra, "text": text}
        return book.shown

    def state(self) -> dict[str, Any]:
        return self._state(self.shown())

    def digest_state(self) -> dict[str, Any]:
        """What ``/state?view=digest`` keeps of :meth:`state` (the kit keeps only the scalars
        of ``game``), without what it drops: an observation that is not a scalar and the
        info are not summarised for it after every step (the same digest, the same bytes)."""
        shown = self.book.shown
        if shown is None or "observation" not in shown:
            screen = self._screen_shown()
            obs = self.obs
            import numpy as np

            scalar = obs is None or isinstance(obs, (np.generic, str, bool, int, float))  # (summary's scalars)
            shown = {"observation": _spaces.summary(obs) if scalar else {}, "info": {},
                     "extra": screen["extra"], "text": screen["text"]}
        return self._state(shown)

    def _state(self, shown: dict[str, Any]) -> dict[str, Any]:
        book = self.book
        held = self.held_action()
        game: dict[str, Any] = {
            "env": self.env_id, "episode": book.episode, "step": book.step, "reward": book.reward,
            "totalReward": book.totalReward, "terminated": book.terminated, "truncated": book.truncated,
            "ended": book.ended, "lives": book.lives, "seed": book.seed, "steps": book.steps,
            "action": book.action, "held": None if held is None else self.show(held),
            "keysDown": list(self.held_keys), **shown["extra"],
            "info": shown["info"], "observation": shown["observation"]}
        if book.error is not None:
            game["error"] = book.error
        if self.notes:
            game["notes"] = list(self.notes)
        doc: dict[str, Any] = {"game": game}
        if shown["text"] is not None:
            doc["ui"] = {"text": shown["text"]}
        return doc

    def book_data(self) -> dict[str, Any]:
        """The book as JSON (for a snapshot), with what /state shows worked out."""
        self.shown()
        return asdict(self.book)


def rgb(frame: Any) -> Any:
    """An rgb_array rendering as a contiguous (height, width, 3) uint8 array, or None."""
    import numpy as np

    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] not in (3, 4) or frame.size == 0:
        return None
    if frame.dtype != np.uint8:
        return None
    return np.ascontiguousarray(frame[..., :3])


def scaled(frame: Any, size: tuple[int, int]) -> Any:
    """``frame`` at ``size`` (width, height), each pixel the nearest one of the original: the
    blocky look of a small game's pixels made larger."""
    import numpy as np

    height, width = frame.shape[0], frame.shape[1]
    new_w, new_h = size
    if (new_w, new_h) == (width, height):
        return frame
    rows = (np.arange(new_h) * height // new_h).clip(0, height - 1)
    cols = (np.arange(new_w) * width // new_w).clip(0, width - 1)
    return np.ascontiguousarray(frame[rows][:, cols])
