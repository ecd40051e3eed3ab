"""``game-bridge-mcp check``: the command line, the order of the run, ``--launch`` and the
summary of the conformance check (docs/game-side.md, "Check a game in any language"); the
checks themselves are in the area modules beside it."""

from __future__ import annotations

import argparse
import os
import socket
import threading
import time
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, Callable, TextIO

from .base import FAIL, PASS, SKIP, WARN, Line, Target, terminal_text
from .clock import ClockChecks
from .events import EventChecks
from .features import FeatureChecks
from .host import HostChecks
from .images import ScreenshotChecks
from .protocol import ProtocolChecks
from .snapshot import SnapshotChecks
from ..config import OptionError, OptionParser
from ..contract import (AFTER_FEATURE, CLOCK, EVENTS_FEATURE, FEATURES, INPUT, RESULTS, SCREENSHOT_FEATURE,
                        SNAPSHOT_FEATURE, VIEW_FEATURE)
from ..errors import BridgeError, BridgeUsageError
from ..terminal.progress import TerminalProgress
from ..terminal.text import terminal


#: How long after a launched game answers the registry is watched for its entry.
ENTRY_GRACE_S = 1.5


# --------------------------------------------------------------------------- the run

class Checker(ProtocolChecks, HostChecks, FeatureChecks, EventChecks, ScreenshotChecks, SnapshotChecks, ClockChecks):
    """Runs the checks against one port and writes the checklist as it goes. The checks
    themselves live in :mod:`.protocol`, :mod:`.host` and, for the extensions a game
    advertises, :mod:`.features`, :mod:`.events`, :mod:`.images`, :mod:`.snapshot` and :mod:`.clock`; this
    is their order, and the one place that decides which run.

    ``relaunch(extra_env) -> (port, stop)`` (``--launch`` only) starts a second instance
    of the declared game, for the checks that need one started differently."""

    relaunch: Callable[[dict[str, str]], tuple[int, Callable[[], None]]] | None = None

    def run(self) -> list[Line]:
        self.out.write(f"Checking the game on {self.base} against the game-bridge contract\n")
        if not self.check_health():
            return self.lines
        self.check_frame_moves()
        self.check_state()
        self.check_tools()
        self.check_unknown_command()
        self.check_command_cycle()
        self.check_conventions()
        features = self.read_features()
        self.check_extensions(features)
        self.check_registry()
        self.check_loopback_only()
        self.check_hardening()
        if self.close:
            self.check_close()
        else:
            self.report(SKIP, "close: not sent (--no-close); the game is left running")
        if CLOCK in features:
            self.check_start_paused(self.relaunch)
        return self.lines

    def check_extensions(self, features: list[str]) -> None:
        """Each advertised extension, in :data:`EXTENSION_CHECKS`' order; one of the
        contract's that this check cannot test yet is said, not passed over."""
        for name, check in EXTENSION_CHECKS.items():
            if name in features:
                check(self, features)
        for name in FEATURES:
            if name in features and name not in EXTENSION_CHECKS:
                self.report(WARN, f"{name}: advertised, but this version of check does not test it yet")


#: Each extension's check, by its name in the contract (``contract.FEATURES``; a test fails
#: while one has none), in the order they run: the clock last, since it stops and restarts
#: time. Each is given the features the game advertised.
EXTENSION_CHECKS: dict[str, Callable[[Checker, list[str]], None]] = {
    RESULTS: lambda checker, _features: checker.check_results(),
    AFTER_FEATURE: lambda checker, _features: checker.check_after(),
    VIEW_FEATURE: lambda checker, _features: checker.check_view(),
    EVENTS_FEATURE: lambda checker, _features: checker.check_events(),
    INPUT: lambda checker, _features: checker.check_input(),
    SCREENSHOT_FEATURE: lambda checker, features: checker.check_screenshot(with_input=INPUT in features),
    SNAPSHOT_FEATURE: lambda checker, features: checker.check_snapshot(features),
    CLOCK: lambda checker, features: checker.check_clock(use_after=AFTER_FEATURE in features),
}


# --------------------------------------------------------------------------- launching

