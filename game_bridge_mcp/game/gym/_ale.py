"""ALE's sticky actions, followed step by step so a snapshot can carry what ALE's own clone
leaves out.

With ``repeat_action_probability`` p > 0, each emulated frame ALE draws from its random
generator whether the new action takes (a draw >= p) or the one last taken repeats
(``m_player_a_action`` in ``stella_environment.cpp``; then a second draw for player B).
``cloneState(include_rng=True)`` carries the emulator and that generator, not the action
last taken, and ``restoreState`` leaves it as it was: a restore repeats the wrong action a
quarter of the time. The generator is a Mersenne Twister that ALE serialises as text at the
end of its state, so :class:`Sticky` reads it once (at a reset or a load), keeps a copy in
numpy's MT19937 that draws as ALE does, two per frame, and so knows which action each frame
took. A save checks the copy against the generator in the saved state (a copy that drifted
says so instead of saving a wrong action); a load restores the state, takes the saved action
on the frames whose draws let it take (emulated, then undone by restoring again) and has the
right action in place, in well under a millisecond, whatever the history before it.
"""

from __future__ import annotations

from typing import Any

#: ALE's PLAYER_A_NOOP: the action a reset leaves in place (``softReset``).
NOOP = 0
#: A generator serialised by libstdc++: 624 words and the position.
_WORDS = 624
#: Steps kept before they are folded into the copy of the generator.
_FOLD = 4096
#: Most frames a load emulates waiting for a draw that takes (each misses with probability p).
_MOST_TRIES = 256


def generator_words(state: bytes) -> Any:
    """The 625 numbers of ALE's environment generator at the end of a serialised
    ``ALEState`` (then two ints, the paddles' bounds); ValueError when it holds none."""
    import numpy as np

    end = len(state) - 8
    start = state.rfind(b"\x00\x00", 0, end) + 2  # the text's length is a little-endian int below 65536
    if start < 6 or int.from_bytes(state[start - 4:start], "little") != end - start:
        raise ValueError("the ALE state holds no random generator")
    try:
        words = np.array(state[start:end].split(), dtype=np.uint64)
    except (ValueError, OverflowError):
        raise ValueError("the ALE state's random generator is damaged") from None
    if len(words) != _WORDS + 1 or bool(np.any(words >= 2 ** 32)) or int(words[-1]) > _WORDS:
        raise ValueError("the ALE state's random generator is damaged")
    return words


def mersenne(words: Any) -> Any:
    """A numpy MT19937 in the state ``words`` describe."""
    import numpy as np

    generator = np.random.MT19937(0)
    generator.state = {"bit_generator": "MT19937",
                       "state": {"key": words[:_WORDS].astype(np.uint32), "pos": int(words[_WORDS])}}
    return generator


class Sticky:
    """The action ALE's sticky actions would repeat, known at every step."""

    def __init__(self, unwrapped: Any) -> None:
        self.unwrapped = unwrapped
        self.ale = unwrapped.ale
        #: A draw takes when it is at least this (ALE: ``nextDouble() >= p``, a draw / 2^32).
        self.threshold = float(self.ale.getFloat("repeat_action_probability")) * 4294967296.0
        #: ALE's action value of each of the environment's actions.
        self.values = [int(action.value) for action in unwrapped._action_set]
        self.generator: Any = None
        #: The action ALE applied last, as of the last fold.
        self.last = NOOP
        self.frame = 0
        #: (frames, action value) of each step since the last fold.
        self.pending: list[tuple[int, int]] = []

    def sync(self, state: bytes | None = None, last: int = NOOP) -> None:
        """Follow ALE from here: its generator read from ``state`` (or a clone now), the
        action last applied ``last``."""
        if state is None:
            state = bytes(self.ale.cloneState(include_rng=True).serialize())
        self.generator = mersenne(generator_words(state))
        self.last = last
        self.frame = int(self.ale.getEpisodeFrameNumber())
        self.pending.clear()

    def stepped(self, action: int) -> None:
        """A step with the environment's action ``action`` was taken: as many frames as ALE
        counted (a frame skip drawn per step included)."""
        frame = int(self.ale.getEpisodeFrameNumber())
        self.pending.append((max(frame - self.frame, 0), self.values[action]))
        self.frame = frame
        if len(self.pending) >= _FOLD:
            self._fold()

    def _fold(self) -> None:
        import numpy as np

        if not self.pending:
            return
        frames = np.array([n for n, _a in self.pending], dtype=np.int64)
        total = int(frames.sum())
        if total > 0:
            took = self.generator.random_raw(2 * total)[0::2] >= self.threshold  # player A's draw of each frame
            hits = np.flatnonzero(took)
            if len(hits):
                step = int(np.searchsorted(np.cumsum(frames), int(hits[-1]), side="right"))
                self.last = self.pending[step][1]
        self.pending.clear()

    def last_action(self, state: bytes) -> int:
        """The action ALE applied last, for the state ``state`` just cloned; ValueError when
        the copy of its generator no longer matches ALE's (nothing would restore exactly)."""
        if self.ale.game_over():
            # A game over emulates nothing more (ALE still draws, uncounted): only a reset
            # goes on from here, and a reset puts NOOP in place.
            return NOOP
        self._fold()
        words = generator_words(state)
        mine = self.generator.state["state"]
        if int(mine["pos"]) != int(words[_WORDS]) or not (mine["key"] == words[:_WORDS]).all():
            raise ValueError("ALE's sticky actions drew from its random generator other than one draw per player "
                             "and frame, so the action it repeats is not known and a load would not be exact; make "
                             "the environment with repeat_action_probability=0 (--make-kwargs) to save it")
        return self.last

    def check(self, state: bytes, last: int) -> int:
        """How many frames a load emulates before ``last`` takes, from the generator in
        ``state``; ValueError for what ALE could not apply."""
        legal = {int(action.value) for action in self.ale.getLegalActionSet()}
        if not isinstance(last, int) or isinstance(last, bool) or last not in legal:
            raise ValueError("the snapshot's last ALE action is not one of this game's")
        generator = mersenne(generator_words(state))
        for tries in range(1, _MOST_TRIES + 1):
            if generator.random_raw(2)[0] >= self.threshold:
                return tries
        raise ValueError(f"the snapshot's generator never lets an action take in {_MOST_TRIES} frames")

    def restore(self, target: Any, state: bytes, last: int, tries: int) -> None:
        """ALE at ``target`` (serialised ``state``) with ``last`` in place: the action taken
        on the ``tries`` frames that it takes by (their emulation then undone)."""
        import ale_py

        ale = self.ale
        ale.restoreState(target)
        action = ale_py.Action(last)
        for _ in range(tries):
            ale.act(action)
        ale.restoreState(target)
        self.sync(state, last)
