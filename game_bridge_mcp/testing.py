"""A pytest plugin for game projects: the ``game`` fixture drives your game in tests, and every
recording under the collected paths replays as a test (docs/record-replay.md, "In your
game's test suite")."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from .config import Config
from .launch.declaration import apply_project_config
from .errors import BridgeError
from .trace.format import FORMAT

MARKER = "game_bridge"


class GameDriver:
    """The tools, bound to one instance: ``driver.call("drop", x=1)`` or ``driver.drop(x=1)``
    runs ``call_tool {port, name: "drop", arguments: {x: 1}}`` and returns its answer (an
    error is raised as the bridge's error type: ``GameOffline``, ``CommandTimeout`` ...).
    ``until=`` is call_tool's: ``driver.drop(x=1, until={"path": "game.moving", "equals": 0})``
    waits for the board to settle in the same call (for ``advance``, whose own argument
    ``until`` is, it is advance's)."""

    def __init__(self, bridge: Any, port: int) -> None:
        self.bridge = bridge
        self.port = port

    def call(self, name: str, arguments: dict[str, Any] | None = None, /, *, until: dict[str, Any] | None = None,
             **kwargs: Any) -> dict[str, Any]:
        args = {**(arguments or {}), **kwargs}
        call: dict[str, Any] = {"name": name, "arguments": args, "port": self.port}
        if until is not None:
            if name == "advance":
                args["until"] = until
            else:
                call["until"] = until
        result: dict[str, Any] = self.bridge.run_tool("call_tool", call)
        return result

    def state(self) -> dict[str, Any]:
        """The full ``/state`` snapshot."""
        return self.call("get_state")

    def log(self, lines: int = 50) -> list[str]:
        """The game's captured output (the last ``lines`` lines)."""
        from .core.tools.instances import instance_log

        found = instance_log(self.bridge, port=self.port, lines=lines).get("lines")
        return [str(x) for x in found] if isinstance(found, list) else []

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return functools.partial(self.call, name)

    def __repr__(self) -> str:
        return f"<GameDriver port {self.port}>"


def _config(pytestconfig: pytest.Config) -> Config:
    config = Config()
    given = pytestconfig.getoption("game_bridge_config", None)
    if given:
        config.config_file = Path(given).expanduser()
    elif config.environ.get("GAME_BRIDGE_CONFIG"):
        config.config_file = Path(config.environ["GAME_BRIDGE_CONFIG"]).expanduser()
    apply_project_config(config, cwd=Path(str(pytestconfig.rootpath)))
    return config


@pytest.fixture
def game(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Iterator[GameDriver]:
    """A freshly launched instance of the project's game, stopped after the test."""
    from .core.bridge import Bridge

    marker = request.node.get_closest_marker(MARKER)
    launch_args: dict[str, Any] = {}
    if marker is not None and marker.kwargs.get("paused"):
        launch_args["paused"] = True
    bridge = Bridge(_config(pytestconfig))
    try:
        started = bridge.run_tool("launch_instance", launch_args)
        yield GameDriver(bridge, int(started["port"]))
    finally:
        bridge.shutdown()


# ----------------------------------------------------------------------------- recordings

def is_recording(path: Path) -> bool:
    """Whether ``path`` is a trace this package wrote (its first line names the format)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(64 * 1024)
    except OSError:
        return False
    return f'"format":"{FORMAT}"'.encode() in first.replace(b" ", b"")


def recordings(directory: str | Path) -> list[Path]:
    """The recordings in ``directory`` (recursively), sorted: for ``pytest.mark.parametrize``."""
    return sorted(p for p in Path(directory).rglob("*.trace") if p.is_file() and is_recording(p))


class ReplayDiverged(AssertionError):
    """A recording did not replay the same; the message is the readable diff."""


def assert_replays(path: str | Path, *, config: Config | None = None, ignore: tuple[str, ...] = (),
                   force: bool = False, report: str | Path | None = None) -> None:
    """Replay ``path`` against a freshly launched instance; raise :class:`ReplayDiverged`
    with the diff when it diverges, the bridge's error when it cannot run."""
    from .trace.diff import render
    from .trace.runner import replay_file

    if config is None:
        config = Config()
        apply_project_config(config)
    done = replay_file(path, config, launch=True, ignore=ignore, force=force, report=report)
    result = done.result
    if result.failure is not None:
        raise result.failure
    if result.divergences:
        text = render(result)
        if done.report is not None:
            text += f"Report: {done.report}\n"
        raise ReplayDiverged(text)


class RecordingItem(pytest.Item):
    """One recording, replayed as a test."""

    def runtest(self) -> None:
        reports = self.config.getoption("game_bridge_reports", None)
        report = None
        if reports:
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.path.name)
            report = Path(reports) / f"{safe}.html"
        assert_replays(self.path, config=_config(self.config), report=report,
                       force=bool(self.config.getoption("game_bridge_force", False)))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (ReplayDiverged, BridgeError)):
            value = excinfo.value
            return value.render() if isinstance(value, BridgeError) else str(value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"replay {self.path.name}"


class RecordingFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield RecordingItem.from_parent(self, name=self.path.stem)


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix == ".trace" and is_recording(file_path):
        collector: pytest.Collector = RecordingFile.from_parent(parent, path=file_path)
        return collector
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("game-bridge", "game-bridge-mcp: launching the game, replaying recordings")
    group.addoption("--game-bridge-config", metavar="FILE", default=None,
                    help="the gamebridge.json to launch the game from (default: the nearest one above the rootdir)")
    group.addoption("--game-bridge-reports", metavar="DIR", default=None,
                    help="write an HTML report of each replayed recording into DIR")
    group.addoption("--game-bridge-force", action="store_true", default=False,
                    help="replay recordings even when the game's name or version differs from the recording's")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(paused=False): how the game fixture launches the game")


__all__ = ["GameDriver", "ReplayDiverged", "assert_replays", "game", "is_recording", "recordings"]
