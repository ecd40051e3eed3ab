"""What a GameClient keeps of the newest ``/state`` it saw (``Known.look``) and of the
commands it sent (``Known.sent_id``): what ``advance`` steps from without a look first."""

from __future__ import annotations

from game_bridge_mcp.wire.known import Known, Look

STATE = {"frame": 40, "simFrame": 12, "paused": True, "completedCommandId": 5}


def test_a_look_needs_every_counter_and_a_boolean_paused() -> None:
    assert Look.of(STATE) == Look(frame=40, sim_frame=12, paused=True, completed_id=5)
    for key in STATE:
        assert Look.of({k: v for k, v in STATE.items() if k != key}) is None, key
    for wrong in ({"paused": "true"}, {"paused": 1}, {"simFrame": -1}, {"frame": 1e400}, {"completedCommandId": "5"}):
        assert Look.of({**STATE, **wrong}) is None, wrong


def test_the_newest_look_is_kept_whatever_order_answers_arrive_in() -> None:
    known = Known(7820)
    known.saw(STATE)
    known.saw({**STATE, "frame": 39, "simFrame": 11})  # made before: a slower thread's answer
    assert known.look is not None and known.look.sim_frame == 12
    known.saw({**STATE, "completedCommandId": 6, "simFrame": 13})  # same loop frame, a command later
    assert known.look is not None and known.look.completed_id == 6
    known.saw({"frame": 50, "ui": {}})  # not a look: kept as it was
    assert known.look is not None and known.look.frame == 40
    known.reset()  # a new process: nothing it saw holds
    assert known.look is None and known.sent_id is None and known.others_command is False


def test_sent_keeps_the_newest_command_id() -> None:
    known = Known(7820)
    for command_id in (3, None, 9, 4):
        known.sent(command_id)
    assert known.sent_id == 9
