"""FrameClock against simulated games: it learns the period and the phase from polls,
predicts the next frame start, and stops predicting when a game stalls, changes rate
or restarts. Pure: simulated times, no sockets, no sleeping."""

from __future__ import annotations

import random

import pytest

from game_bridge_mcp.wire.frames import FrameClock

pytestmark = pytest.mark.timeout(30)

RTT = 0.0003  # a kept-alive loopback poll


class SimGame:
    """Frame ``f`` starts at ``phase + f * period`` (plus jitter); a request sent at ``t``
    reads the frame at ``t + rtt / 2`` and its answer arrives at ``t + rtt``."""

    def __init__(self, period: float = 1 / 60, phase: float = 0.0037, jitter: float = 0.0,
                 seed: int = 1) -> None:
        self.period = period
        self.phase = phase
        self.jitter = jitter
        self.rng = random.Random(seed)
        self.late: dict[int, float] = {}

    def start(self, frame: int) -> float:
        if frame not in self.late:
            self.late[frame] = self.rng.uniform(0, self.jitter)
        return self.phase + frame * self.period + self.late[frame]

    def frame_at(self, t: float) -> int:
        frame = int((t - self.phase) // self.period) + 1
        while self.start(frame) > t:
            frame -= 1
        return frame

    def poll(self, clock: FrameClock, t: float, rtt: float = RTT) -> tuple[int, float]:
        frame = self.frame_at(t + rtt / 2)
        clock.observe(frame, t, t + rtt)
        return frame, t + rtt


def drive(game: SimGame, clock: FrameClock, calls: int, *, start: float = 1.0, seed: int = 2,
          gap: float = 0.0) -> float:
    """Confirmed calls the way the client makes them: a poll at a random point of a frame
    (the /command answer), then polls every 0.3 ms until the frame has moved on (or, once
    there is a prediction, from just before the predicted start). ``gap``: up to this
    long between calls."""
    rng = random.Random(seed)
    t = start
    for _ in range(calls):
        t += rng.uniform(0, game.period) + rng.uniform(0, gap)
        queued, t = game.poll(clock, t)
        predicted = clock.next_frame_at(queued)
        if predicted is not None and predicted - RTT > t:
            t = predicted - RTT
        while True:
            frame, t = game.poll(clock, t)
            if frame > queued:
                break
    return t


def test_nothing_is_predicted_before_anything_is_learned() -> None:
    clock = FrameClock()
    assert clock.next_frame_at(10) is None and clock.period_s is None and not clock.predictable
    clock.observe(10, 1.0, 1.0003)
    assert clock.next_frame_at(10) is None and clock.last_frame == 10


@pytest.mark.parametrize("hz", [60.0, 144.0, 1000.0])
def test_a_steady_game_is_learned_and_its_next_frame_predicted(hz: float) -> None:
    game = SimGame(period=1 / hz)
    clock = FrameClock()
    t = drive(game, clock, 30)
    assert clock.period_s == pytest.approx(game.period, rel=0.01)
    frame = game.frame_at(t)
    predicted = clock.next_frame_at(frame)
    assert predicted is not None
    assert abs(predicted - game.start(frame + 1)) < max(0.0004, game.period / 10)


def test_a_jittery_loop_is_predicted_within_its_jitter() -> None:
    game = SimGame(period=1 / 60, jitter=0.0008)
    clock = FrameClock()
    t = drive(game, clock, 60)
    frame = game.frame_at(t)
    predicted = clock.next_frame_at(frame)
    assert predicted is not None
    assert abs(predicted - game.start(frame + 1)) < 0.0015
    assert clock.period_s == pytest.approx(game.period, rel=0.02)


def test_a_long_gap_keeps_the_prediction_within_a_fraction_of_a_frame() -> None:
    """Calls seconds apart (an agent thinking) still land near the frame start: the line
    keeps its oldest anchor, so its period gets more precise the longer it runs."""
    game = SimGame(period=1 / 60)
    clock = FrameClock()
    t = drive(game, clock, 40, gap=0.5)
    later = t + 5.0
    frame = game.frame_at(later)
    predicted = clock.next_frame_at(frame)
    assert predicted is not None
    assert abs(predicted - game.start(frame + 1)) < game.period / 10


def test_an_answer_that_contradicts_the_prediction_stops_it() -> None:
    """The game stalled for 100 ms (a loading hitch): its frames now start later than
    the line says; the first answer that proves it drops the prediction, then polls
    re-learn the phase."""
    game = SimGame(period=1 / 60)
    clock = FrameClock()
    t = drive(game, clock, 20)
    game.phase += 0.1 + game.period / 3  # every later frame starts 100 ms (and a bit) late
    frame = game.frame_at(t + 0.2)
    game.poll(clock, t + 0.2)
    assert clock.next_frame_at(frame) is None or not clock.predictable
    t = drive(game, clock, 10, start=t + 0.3)
    frame = game.frame_at(t)
    predicted = clock.next_frame_at(frame)
    assert predicted is not None
    assert abs(predicted - game.start(frame + 1)) < 0.001


def test_a_rate_change_is_relearned() -> None:
    game = SimGame(period=1 / 60)
    clock = FrameClock()
    t = drive(game, clock, 20)
    now_frame = game.frame_at(t)
    slower = SimGame(period=1 / 30, phase=game.start(now_frame + 1) - (now_frame + 1) / 30)
    t = drive(slower, clock, 30, start=t)
    assert clock.period_s == pytest.approx(1 / 30, rel=0.02)
    frame = slower.frame_at(t)
    predicted = clock.next_frame_at(frame)
    assert predicted is not None and abs(predicted - slower.start(frame + 1)) < 0.002


def test_frames_going_back_forget_everything() -> None:
    game = SimGame(period=1 / 60)
    clock = FrameClock()
    t = drive(game, clock, 20)
    assert clock.predictable
    clock.observe(3, t + 0.01, t + 0.0103)  # a new process on the port
    assert clock.period_s is None and not clock.predictable and clock.last_frame == 3


def test_an_answer_overtaken_by_a_newer_one_is_ignored() -> None:
    """Two threads poll the same game: an older answer arriving late teaches nothing
    and does not look like a restart."""
    game = SimGame(period=1 / 60)
    clock = FrameClock()
    t = drive(game, clock, 20)
    period = clock.period_s
    frame = game.frame_at(t)
    clock.observe(frame - 1, t - 0.02, t + 0.001)  # slow request, started before the newest answer
    assert clock.period_s == period and clock.last_frame == frame


def test_loose_brackets_never_anchor() -> None:
    """Answers far apart (slow polls of a big /state) say which frame was current, not
    when it began: they give no prediction by themselves."""
    game = SimGame(period=1 / 60)
    clock = FrameClock()
    t = 1.0
    for _ in range(20):
        game.poll(clock, t, rtt=0.03)
        t += 0.05
    assert not clock.predictable


def test_how_late_commands_are_applied_is_learned_as_a_window() -> None:
    """note_applied keeps how long after a predicted start recent commands were seen
    applied; apply_window is most of them (never under the default, never over a
    quarter of a frame), and the default until a few have been seen or after a restart."""
    game = SimGame(period=1 / 60)
    clock = FrameClock()
    drive(game, clock, 30)
    assert clock.apply_window(0.001) == 0.001
    for late in (0.0021, 0.0030, 0.0024, 0.0027, 0.0009, 0.0026, 0.0032, 0.0025, 0.0028, 0.0060):
        clock.note_applied(5.0, 5.0 + late)
    window = clock.apply_window(0.001)
    assert 0.0026 <= window <= 0.0032  # most of them, not the one far out
    for _ in range(40):
        clock.note_applied(5.0, 5.5)  # a game that stalls: capped at a quarter of a frame
    assert clock.apply_window(0.001) == pytest.approx(clock.period_s / 4)
    clock.reset()
    assert clock.apply_window(0.001) == 0.001


def test_the_confirmation_polls_across_the_learned_window() -> None:
    """Past the first millisecond after a predicted start, a game known to apply commands
    up to 3 ms late is polled a few times across those 3 ms rather than backed off."""
    from game_bridge_mcp.wire.client import GameClient
    from game_bridge_mcp.wire.polls import BURST_S, WINDOW_POLLS

    game = SimGame(period=1 / 60)
    client = GameClient(1)
    t = drive(game, client.frames, 30)
    for _ in range(8):
        client.frames.note_applied(5.0, 5.003)
    frame = game.frame_at(t)
    starts = client.frames.next_frame_at(frame)
    assert starts is not None
    client.known.health_has_completed_id = True
    window = client.frames.apply_window(BURST_S)
    assert window == pytest.approx(0.003)
    assert client.confirmer.polling.next_wait(frame, 0.0, 7, starts + 0.0005) == (0.0, 0.0)  # back to back at first
    pause, _ = client.confirmer.polling.next_wait(frame, 0.0, 7, starts + 0.0015)
    assert 0 < pause <= window / WINDOW_POLLS + 1e-9  # then a few polls across the window
    pause, interval = client.confirmer.polling.next_wait(frame, 0.0, 7, starts + 0.004)
    assert pause == interval > 0  # past it: backing off as before
