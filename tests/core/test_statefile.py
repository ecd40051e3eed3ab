"""The state file (.gbstate) read whole: what it holds comes back; a file cut off, padded,
damaged, of a newer version, or with a journal that is not one is refused saying which; and a
state file can never set what a launched game's environment holds beyond the page's date."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.core.states import file as statefile
from game_bridge_mcp.core.states.journal import Journal, Sent
from game_bridge_mcp.core.states.store import SavedState, Seen, from_file


def written(tmp_path: Path, *, snapshot: bytes = b"", journal: list[Sent] | None = None,
            **header: object) -> Path:
    state = SavedState("s1", "a label", 7820, 0, {"name": "Game", "version": "1"}, 42,
                       Seen.of({"game": {"x": 1}, "frame": 9}), journal=journal)
    path = tmp_path / "s1.gbstate"
    statefile.write(path, {**state.header(), **header}, snapshot, journal)
    return path


def test_what_is_written_is_read_back(tmp_path: Path) -> None:
    journal = [Sent("drop", {"x": 1}, 0), Sent("step", {"frames": 30}, 0)]
    path = written(tmp_path, snapshot=b"\x00bytes\xff", journal=journal)
    data = statefile.read(path)
    assert data.snapshot == b"\x00bytes\xff" and data.journal == journal
    state = from_file(data, "s1", 7820)
    assert state.sim_frame == 42 and state.game == {"name": "Game", "version": "1"} and state.label == "a label"
    assert state.seen.state == {"game": {"x": 1}}  # frame is not compared
    assert state.how == "snapshot" and state.snapshot_bytes == 7
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("change,fragment", [
    (lambda raw: raw[:-2], "cut off or padded"),
    (lambda raw: raw + b"x", "cut off or padded"),
    (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), "damaged"),
    (lambda raw: raw.replace(b'"version":1', b'"version":99', 1), "newer than this bridge reads"),
    (lambda raw: raw.replace(b'"format":"game-bridge-state"', b'"format":"x"', 1), "not a game-bridge state file"),
    (lambda raw: b"\x80\x04\x95" + raw, "not a game-bridge state file"),
    (lambda raw: raw.replace(b'[0,"drop",{"x":1}]', b'[0,"drop","x"]', 1), "journal entry is"),
    (lambda raw: raw.replace(b'[0,"drop",{"x":1}]', b'[99,"drop",{"x":1}]', 1), "sent at simFrame 99, past"),
])
def test_a_file_that_is_not_whole_is_refused_saying_why(tmp_path: Path, change: object, fragment: str) -> None:
    path = written(tmp_path, snapshot=b"abc", journal=[Sent("drop", {"x": 1}, 0)])
    raw = path.read_bytes()
    path.write_bytes(change(raw))  # type: ignore[operator]
    with pytest.raises(ValueError, match=fragment):
        statefile.read(path)


def test_a_state_file_sets_nothing_of_a_launch_but_the_date_and_the_seed(tmp_path: Path) -> None:
    path = written(tmp_path, journal=[Sent("noop", {}, 0)],
                   launchEnv={"LD_PRELOAD": "/tmp/evil.so", "GAME_BRIDGE_DATE": "1796000000000",
                              "PYTHONPATH": "/tmp", "GAME_BRIDGE_SEED": "12"})
    state = from_file(statefile.read(path), "s1", 7820)
    assert state.launch_env == {"GAME_BRIDGE_DATE": "1796000000000", "GAME_BRIDGE_SEED": "12"}
    path = written(tmp_path, journal=[Sent("noop", {}, 0)], launchEnv={"GAME_BRIDGE_DATE": "$(touch /tmp/x)",
                                                                      "GAME_BRIDGE_SEED": "-1; rm"})
    assert from_file(statefile.read(path), "s1", 7820).launch_env == {}


def test_a_journal_records_what_the_game_accepted_and_ends_saying_why() -> None:
    journal = Journal(3, env={"GAME_BRIDGE_DATE": "5"})
    journal.record("key", {"key": "left"}, 0, 1)
    journal.record("resume", {}, 4, 2)
    journal.record("step", {"frames": 2}, 4, 3)
    mark = journal.entries()
    journal.record("drop", {"x": 1}, 6, 4)
    assert [e.cmd for e in mark] == ["key", "resume", "step"] and len(journal.entries()) == 4  # a state's, kept
    assert journal.free_since == 4 and journal.env == {"GAME_BRIDGE_DATE": "5"}
    journal.record("snapshot_load", {"id": "x"}, 6, 5)
    assert journal.ended == "the game loaded a snapshot the bridge did not make"
    journal.record("drop", {"x": 2}, 6, 6)
    assert len(journal) == 4
    assert json.loads(json.dumps([e.to_json() for e in mark]))[0] == [0, "key", {"key": "left"}]


def test_a_continued_journal_counts_what_it_continues(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restored instance's journal continues the state's record without measuring it again,
    and still ends where a journal of the same entries would: at the same argument bytes."""
    from game_bridge_mcp.core.states import journal as module

    first = Journal(3)
    for x in range(5):
        first.record("drop", {"x": x}, x, x)
    mark = first.entries()
    first.record("drop", {"x": 99}, 9, 9)  # after the mark: not continued
    monkeypatch.setattr(module, "MAX_ARG_BYTES", sum(len(json.dumps(e.args)) for e in mark) + 20)
    ends = []
    for entries in (mark, list(mark)):  # continued from the record, and from a state file's list
        journal = Journal(4, entries)
        journal.record("key", {"key": "a"}, 5, 1)  # 14 bytes: within the limit
        assert journal.ended is None
        journal.record("key", {"key": "b"}, 5, 2)  # 28: past it
        ends.append((journal.ended is not None, [e.to_json() for e in journal.entries()]))
    assert ends[0] == ends[1] and ends[0][0] and len(ends[0][1]) == 6
    assert list(mark) == mark.copy() and len(list(first.entries())) == 6


