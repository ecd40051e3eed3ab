"""polling.poll_until and Deadline: the one shape of waiting, on a fake clock; the fine timers
a thread that sleeps through polling gets; naps that learn how late the host wakes."""

from __future__ import annotations

import sys
import threading

import pytest

from game_bridge_mcp.polling import Deadline, poll_until


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def test_returns_the_first_result_and_sleeps_growing_intervals_up_to_the_cap() -> None:
    t = FakeTime()
    calls = iter([None, None, None, None, "ready"])
    result = poll_until(lambda: next(calls), Deadline(10, clock=t.clock), first_s=0.01, max_s=0.02,
                        growth=1.5, sleep=t.sleep)
    assert result == "ready"
    assert t.sleeps == [0.01, 0.015, 0.02, 0.02]


def test_runs_once_more_at_the_deadline_then_gives_none() -> None:
    t = FakeTime()
    seen: list[float] = []

    def check() -> None:
        seen.append(t.now)
        return None

    assert poll_until(check, Deadline(0.05, clock=t.clock), first_s=0.02, max_s=1.0, growth=2, sleep=t.sleep) is None
    assert seen[0] == 100.0 and seen[-1] == pytest.approx(100.05)
    assert sum(t.sleeps) == pytest.approx(0.05)  # never slept past the deadline


def test_a_callable_cap_is_asked_each_time_and_a_raise_ends_the_wait() -> None:
    t = FakeTime()
    caps = iter([0.5, 0.001, 0.001])
    count = {"n": 0}

    def check() -> None:
        count["n"] += 1
        if count["n"] == 3:
            raise RuntimeError("booted and crashed")
        return None

    with pytest.raises(RuntimeError):
        poll_until(check, Deadline(10, clock=t.clock), first_s=0.1, max_s=lambda: next(caps), sleep=t.sleep)
    assert t.sleeps == [0.1, 0.001]


def test_deadline_from_a_given_start_and_remaining_ms_rounds_up() -> None:
    t = FakeTime()
    deadline = Deadline(1.0, clock=t.clock, start=99.5)
    assert deadline.remaining_s() == pytest.approx(0.5)
    t.now = 100.4999
    assert deadline.remaining_ms() == 1 and not deadline.expired
    t.now = 101.0
    assert deadline.expired and deadline.remaining_s() == 0.0 and deadline.remaining_ms() == 1


PR_GET_TIMERSLACK = 30


def thread_timer_slack_ns(*, coarse: bool = False) -> int:
    """This thread's timer slack, as the kernel has it; ``coarse``: set to Linux's usual
    50 us first (a thread inherits its creator's slack, which an earlier test may have
    made fine)."""
    import ctypes

    libc = ctypes.CDLL(None)
    if coarse:
        libc.prctl(29, 50_000, 0, 0, 0)  # PR_SET_TIMERSLACK
    return int(libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux thread attribute")
def test_a_thread_that_sleeps_through_polling_gets_fine_timers() -> None:
    """Linux lets a sleep end up to the thread's timer slack late (50 us by default): a
    confirmation sleeping until just before a frame would poll that much after it. The
    first polling.sleep of a thread narrows its slack; other threads keep theirs."""
    from game_bridge_mcp import polling

    seen: dict[str, int] = {}

    def worker() -> None:
        seen["before"] = thread_timer_slack_ns(coarse=True)
        polling.sleep(0.0001)
        seen["after"] = thread_timer_slack_ns()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert seen["before"] == 50_000
    assert seen["after"] == polling.FINE_TIMER_SLACK_NS


def test_naps_learn_how_late_this_host_wakes_and_aim_that_much_earlier() -> None:
    """A host that wakes every sleep 40 us late: after a few naps, a 300 us nap ends at
    300 us; a short pause is never cut by more than half; no pause is a sleep of 0 (which
    still checks for cancellation) and teaches nothing."""
    from game_bridge_mcp.polling import NAP_MIN_SAMPLES, Naps

    now = [100.0]
    asked: list[float] = []

    def sleep(seconds: float) -> None:
        asked.append(seconds)
        now[0] += seconds + 0.00004

    naps = Naps(sleep, lambda: now[0])
    for _ in range(NAP_MIN_SAMPLES):
        naps.nap(0.0003)
    assert asked[:NAP_MIN_SAMPLES] == [0.0003] * NAP_MIN_SAMPLES  # nothing learned yet: asked as given
    started = now[0]
    naps.nap(0.0003)
    assert now[0] - started == pytest.approx(0.0003) and asked[-1] == pytest.approx(0.00026)
    naps.nap(0.00004)
    assert asked[-1] == pytest.approx(0.00002)  # at most half of a short pause
    early = naps.early_s()
    naps.nap(0.0)
    naps.nap(-1.0)
    assert asked[-2:] == [0.0, 0.0] and naps.early_s() == early
