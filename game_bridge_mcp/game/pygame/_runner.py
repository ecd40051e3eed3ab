"""``game-bridge-mcp pygame``: run an unmodified pygame game as this process's ``__main__``,
with the kit's surface from its first display flip."""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from ..._version import __version__
from ...contract import ENV_DEBUG_PORT
from ..kit.clock import START_PAUSED_ENV

PROG = "game-bridge-mcp pygame"
USAGE = f"""usage: {PROG} [--port N] [--paused] [--window] (-m MODULE | SCRIPT) [ARGS ...]
       {PROG} --init [--force] [--window] (-m MODULE | SCRIPT) [ARGS ...]

Run an unmodified pygame (or pygame-ce) game with the game-bridge debug surface: each
display flip is a frame; key, mouse and text act as a player; screenshots show the
display; pause, resume and step hold the game at its flip. Headless unless --window.

  --port N     serve on 127.0.0.1:N (default 0: any free port; GAME_BRIDGE_DEBUG_PORT)
  --paused     start paused, held at the first flip (also GAME_BRIDGE_START_PAUSED=1)
  --window     open a real window (and real audio) instead of SDL's dummy drivers
  --init       write a gamebridge.json here that launches this game through the wrapper
  --force      with --init, replace an existing gamebridge.json
  -m MODULE    run a module as python -m does (e.g. pygame.examples.aliens)
  SCRIPT       run a script file as python does
  ARGS         passed to the game as its sys.argv[1:]
"""
#: Seconds without a first flip after which the wrapper says so on stderr.
FIRST_FLIP_WARNING_S = 3.0
DECLARATION = "gamebridge.json"


class UsageError(Exception):
    pass


@dataclass
class Options:
    port: int = 0
    paused: bool = False
    window: bool = False
    init: bool = False
    force: bool = False
    module: str | None = None
    script: str | None = None
    args: list[str] = field(default_factory=list)
    help: bool = False

    @property
    def target(self) -> str:
        return self.module if self.module is not None else str(self.script)


def parse(argv: Sequence[str], environ: dict[str, str] | None = None) -> Options:
    """The wrapper's options up to the game's target; everything after it is the game's."""
    env = os.environ if environ is None else environ
    opts = Options()
    if env.get(ENV_DEBUG_PORT, "").strip():
        opts.port = _port(env[ENV_DEBUG_PORT], ENV_DEBUG_PORT)
    args = list(argv)
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-h", "--help"):
            opts.help = True
            return opts
        if arg == "--port" or arg.startswith("--port="):
            value = arg.partition("=")[2] if "=" in arg else (args[index + 1] if index + 1 < len(args) else "")
            index += 0 if "=" in arg else 1
            opts.port = _port(value, "--port")
        elif arg in ("--paused", "--window", "--init", "--force"):
            setattr(opts, arg[2:], True)
        elif arg == "-m":
            if index + 1 >= len(args):
                raise UsageError("-m needs a module name after it")
            opts.module, opts.args = args[index + 1], args[index + 2:]
            return _checked(opts)
        elif arg == "--":
            if index + 1 >= len(args):
                raise UsageError("name the game: -m MODULE or SCRIPT")
            opts.script, opts.args = args[index + 1], args[index + 2:]
            return _checked(opts)
        elif arg.startswith("-"):
            raise UsageError(f"unknown option {arg!r} (the game's own options go after its name)")
        else:
            opts.script, opts.args = arg, args[index + 1:]
            return _checked(opts)
        index += 1
    raise UsageError("name the game: -m MODULE or SCRIPT")


def _port(value: str, source: str) -> int:
    text = value.strip()
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise UsageError(f"{source} expects a port number 0-65535, got {value!r}")
    return int(text)


def _checked(opts: Options) -> Options:
    if opts.script is not None and not Path(opts.script).is_file():
        raise UsageError(f"no such script: {opts.script}")
    if opts.module is not None and not opts.module.replace(".", "").replace("_", "").isalnum():
        raise UsageError(f"not a module name: {opts.module!r}")
    return opts