def test_a_step_is_replayed_whole_unless_a_pause_cut_it_short() -> None:
    from game_bridge_mcp.core.states.reexec import ran

    cut = [Sent("step", {"frames": 10000}, 2), Sent("pause", {}, 2), Sent("key", {"key": "a"}, 40)]
    assert ran(cut, 0, 10000, 2, 60) == 38  # as far as the game was next known to be
    assert ran(cut[:2], 0, 10000, 2, 45) == 43  # or the state's frame
    whole = [Sent("step", {"frames": 10}, 2), Sent("pause", {}, 12), Sent("key", {"key": "a"}, 12)]
    assert ran(whole, 0, 10, 2, 60) == 10  # a pause once the step was seen done
    assert ran([Sent("step", {"frames": 10}, 2), Sent("key", {}, 2)], 0, 10, 2, 60) == 10
    assert ran([Sent("step", {"frames": 10}, 2)], 0, 10, 2, None) == 10


def test_exact_means_the_same_json_to_the_letter() -> None:
    """A restore is exact when the state it shows is the saved one's canonical JSON: the
    quick check of the same document agrees with the SHA-256 (keys in another order are the
    same state; 1, 1.0 and true, or 0.0 and -0.0, are not)."""
    from game_bridge_mcp.core.states.reexec import compare, identical
    from game_bridge_mcp.core.states.store import comparable

    state = {"frame": 9, "game": {"x": 1, "y": 2.5, "on": True, "z": 0.0, "name": "é", "l": [1, {"a": None}]},
             "events": [{"seq": 1}]}
    saved = Seen.of(state)
    assert compare(saved, json.loads(json.dumps(state)), None) == (True, [])
    assert compare(saved, {**state, "frame": 12, "events": []}, None) == (True, [])  # not compared
    reordered = {"game": dict(reversed(list(state["game"].items()))), "frame": 9}
    assert not identical(reordered, saved.state) and compare(saved, reordered, None) == (True, [])
    for key, other in (("x", 1.0), ("x", True), ("on", 1), ("z", -0.0), ("y", 2.5000001)):
        changed = {**state, "game": {**state["game"], key: other}}
        assert not identical(comparable(changed), saved.state), key
        assert compare(saved, changed, None)[0] is False, key  # (0.0 == -0.0: its SHA-256 says so)
    assert compare(saved, state, "ab12") == (True, [])  # no screenshot was kept
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    assert not identical(deep, deep)  # marshal refuses: the SHA-256 decides
