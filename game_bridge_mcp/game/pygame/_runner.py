"""``game-bridge-mcp pygame``: run an unmodified pygame game as this process's ``__main__``,
with the kit's surface from its first display flip. The pygame part of a wrapper: what is
shared is in ``game/wrapper/``."""

from __future__ import annotations

import os
import runpy
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ..._version import __version__
from ...wrappers import named
from ..wrapper.input import input_commands
from ..wrapper.main import Cli, main as wrapper_main
from ..wrapper.options import SEED, CommandLine, Options as WrapperOptions, UsageError, \
    declaration as launch_declaration, launch_seed
from ._determinism import seed_generators
from ..wrapper.serve import Late, Say, add_commands, assemble

ROW = named("pygame")
PROG = f"game-bridge-mcp {ROW.name}"
USAGE = f"""usage: {PROG} [--port N] [--paused] [--seed N] [--window] (-m MODULE | SCRIPT) [ARGS ...]
       {PROG} --init [--force] [--seed N] [--window] (-m MODULE | SCRIPT) [ARGS ...]

Run an unmodified pygame (or pygame-ce) game with the game-bridge debug surface: each
display flip is a frame; key, mouse and text act as a player; screenshots show the
display; pause, resume and step hold the game at its flip. Headless unless --window.

  --port N     serve on 127.0.0.1:N (default 0: any free port; GAME_BRIDGE_DEBUG_PORT)
  --paused     start paused, held at the first flip (also GAME_BRIDGE_START_PAUSED=1), its time at 0
  --seed N     seed random (and numpy's global generator) with N before the game runs (default:
               GAME_BRIDGE_SEED, else 0): the same commands at the same frames, the same game
  --window     open a real window (and real audio) instead of SDL's dummy drivers
  --init       write a gamebridge.json here that launches this game through the wrapper
  --force      with --init, replace an existing gamebridge.json
  -m MODULE    run a module as python -m does (e.g. pygame.examples.aliens)
  SCRIPT       run a script file as python does
  ARGS         passed to the game as its sys.argv[1:]
"""
#: Seconds without a first flip after which the wrapper says so on stderr.
FIRST_FLIP_WARNING_S = 3.0


say = Say(ROW.name)


@dataclass
class Options(WrapperOptions):
    window: bool = False
    seed: int | None = None
    module: str | None = None
    script: str | None = None
    args: list[str] = field(default_factory=list)

    @property
    def target(self) -> str:
        return self.module if self.module is not None else str(self.script)


def _game(opts: Options, words: list[str]) -> None:
    """The game's name (``-m MODULE``, ``SCRIPT`` or ``-- SCRIPT``); every word after it is the game's."""
    first = words[0]
    if first == "-m":
        if len(words) < 2:
            raise UsageError("-m needs a module name after it")
        opts.module, opts.args = words[1], words[2:]
    elif first == "--":
        if len(words) < 2:
            raise UsageError("name the game: -m MODULE or SCRIPT")
        opts.script, opts.args = words[1], words[2:]
    elif first.startswith("-"):
        raise UsageError(f"unknown option {first!r} (the game's own options go after its name)")
    else:
        opts.script, opts.args = first, words[1:]
    if opts.script is not None and not Path(opts.script).is_file():
        raise UsageError(f"no such script: {opts.script}")
    if opts.module is not None and not opts.module.replace(".", "").replace("_", "").isalnum():
        raise UsageError(f"not a module name: {opts.module!r}")


COMMAND_LINE = CommandLine(Options, _game, missing="name the game: -m MODULE or SCRIPT", switches=("--window",),
                           valued=SEED)


def game_seed(opts: Options, environ: Mapping[str, str] | None = None) -> int:
    """The seed the game's generators get: ``--seed``, else ``GAME_BRIDGE_SEED``, else 0."""
    return launch_seed(opts.seed, environ)


def parse(argv: Sequence[str], environ: dict[str, str] | None = None) -> Options:
    """The wrapper's options up to the game's target; everything after it is the game's."""
    return COMMAND_LINE.parse(argv, environ)


def declaration(opts: Options) -> dict[str, Any]:
    """The launch declaration that runs ``opts``' game through the wrapper (``--init``)."""
    argv = ["--window"] if opts.window else []
    if opts.seed is not None:
        argv += ["--seed", str(opts.seed)]
    argv += ["-m", opts.module] if opts.module is not None else [str(opts.script)]
    return launch_declaration(ROW.module, f"{opts.target} (pygame, through game-bridge-mcp)", [*argv, *opts.args],
                              ready_timeout_ms=60000)


# --------------------------------------------------------------------------- running
def _environment(opts: Options) -> None:
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    if opts.window:
        if os.environ.get("SDL_VIDEODRIVER") == "dummy":
            del os.environ["SDL_VIDEODRIVER"]
    else:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def run(opts: Options) -> int:
    """Run the game under the wrapper; returns the process exit code."""
    _environment(opts)
    from ._hooks import Wrapper
    from ._input import WORDS

    try:
        import pygame
    except ImportError:
        say("pygame is not installed here: pip install pygame-ce (or pygame)")
        return 1
    try:
        seed = game_seed(opts)
    except UsageError as exc:
        say(str(exc))
        return 2
    name = opts.target.rsplit(".", 1)[-1] if opts.module else Path(opts.target).stem
    late = Late()
    bridge = assemble(
        name, f"pygame {getattr(pygame.version, 'ver', '?')} via game-bridge-mcp {__version__}, seed {seed}",
        state=late.state, on_close=lambda: late.engine.post_quit(), paused=opts.paused,
        description=(f"{opts.target}: an unmodified pygame game, run by game-bridge-mcp's pygame wrapper, "
                     "which knows nothing of its rules. Look at it with screenshots; play it with key, "
                     "mouse and text as a player would; pause, step and resume its clock."),
        input_help="Act as a player: keys, the pointer and typed text, delivered as pygame events.")
    wrapper = Wrapper(pygame, bridge, port=opts.port, target=opts.target, announce=say)
    late.engine = wrapper
    bridge.screenshot(wrapper.capture, window=wrapper.window_size)
    add_commands(bridge, input_commands(wrapper.devices, wrapper, WORDS))
    bridge.on_step_interrupted(lambda: wrapper.schedule.let_go(wrapper.devices.release_all))
    wrapper.install()

    def warn_no_flip() -> None:
        if not wrapper.waited_for_first_flip(FIRST_FLIP_WARNING_S):
            say(f"{opts.target} has not flipped its display in {FIRST_FLIP_WARNING_S:g} s; "
                "the debug surface starts at its first pygame.display.flip() or update()")

    threading.Thread(target=warn_no_flip, name="game-bridge-first-flip", daemon=True).start()
    seed_generators(seed)  # the version says which seed: a trace records it
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    code = 0
    try:
        if opts.module is not None:
            sys.argv = [opts.module, *opts.args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(opts.module, run_name="__main__", alter_sys=True)
        else:
            script = str(Path(str(opts.script)).resolve())
            sys.argv = [str(opts.script), *opts.args]
            sys.path.insert(0, os.path.dirname(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - the game's crash, reported as Python would
        traceback.print_exc()
        code = 1
    finally:
        wrapper.finish()
        sys.argv, sys.path[:] = saved_argv, saved_path
    say(f"{opts.target} ended (exit code {code}) after {wrapper.frames} frames")
    return code


CLI = Cli(row=ROW, usage=USAGE, command_line=COMMAND_LINE, declaration=declaration, run=run,
          target=lambda opts: opts.target, verb="starts")


def main(argv: Sequence[str] | None = None) -> int:
    return wrapper_main(CLI, argv)
