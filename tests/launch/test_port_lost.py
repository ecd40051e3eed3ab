"""A game that loses the port the bridge claimed for it (another process binds it between
the claim and the game's own bind) is launched again on another port, said in the answer's
notes; a port the caller asked for, a timeout or any other boot failure is not retried."""

from __future__ import annotations

import json
import shlex
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch.launcher import PORT_RETRIES, Launcher
from game_bridge_mcp.launch.portclaim import lost_port
from peers.fakegame import FakeGame
from launch_helpers import GAME, PYTHON, LauncherFactory, ProcessGuard, free_range, wait_until, write_declaration

pytestmark = pytest.mark.timeout(60)

IN_USE = "OSError: [Errno 98] Address already in use"


def slow_first_declaration(directory: Path) -> Path:
    """A game that takes 3 s to bind on its first launch (a window for a thief) and none after."""
    flag = directory / "launched-once"
    game = f"{shlex.quote(PYTHON)} {shlex.quote(str(GAME))} --port {{port}}"
    command = (f"if [ -e {shlex.quote(str(flag))} ]; then exec {game}; "
               f"else touch {shlex.quote(str(flag))}; exec {game} --boot-delay 3; fi")
    low, high = free_range(4)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "gamebridge.json"
    path.write_text(json.dumps({"name": "Slow First", "launch": {"command": command, "portRange": f"{low}-{high}",
                                                                  "readyTimeoutMs": 20000}}))
    return path


def launch_in_background(launcher: Launcher) -> tuple[threading.Thread, dict[str, Any]]:
    """``launcher.launch()`` on a thread of its own: the thread, and where its ``answer`` (or
    ``error``) will be."""
    outcome: dict[str, Any] = {}

    def launch() -> None:
        try:
            outcome["answer"] = launcher.launch()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome["error"] = exc

    thread = threading.Thread(target=launch)
    thread.start()
    return thread, outcome


@pytest.mark.slow
def test_a_port_taken_while_the_game_boots_is_left_for_another(tmp_path: Path, launchers: LauncherFactory,
                                                                 guard: ProcessGuard) -> None:
    launcher = launchers(slow_first_declaration(tmp_path / "game"))
    thread, outcome = launch_in_background(launcher)
    thief = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        assert wait_until(lambda: bool(launcher.launched_ports()), 10.0)
        taken = launcher.launched_ports()[0]
        thief.bind(("127.0.0.1", taken))  # while the game sleeps before its bind
        thief.listen(1)
        thread.join(30)
        assert not thread.is_alive() and "error" not in outcome, outcome.get("error")
        answer = outcome["answer"]
        assert answer["port"] != taken and launcher.launched_ports() == [answer["port"]]
        assert any(note.startswith(f"Port {taken} was taken by another process while the game started (the game "
                                   "could not bind it (OSError: [Errno 98] Address already in use)): launched "
                                   f"again on {answer['port']}.") for note in answer["notes"]), answer
    finally:
        thief.close()
        thread.join(30)


@pytest.mark.slow
def test_a_stranger_answering_on_the_port_while_the_game_boots_is_left_for_another(
        tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    """Something outside the launched tree answers /health where the game was to be: the
    launch goes on elsewhere, and the stranger is never sent a command nor signalled."""
    launcher = launchers(slow_first_declaration(tmp_path / "game"))
    thread, outcome = launch_in_background(launcher)
    try:
        assert wait_until(lambda: bool(launcher.launched_ports()), 10.0)
        taken = launcher.launched_ports()[0]
        with FakeGame(port=taken) as stranger:
            thread.join(30)
            assert "/command" not in stranger.requests
        assert "error" not in outcome, outcome.get("error")
        answer = outcome["answer"]
        assert answer["port"] != taken
        assert any(f"Port {taken} was taken by another process while the game started (a process outside the "
                   "launched tree answered there" in note for note in answer["notes"]), answer
    finally:
        thread.join(30)


@pytest.mark.slow
def test_a_game_that_never_gets_its_port_fails_after_a_few_ports_leaving_nothing(
        tmp_path: Path, launchers: LauncherFactory, guard: ProcessGuard) -> None:
    launcher = launchers(write_declaration(tmp_path, "--say", IN_USE, "--crash", "1"))
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch()
    assert "the process exited with code 1" in info.value.message and IN_USE in info.value.message
    logs = sorted((tmp_path / "logs").glob("*"))
    assert len(logs) == 1 + PORT_RETRIES, logs  # one launch a port: the first, then the retries
    assert launcher.launched_ports() == []
    assert wait_until(lambda: not guard.recorded(), 5.0), guard.recorded()


@pytest.mark.slow
def test_a_port_the_caller_named_is_not_swapped_for_another(tmp_path: Path, launchers: LauncherFactory) -> None:
    decl = write_declaration(tmp_path, "--say", IN_USE, "--crash", "1")
    launcher = launchers(decl)
    port = free_range(1)[0]
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch(port=port)
    assert info.value.fields["port"] == port and IN_USE in info.value.message
    assert len(list((tmp_path / "logs").glob("*"))) == 1


def test_what_counts_as_a_lost_port() -> None:
    def failure(*lines: str, **fields: Any) -> BridgeUsageError:
        return BridgeUsageError("Launch failed", lastOutput=list(lines), **fields)

    assert lost_port(failure("listen EADDRINUSE: address already in use 127.0.0.1:7830")) is not None  # Node
    assert lost_port(failure("listen tcp 127.0.0.1:7830: bind: address already in use")) is not None  # Go
    assert lost_port(failure("ERROR: Only one usage of each socket address is normally permitted")) is not None
    assert lost_port(failure(portTaken=True)) is not None  # someone else answered /health there
    assert lost_port(failure("Error: the test game crashed on purpose")) is None
    assert lost_port(failure(IN_USE, timedOut=True)) is None  # a timeout is the game's own slowness
    assert lost_port(failure()) is None