class _EntryWatcher:
    """While a launch boots, watch the registry for a new entry and probe its port the
    moment it appears: a refused connection means it was written before the bind."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.before = set(self._names())
        self.seen: dict[str, bool] = {}  # file name -> port was accepting when first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="check-entry-watch", daemon=True)

    def _names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.directory) if n.endswith(".json") and not n.startswith(".")]
        except OSError:
            return []

    def _run(self) -> None:
        from ..registry import InvalidEntry, load_entry

        while not self._stop.wait(0.002):
            for name in self._names():
                if name in self.before or name in self.seen:
                    continue
                try:
                    entry = load_entry(self.directory / name)
                except (InvalidEntry, OSError):
                    continue
                try:
                    with socket.create_connection(("127.0.0.1", entry.port), timeout=0.5):
                        self.seen[name] = True
                except OSError:
                    self.seen[name] = False

    def __enter__(self) -> "_EntryWatcher":
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._stop.set()
        self._thread.join(2)


# --------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    parser = OptionParser(prog="game-bridge-mcp check", add_help=False,
                     description="Check a running game (or one launched from gamebridge.json) against "
                                 "the game-bridge contract.")
    where = parser.add_argument_group("which game")
    where.add_argument("-p", "--port", type=int, help="the debug port of a running game")
    where.add_argument("--launch", action="store_true",
                       help="start the game from gamebridge.json (nearest, or --config), check it, stop it")
    where.add_argument("--config", type=Path, help="the launch declaration for --launch")
    options = parser.add_argument_group("options")
    options.add_argument("--command", help="the harmless command used for the command cycle (default: noop)")
    options.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                         help="an argument for --command (repeatable)")
    options.add_argument("--no-close", action="store_true", help="do not send close at the end")
    options.add_argument("--timeout", type=int, default=5000, metavar="MS",
                         help="per request and for a command to complete (default 5000)")
    options.add_argument("--grace", type=int, default=5000, metavar="MS",
                         help="how long close may take (default 5000)")
    options.add_argument("--registry-dir", type=Path, help="the instance registry directory")
    options.add_argument("-h", "--help", action="store_true", help="show this help")
    return parser


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    if ns.help:
        return ns
    if ns.port is None and not ns.launch:
        raise OptionError("say which game: --port N (a running game) or --launch (from gamebridge.json)")
    if ns.port is not None and ns.launch:
        raise OptionError("--port and --launch are alternatives; give one")
    if ns.port is not None and not 1 <= ns.port <= 65535:
        raise OptionError(f"--port must be 1-65535, not {ns.port}")
    if ns.config is not None and not ns.launch:
        raise OptionError("--config is only used with --launch")
    if not 1 <= ns.timeout <= 600_000 or not 0 <= ns.grace <= 600_000:
        raise OptionError("--timeout must be 1-600000 ms and --grace 0-600000 ms")
    if ns.arg and not ns.command:
        raise OptionError("--arg needs --command")
    args: dict[str, str] = {}
    for item in ns.arg:
        key, sep, value = item.partition("=")
        if not sep or not key or key in ("cmd", "port"):
            raise OptionError(f"--arg {item!r} must be KEY=VALUE (and KEY not cmd or port)")
        args[key] = value
    ns.command_args = args
    return ns


def _summary(counts: dict[str, int]) -> str:
    parts = [f"{counts[PASS]} passed", f"{counts[WARN]} warning{'s' if counts[WARN] != 1 else ''}",
             f"{counts[FAIL]} failed"]
    if counts[SKIP]:
        parts.append(f"{counts[SKIP]} skipped")
    verdict = ("The game does not conform: fix the FAIL lines." if counts[FAIL] else
               "The game conforms; the WARN lines are worth a look." if counts[WARN] else
               "The game conforms.")
    return f"Summary: {', '.join(parts)}. {verdict}\n"


def _declaration(ns: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    """The Config with its launch declaration; BridgeUsageError when there is none."""
    from ..config import Config
    from ..launch.declaration import apply_project_config

    config = Config(environ=dict(environ), registry_dir=ns.registry_dir, config_file=ns.config)
    apply_project_config(config)
    if config.declaration is None:
        raise BridgeUsageError("check --launch needs a gamebridge.json: none was found in this directory "
                               "or above it. Name one with --config, or check a running game with --port N.")
    return config


def _launch(config: Any, environ: Mapping[str, str], out: TextIO, err: TextIO) -> tuple[Any, Target]:
    """Start the declared game; returns (launcher, target). Raises BridgeError when it
    does not start (the launcher has already reaped it then)."""
    from ..launch.declaration import declaration_of
    from ..launch.launcher import Launcher
    from ..paths import registry_dir

    decl = declaration_of(config)
    assert decl is not None  # _declaration made sure
    out.write(f"Launching {decl.name or 'the game'} from {decl.path}\n")
    out.flush()
    launcher = Launcher(config, environ=dict(environ))
    shown = TerminalProgress(err, "launching")  # on a terminal, the boot as it happens
    with _EntryWatcher(registry_dir(environ, config.registry_dir)) as watcher:
        try:
            result = launcher.launch(progress=shown.callback)
        except BaseException:
            launcher.shutdown(grace_ms=500)
            raise
        finally:
            shown.clear()
        # A game may write its entry a little after /health first answers (a loaded
        # machine: hundreds of ms): give the watcher up to ENTRY_GRACE_S to see it.
        deadline = time.monotonic() + ENTRY_GRACE_S
        while not watcher.seen and time.monotonic() < deadline:
            time.sleep(0.01)
    target = Target(port=int(result["port"]), pid=result.get("pid"), cwd=decl.cwd, launched=True)
    if watcher.seen:
        accepting = next(iter(watcher.seen.values()))
        target.entry_seen_before_bind = not accepting
    out.write(f"Launched on port {target.port} (pid {target.pid}) in {result.get('readyInMs')} ms\n")
    return launcher, target


def _relauncher(config: Any, environ: Mapping[str, str]) -> Callable[[dict[str, str]], tuple[int, Callable[[], None]]]:
    """Starts another instance of the declared game with extra environment."""
    from ..launch.launcher import Launcher

    def relaunch(extra: dict[str, str]) -> tuple[int, Callable[[], None]]:
        launcher = Launcher(config, environ={**environ, **extra})
        try:
            result = launcher.launch()
        except BaseException:
            launcher.shutdown(grace_ms=500)
            raise
        return int(result["port"]), lambda: launcher.shutdown(grace_ms=1000)

    return relaunch


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         environ: Mapping[str, str] | None = None) -> int:
    """``game-bridge-mcp check ...``: 0 when no check failed, 1 otherwise, 2 for usage errors."""
    import sys

    out = terminal(stdout or sys.stdout)  # what it prints quotes games and traces: cleaned for a terminal
    err = terminal(stderr or sys.stderr)
    env = dict(os.environ if environ is None else environ)
    try:
        ns = _parse(argv)
    except OptionError as exc:
        err.write(f"game-bridge-mcp check: {exc}\n{build_parser().format_usage()}")
        return 2
    if ns.help:
        out.write(build_parser().format_help())
        return 0
    launcher = None
    try:
        config = _declaration(ns, env) if ns.launch else None  # a missing or broken gamebridge.json: usage error
        if config is not None:
            try:
                launcher, target = _launch(config, env, out, err)
            except BridgeError as exc:
                out.write(f"{FAIL}  the game did not start\n")
                for text in terminal_text(exc.render()).splitlines():  # it quotes the game's output
                    out.write(f"      {text}\n")
                out.write(_summary({PASS: 0, WARN: 0, FAIL: 1, SKIP: 0}))
                return 1
        else:
            target = Target(port=ns.port)
        checker = Checker(target, out=out, environ=env, timeout_ms=ns.timeout, grace_ms=ns.grace,
                          command=ns.command, command_args=ns.command_args, close=not ns.no_close,
                          registry_dir=ns.registry_dir)
        if config is not None:
            checker.relaunch = _relauncher(config, env)
        checker.run()
        counts = checker.counts()
        out.write(_summary(counts))
        return 1 if counts[FAIL] else 0
    except BridgeError as exc:
        err.write(terminal_text(exc.render()) + "\n")
        return exc.exit_code
    finally:
        if launcher is not None:
            launcher.shutdown(grace_ms=1000)


__all__ = ["Checker", "Line", "Target", "build_parser", "main", "PASS", "WARN", "FAIL", "SKIP"]
