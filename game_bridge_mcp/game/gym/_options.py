"""The Gymnasium wrapper's command line (its own options beside the family's) and the
``gamebridge.json`` that ``--init`` writes. Pure: nothing here imports Gymnasium."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...wrappers import named
from ..wrapper.options import SEED, SIZE, CommandLine, Options as WrapperOptions, UsageError
from ..wrapper.options import declaration as launch_declaration

ROW = named("gym")
PROG = f"game-bridge-mcp {ROW.name}"
USAGE = f"""usage: {PROG} [--port N] [--paused] [--seed N] [--size WxH] [--make-kwargs JSON] [--fps N]
                            [--autoreset] ENV_ID
       {PROG} --init [--force] [options] ENV_ID

Serve any Gymnasium environment, unmodified, as a game: one simulation frame is one
env.step with the held action (frame skip as the environment defines it); pause, step and
resume its clock; act {{action, frames}} takes a named action (ALE's, MiniGrid's, NetHack's)
or one shaped as the action space says; key maps keys to actions where that is natural;
reset {{seed, options}} starts an episode; /state shows the episode, reward, lives and info,
ui.text a text rendering (NetHack's, MiniGrid's, the toy-text games'), /screenshot the
rgb_array rendering; snapshot_save and snapshot_load save and restore it exactly.
ENV_ID is any registered id (ALE/Breakout-v5, MiniGrid-Empty-5x5-v0, NetHackScore-v0,
FrozenLake-v1), or MODULE:ID to import MODULE first (Gymnasium's own form).

  --port N           serve on 127.0.0.1:N (default 0: any free port; GAME_BRIDGE_DEBUG_PORT)
  --paused           start paused, before the first step (also GAME_BRIDGE_START_PAUSED=1)
  --seed N           the first episode's seed; later episodes reset without a seed get seeds
                     drawn from it (default: GAME_BRIDGE_SEED, else 0; shown in /state)
  --size WxH         show the picture at this size (default: the environment's rendering)
  --make-kwargs JSON keyword arguments for gymnasium.make, a JSON object
                     (e.g. '{{"render_mode": "rgb_array", "frameskip": 1}}')
  --fps N            steps a second while the clock runs (default: the environment's
                     render_fps, for Atari 60 divided by its frame skip; 1 to 1000)
  --autoreset        start the next episode on the frame after one ends (default: the ended
                     episode stays until reset)
  --init             write a gamebridge.json here that launches this environment through the wrapper
  --force            with --init, replace an existing gamebridge.json
"""
#: The most characters ``--make-kwargs`` may have.
MAX_KWARGS_TEXT = 16 * 1024
MAX_FPS = 1000
#: What an environment id may look like (Gymnasium's ``namespace/name-vN``, or ``module:id``).
_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,100}(:[A-Za-z0-9_.\-/]{1,200})?(/[A-Za-z0-9_.\-]{1,200})?$")


@dataclass
class Options(WrapperOptions):
    env_id: str = ""
    seed: int | None = None
    size: tuple[int, int] | None = None
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    fps: float | None = None
    autoreset: bool = False


def _env_id(opts: Options, words: list[str]) -> None:
    """The one environment id, after the options (or after ``--``)."""
    first = words[0]
    if first == "--":
        words = words[1:]
        if len(words) != 1:
            raise UsageError("name one environment id (e.g. ALE/Breakout-v5)")
    elif first.startswith("-"):
        raise UsageError(f"unknown option {first!r}")
    elif len(words) != 1:
        raise UsageError(f"name one environment id, after the options (got {first!r} and then {words[1]!r})")
    opts.env_id = check_env_id(words[0])


def check_env_id(text: str) -> str:
    if not _ID.match(text):
        raise UsageError(f"{text[:120]!r} is not an environment id: ids look like ALE/Breakout-v5, "
                         "CartPole-v1 or module:Id")
    return text


def _set_make_kwargs(opts: Options, value: str) -> None:
    opts.make_kwargs = make_kwargs(value)


def make_kwargs(value: str) -> dict[str, Any]:
    if len(value) > MAX_KWARGS_TEXT:
        raise UsageError(f"--make-kwargs is {len(value)} characters; at most {MAX_KWARGS_TEXT}")
    try:
        parsed = json.loads(value, parse_constant=_no_constant)
    except ValueError as exc:
        raise UsageError(f"--make-kwargs expects a JSON object (e.g. '{{\"frameskip\": 1}}'): {exc}") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"--make-kwargs expects a JSON object of keyword arguments, got {type(parsed).__name__}")
    bad = [key for key in parsed if not key.isidentifier()]
    if bad:
        raise UsageError(f"--make-kwargs: {bad[0][:60]!r} is not a keyword argument name")
    return parsed


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _set_fps(opts: Options, value: str) -> None:
    try:
        fps = float(value)
    except ValueError:
        fps = -1.0
    if not 1 <= fps <= MAX_FPS:
        raise UsageError(f"--fps expects steps a second, 1 to {MAX_FPS}, got {value!r}")
    opts.fps = fps


COMMAND_LINE = CommandLine(
    Options, _env_id, missing="name the environment id (e.g. ALE/Breakout-v5)", switches=("--autoreset",),
    valued={**SEED, **SIZE, "--make-kwargs": _set_make_kwargs, "--fps": _set_fps})


def parse(argv: Sequence[str], environ: dict[str, str] | None = None) -> Options:
    return COMMAND_LINE.parse(argv, environ)


def declaration(opts: Options) -> dict[str, Any]:
    """The launch declaration that serves ``opts``' environment through the wrapper
    (``--init``): the environment id and its options, no path of this machine."""
    argv: list[str] = []
    if opts.seed is not None:
        argv += ["--seed", str(opts.seed)]
    if opts.size is not None:
        argv += ["--size", f"{opts.size[0]}x{opts.size[1]}"]
    if opts.make_kwargs:
        argv += ["--make-kwargs", json.dumps(opts.make_kwargs, separators=(",", ":"))]
    if opts.fps is not None:
        argv += ["--fps", f"{opts.fps:g}"]
    if opts.autoreset:
        argv.append("--autoreset")
    argv.append(opts.env_id)
    return launch_declaration(ROW.module, f"{opts.env_id} (Gymnasium, through game-bridge-mcp)", argv,
                              ready_timeout_ms=60000)
