"""``game-bridge-mcp replay FILE``: re-run a recorded session against a game, print the verdict,
write the report; the exit codes are docs/record-replay.md's."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import TextIO

from ..config import Config, OptionError, OptionParser
from ..launch.declaration import apply_project_config
from ..errors import BridgeError, BridgeUsageError
from ..terminal.progress import TerminalProgress
from ..terminal.text import terminal

USAGE = """\
usage: game-bridge-mcp replay FILE (--port N [--port N ...] | --launch) [--ignore PATH ...]
                              [--update] [--force] [--report FILE.html] [--config FILE]
                              [--timeout MS] [--registry-dir DIR]

Re-issues the calls of a recording (--record FILE) that act on the game, in order, and
compares each answer with the recorded one, ignoring frame counters, timings, ids, ports
and saved file paths (and every --ignore PATH: dotted, '*' one segment, '**' any number).
Stops at the first divergence and prints it.

  --port N         replay against the game running on port N (once per recorded port,
                   in the order the recording first used them)
  --launch         launch the game from this project's gamebridge.json (paused when the
                   recording's game was), one instance per recorded port; stopped at the end
  --ignore PATH    also ignore this path in every answer (repeatable)
  --update         run every call and write the replay's answers back into FILE
  --force          replay even when the game's name or version differs from the recording's
  --report FILE    write a self-contained HTML report of the replay

exit codes: 0 same, 1 diverged, 2 usage or bad trace or identity differs, 3 GameOffline,
            4 NotAGameSurface
"""


def build_parser() -> argparse.ArgumentParser:
    p = OptionParser(prog="game-bridge-mcp replay", add_help=False)
    p.add_argument("file", nargs="?")
    p.add_argument("-p", "--port", action="append", default=[])
    p.add_argument("--launch", action="store_true")
    p.add_argument("--ignore", action="append", default=[], metavar="PATH")
    p.add_argument("--update", action="store_true")
    p.add_argument("--force", action="store_true")
    p.add_argument("--report", metavar="FILE")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--timeout", type=int, metavar="MS")
    p.add_argument("--registry-dir", metavar="DIR")
    p.add_argument("-h", "--help", action="store_true")
    return p


def _config(ns: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    config = Config(environ=dict(environ))
    if ns.registry_dir:
        config.registry_dir = Path(ns.registry_dir).expanduser()
    if ns.config or environ.get("GAME_BRIDGE_CONFIG"):
        config.config_file = Path(ns.config or environ["GAME_BRIDGE_CONFIG"]).expanduser()
    if ns.timeout is not None:
        if not 1 <= ns.timeout <= 3_600_000:
            raise BridgeUsageError(f"--timeout must be between 1 and 3600000 ms, not {ns.timeout}.")
        config.timeout_ms = ns.timeout
    if ns.launch:
        apply_project_config(config)
    return config


def run(ns: argparse.Namespace, out: TextIO, err: TextIO, environ: Mapping[str, str]) -> int:
    from ..trace.diff import render
    from ..trace.runner import replay_file

    shown = TerminalProgress(err, "launching")  # on a terminal, each --launch boot as it happens

    def say(line: str) -> None:
        shown.clear()
        out.write(line + "\n")
        out.flush()

    try:
        done = replay_file(ns.file, _config(ns, environ), ports=ns.port, launch=ns.launch, ignore=ns.ignore,
                           force=ns.force, update=ns.update, report=ns.report, say=say, progress=shown.callback)
    finally:
        shown.clear()
    result = done.result
    out.write(render(result, update=ns.update))
    if done.report is not None:
        out.write(f"Report: {done.report}\n")
    if done.updated is not None:
        out.write(f"Wrote the replay's answers to {done.updated}\n")
    if result.failure is not None:
        err.write(result.failure.render() + "\n")
    return result.exit_code(update=ns.update)


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         environ: Mapping[str, str] | None = None) -> int:
    out = terminal(stdout or sys.stdout)  # what it prints quotes games and traces: cleaned for a terminal
    err = terminal(stderr or sys.stderr)
    env = dict(os.environ if environ is None else environ)
    try:
        ns = build_parser().parse_args(list(argv))
    except OptionError as exc:
        err.write(f"game-bridge-mcp replay: {exc}\n{USAGE}")
        return 2
    if ns.help:
        out.write(USAGE)
        return 0
    if not ns.file:
        err.write("game-bridge-mcp replay: which recording? Give FILE.\n" + USAGE)
        return 2
    try:
        return run(ns, out, err, env)
    except BridgeError as exc:
        err.write(exc.render() + "\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


__all__ = ["main", "run", "USAGE"]