# --------------------------------------------------------------------------- --init
def declaration(opts: Options) -> dict[str, Any]:
    """The launch declaration that runs ``opts``' game through the wrapper, with the
    bridge's own interpreter (``{python}``): no path of this machine, so it can be
    committed (the launcher puts the bridge's package on the game's path)."""
    argv = ["{python}", "-m", "game_bridge_mcp.game.pygame", "--port", "{port}"]
    if opts.window:
        argv.append("--window")
    argv += ["-m", opts.module] if opts.module is not None else [str(opts.script)]
    argv += opts.args
    launch: dict[str, Any] = {"argv": argv, "cwd": ".", "readyTimeoutMs": 60000}
    return {"name": f"{opts.target} (pygame, through game-bridge-mcp)", "launch": launch}


def write_init(opts: Options, directory: Path) -> Path:
    path = directory / DECLARATION
    if path.exists() and not opts.force:
        raise FileExistsError(f"{path} already exists; pass --force to replace it")
    path.write_text(json.dumps(declaration(opts), indent=2) + "\n", encoding="utf-8")
    return path


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
    from ..kit import GameBridge
    from ._hooks import Wrapper, announce_to_stderr
    from ._input import input_commands

    try:
        import pygame
    except ImportError:
        announce_to_stderr("pygame is not installed here: pip install pygame-ce (or pygame)")
        return 1
    environ = dict(os.environ)
    if opts.paused:
        environ[START_PAUSED_ENV] = "1"
    name = opts.target.rsplit(".", 1)[-1] if opts.module else Path(opts.target).stem
    holder: dict[str, Wrapper] = {}
    bridge = GameBridge(
        name, f"pygame {getattr(pygame.version, 'ver', '?')} via game-bridge-mcp {__version__}",
        state=lambda: holder["wrapper"].state(), on_close=lambda: holder["wrapper"].post_quit(),
        clock=True, environ=environ,
        description=(f"{opts.target}: an unmodified pygame game, run by game-bridge-mcp's pygame wrapper, "
                     "which knows nothing of its rules. Look at it with screenshots; play it with key, "
                     "mouse and text as a player would; pause, step and resume its clock."),
        toolsets={"input": "Act as a player: keys, the pointer and typed text, delivered as pygame events."})
    wrapper = Wrapper(pygame, bridge, port=opts.port, target=opts.target, announce=announce_to_stderr)
    holder["wrapper"] = wrapper
    bridge.screenshot(wrapper.capture, window=wrapper.window_size)
    for func in input_commands(wrapper.devices, wrapper):
        bridge.command(func, toolset="input")
    bridge.advertise("input")
    wrapper.install()

    def warn_no_flip() -> None:
        if not wrapper.waited_for_first_flip(FIRST_FLIP_WARNING_S):
            announce_to_stderr(f"{opts.target} has not flipped its display in {FIRST_FLIP_WARNING_S:g} s; "
                               "the debug surface starts at its first pygame.display.flip() or update()")

    threading.Thread(target=warn_no_flip, name="game-bridge-first-flip", daemon=True).start()
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
    announce_to_stderr(f"{opts.target} ended (exit code {code}) after {wrapper.frames} frames")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        opts = parse(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n{USAGE}")
        return 2
    if opts.help:
        sys.stdout.write(USAGE)
        return 0
    if opts.init:
        try:
            path = write_init(opts, Path.cwd())
        except OSError as exc:
            sys.stderr.write(f"{PROG} --init: {exc}\n")
            return 2
        sys.stdout.write(f"Wrote {path}.\nFrom this directory, launch_instance starts {opts.target} through the "
                         "wrapper; try:\n  game-bridge-mcp call launch_instance --keep\n")
        return 0
    return run(opts)
