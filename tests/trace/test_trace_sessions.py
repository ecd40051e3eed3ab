"""A trace appended to by several ``call`` processes replays: each ``call`` was a fresh
bridge, whose first answer about a port shows all the game's recent events (no earlier
answer showed them), so a replay meets each new recording session (the ``session``
field of a call line) as a fresh bridge would.
Against a kit game on a real loop, with the real ``call`` CLI and ``replay_file``."""

from __future__ import annotations

import io
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

import game_bridge_mcp.cli.call as call_cli
from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.game import GameBridge
from game_bridge_mcp.trace.reader import read_trace
from game_bridge_mcp.trace.recorder import Recorder
from game_bridge_mcp.trace.runner import replay_file
from kit_helpers import looping

pytestmark = pytest.mark.timeout(60)


@contextmanager
def counter() -> Iterator[int]:
    """A fresh Counter game (its events start from none)."""
    world = {"n": 0}
    kit = GameBridge("Counter", "1", register=False,
                     state=lambda: {"game": {"n": world["n"], "label": "counter"}, "ui": {"text": f"n={world['n']}"}})

    @kit.command()
    def set_n(value: int) -> dict:
        """Set the counter."""
        world["n"] = value
        kit.event(f"set:{value}")
        return {"n": value}

    with looping(kit, hz=200) as port:
        yield port


@pytest.fixture
def game() -> Iterator[int]:
    """The game recorded against; replays run against a fresh one (``counter()``)."""
    with counter() as port:
        yield port


def record_calls(port: int, trace: Path, home: Path) -> None:
    env = {**os.environ, "GAME_BRIDGE_RECORD": str(trace), "GAME_BRIDGE_HOME": str(home)}
    env.pop("GAME_BRIDGE_PORT", None)
    for value in (1, 2):  # two processes' worth of call: two bridges, two sessions
        code = call_cli.main(["set_n", f'{{"value": {value}}}', "--port", str(port), "--no-scan", "--no-registry"],
                             stdout=io.StringIO(), stderr=io.StringIO(), environ=env)
        assert code == 0


def replay(trace: Path, _recorded_on: int, home: Path) -> list[str]:
    config = Config(environ={"GAME_BRIDGE_HOME": str(home)}, scan=False, registry=False)
    with counter() as port:
        replayed = replay_file(trace, config, ports=[port])
    assert replayed.result.failure is None
    return [step.status for step in replayed.result.steps]


def test_calls_recorded_by_separate_call_processes_replay_as_recorded(game: int, tmp_path: Path) -> None:
    trace = tmp_path / "calls.trace"
    record_calls(game, trace, tmp_path)
    calls = read_trace(trace).calls
    assert len(calls) == 2 and calls[0].session and calls[1].session and calls[0].session != calls[1].session
    second = calls[1].record.get("answer")
    assert isinstance(second, dict) and second["text"] == "n=2" and second["game"]["label"] == "counter"
    # The second recorded answer shows again the event a bridge that had answered before would not.
    assert [e["m"] for e in second["events"]] == ["set:1", "set:2"]
    assert replay(trace, game, tmp_path) == ["same", "same"]


def test_without_the_session_reset_the_second_call_would_diverge(game: int, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The reset is what makes the test above pass (so it can fail)."""
    trace = tmp_path / "calls.trace"
    record_calls(game, trace, tmp_path)
    monkeypatch.setattr(Bridge, "new_session", lambda self, ports: None)
    assert replay(trace, game, tmp_path) == ["same", "diverged"]


def test_one_session_is_not_reset(game: int, tmp_path: Path) -> None:
    """Calls of one recording bridge are replayed by one bridge, its events cursor kept:
    the second answer leaves out the event the first showed, as it did when recorded."""
    trace = tmp_path / "one.trace"
    bridge = Bridge(Config(environ={"GAME_BRIDGE_HOME": str(tmp_path)}, scan=False, registry=False))
    recorder = Recorder(trace, bridge, recorder="serve")  # as the server records a session
    try:
        for value in (1, 2):
            arguments = {"port": game, "name": "set_n", "arguments": {"value": value}}
            recorder.call("call_tool", arguments, lambda a=arguments: bridge.run_tool("call_tool", a))
    finally:
        recorder.writer.close()
        bridge.shutdown()
    calls = read_trace(trace).calls
    assert calls[0].session == calls[1].session
    second = calls[1].record.get("answer") or {}
    assert second["game"]["label"] == "counter"  # the digest is whole ...
    assert [e["m"] for e in second["events"]] == ["set:2"]  # ... and each event shown once
    assert replay(trace, game, tmp_path) == ["same", "same"]
