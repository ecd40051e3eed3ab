"""A pytest plugin for game projects: the ``game`` fixture drives your game in tests, and every
recording under the collected paths replays as a test (docs/record-replay.md, "In your
game's test suite").

pytest loads this module in every run of an environment that has the package installed (an
entry point), so importing it costs next to nothing: the bridge, the launcher and the trace
reader are imported when a test asks for the ``game`` fixture or a recording is collected,
never in a project that uses neither.

Where things go, for a new option or marker argument: the command-line and ini options are
declared in :func:`pytest_addoption` and read in one place, :meth:`Options.read`; what the
``game_bridge`` marker may say is read by :func:`launch_arguments` (and :func:`start_state`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest

if TYPE_CHECKING:
    from .config import Config
    from .core.bridge import Bridge

MARKER = "game_bridge"
#: The trace format's name, as its header line holds it (trace/format.py's ``FORMAT``; a
#: test keeps the two equal): read here without importing the trace package.
TRACE_FORMAT = "game-bridge-trace"
#: What a replay's divergence tells the reader to add when an answer differs in a path that
#: says nothing about the game.
IGNORE_HINT = "--game-bridge-ignore PATH, or game_bridge_ignore in the pytest configuration"


@dataclass(frozen=True)
class Options:
    """The plugin's settings for one pytest run, from its command line and its ini file."""

    config_file: Path | None = None  # --game-bridge-config
    reports: Path | None = None  # --game-bridge-reports
    force: bool = False  # --game-bridge-force
    ignore: tuple[str, ...] = ()  # --game-bridge-ignore (repeatable) and the game_bridge_ignore ini lines

    @classmethod
    def read(cls, config: pytest.Config) -> "Options":
        given = config.getoption("game_bridge_config", None)
        reports = config.getoption("game_bridge_reports", None)
        ignore = [*(config.getini("game_bridge_ignore") or []), *(config.getoption("game_bridge_ignore", None) or [])]
        return cls(config_file=Path(given).expanduser() if given else None,
                   reports=Path(reports) if reports else None,
                   force=bool(config.getoption("game_bridge_force", False)),
                   ignore=tuple(str(p).strip() for p in ignore if str(p).strip()))


class GameDriver:
    """The tools, bound to one instance: ``driver.call("drop", x=1)`` or ``driver.drop(x=1)``
    runs ``call_tool {port, name: "drop", arguments: {x: 1}}`` and returns its answer (an
    error is raised as the bridge's error type: ``GameOffline``, ``CommandTimeout`` ...).
    ``until=`` is call_tool's: ``driver.drop(x=1, until={"path": "game.moving", "equals": 0})``
    waits for the board to settle in the same call (for ``advance``, whose own argument
    ``until`` is, it is advance's)."""

    def __init__(self, bridge: Bridge, port: int) -> None:
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


def _config(options: Options, rootpath: Path) -> Config:
    """The bridge's configuration for the project: its ``gamebridge.json`` (the given one, or
    ``GAME_BRIDGE_CONFIG``'s, or the nearest one above ``rootpath``)."""
    from .config import Config
    from .launch.declaration import apply_project_config

    config = Config()
    if options.config_file is not None:
        config.config_file = options.config_file
    elif config.environ.get("GAME_BRIDGE_CONFIG"):
        config.config_file = Path(config.environ["GAME_BRIDGE_CONFIG"]).expanduser()
    apply_project_config(config, cwd=rootpath)
    return config


def launch_arguments(marker: pytest.Mark | None) -> dict[str, Any]:
    """``launch_instance``'s arguments for a test, from its ``game_bridge`` marker (a state
    to start from needs a paused game: see :func:`start_state`)."""
    arguments: dict[str, Any] = {}
    if marker is not None and (marker.kwargs.get("paused") or marker.kwargs.get("state")):
        arguments["paused"] = True
    return arguments


def start_state(marker: pytest.Mark | None, test_file: Path) -> Path | None:
    """The state file a test starts from (``state=``, relative to the test's own file), or None."""
    named = marker.kwargs.get("state") if marker is not None else None
    if named is None:
        return None
    path = Path(str(named)).expanduser()
    return path if path.is_absolute() else test_file.parent / path


@pytest.fixture
def game(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Iterator[GameDriver]:
    """A freshly launched instance of the project's game, stopped after the test."""
    from .core.bridge import Bridge

    bridge = Bridge(_config(Options.read(pytestconfig), Path(str(pytestconfig.rootpath))))
    try:
        marker = request.node.get_closest_marker(MARKER)
        started = bridge.run_tool("launch_instance", launch_arguments(marker))
        driver = GameDriver(bridge, int(started["port"]))
        state = start_state(marker, Path(str(request.node.path)))
        if state is not None:  # the test begins mid-game: a state saved with save_state {keep: true}
            driver.restore_state(file=str(state))
        yield driver
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
    return f'"format":"{TRACE_FORMAT}"'.encode() in first.replace(b" ", b"")


def recordings(directory: str | Path) -> list[Path]:
    """The recordings in ``directory`` (recursively), sorted: for ``pytest.mark.parametrize``."""
    return sorted(p for p in Path(directory).rglob("*.trace") if p.is_file() and is_recording(p))


class ReplayDiverged(AssertionError):
    """A recording did not replay the same; the message is the readable diff."""


def assert_replays(path: str | Path, *, config: Config | None = None, ignore: tuple[str, ...] = (),
                   force: bool = False, report: str | Path | None = None) -> None:
    """Replay ``path`` against a freshly launched instance; raise :class:`ReplayDiverged`
    with the diff when it diverges, the bridge's error when it cannot run. ``ignore`` adds
    paths to leave out of the comparison (dotted, ``*`` one segment, ``**`` any number)."""
    if config is None:
        from .config import Config
        from .launch.declaration import apply_project_config

        config = Config()
        apply_project_config(config)
    _replay(path, config, ignore=ignore, force=force, report=report,
            hint="assert_replays(..., ignore=[PATH])")


def _replay(path: str | Path, config: Config, *, ignore: tuple[str, ...], force: bool,
            report: str | Path | None, hint: str) -> None:
    from .trace.diff import render
    from .trace.runner import replay_file

    done = replay_file(path, config, launch=True, ignore=ignore, force=force, report=report)
    result = done.result
    if result.failure is not None:
        raise result.failure
    if result.divergences:
        text = render(result, ignore_hint=hint)
        if done.report is not None:
            text += f"Report: {done.report}\n"
        raise ReplayDiverged(text)


class RecordingItem(pytest.Item):
    """One recording, replayed as a test."""

    def runtest(self) -> None:
        options = Options.read(self.config)
        report = None
        if options.reports is not None:
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.path.name)
            report = options.reports / f"{safe}.html"
        _replay(self.path, _config(options, Path(str(self.config.rootpath))), ignore=options.ignore,
                force=options.force, report=report, hint=IGNORE_HINT)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        from .errors import BridgeError

        value = excinfo.value
        if isinstance(value, BridgeError):
            return value.render()
        if isinstance(value, ReplayDiverged):
            return str(value)
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
    group.addoption("--game-bridge-ignore", metavar="PATH", action="append", default=[],
                    help="also leave PATH out of every replayed answer's comparison (repeatable; dotted, "
                         "'*' one segment, '**' any number: game.clock, **.timestamp)")
    parser.addini("game_bridge_ignore", type="linelist", default=[],
                  help="paths left out of every replayed answer's comparison, one a line (as --game-bridge-ignore)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(paused=False, state=None): how the game fixture launches the "
                                       "game, and the state file (.gbstate) it restores first")


__all__ = ["GameDriver", "Options", "ReplayDiverged", "assert_replays", "game", "is_recording", "launch_arguments",
           "recordings"]
