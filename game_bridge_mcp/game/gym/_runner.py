"""``game-bridge-mcp gym``: make a Gymnasium environment, unmodified, and serve it as a game
until ``close``, SIGTERM or SIGINT: its clock's frames are its steps (``serve.drive``)."""

from __future__ import annotations

import logging
import signal
from collections.abc import Sequence
from typing import Any

from ..._version import __version__
from ..wrapper.input import TOOLSET, key_command
from ..wrapper.main import Cli, main as wrapper_main
from ..wrapper.serve import Late, Say, assemble, drive, start
from ..wrapper.options import UsageError, launch_seed
from ._options import COMMAND_LINE, ROW, USAGE, Options, check_env_id, declaration

log = logging.getLogger(__name__)
say = Say(ROW.name)

#: How many action names the game's description lists (the rest are in act's schema).
DESCRIBED_ACTIONS = 24


def run(opts: Options) -> int:
    """Make the environment and serve it; returns the process exit code."""
    from ._make import MakeError, choose_render_mode, make, render_modes, resolve

    try:
        env_id = resolve(opts.env_id)
        from ._families import make_defaults

        kwargs = {**make_defaults(env_id), **opts.make_kwargs}
        modes = render_modes(env_id)
        if "render_mode" not in kwargs:
            mode = choose_render_mode(modes)
            if mode is not None:
                kwargs["render_mode"] = mode
        env = make(env_id, kwargs)
    except MakeError as exc:
        say(str(exc))
        return 1
    try:
        return _serve(env, env_id, kwargs, modes, opts)
    finally:
        _close(env)


def _close(env: Any) -> None:
    try:
        env.close()
    except Exception as exc:  # noqa: BLE001 - the environment's own teardown
        log.warning("game-bridge gym: closing the environment failed: %s", exc)


def _serve(env: Any, env_id: str, kwargs: dict[str, Any], modes: list[str], opts: Options) -> int:
    from . import _commands
    from ._engine import MAX_CHUNK, Engine, rgb
    from ._families import family_of
    from ._snapshot import Snapshots

    family = family_of(env)
    packages = _packages(env)
    late = Late()
    bridge = assemble(
        env_id, f"{', '.join(f'{k} {v}' for k, v in packages.items())}; game-bridge-mcp {__version__}",
        description=_description(env_id, env, family), paused=opts.paused,
        input_help="Act as a player: keys held down stand for the environment's actions.",
        toolsets={_commands.ACTIONS: "Play: take the environment's actions, by name or as its action space "
                                     "shapes them, for a number of steps.",
                  _commands.EPISODE: "Start a new episode, with a seed (the same seed and actions give the "
                                     "same episode)."},
        state=late.state, on_close=lambda: _closed(late),
        snapshot=(lambda: late.engine.snapshots.save(), lambda data: late.engine.snapshots.load(data)))
    bridge.digest_fn = lambda: late.engine.digest_state()  # (the digest without what it drops)
    try:
        seed_base = launch_seed(opts.seed)  # --seed, else GAME_BRIDGE_SEED, else 0: every wrapper's rule
    except UsageError as exc:
        say(str(exc))
        return 2
    engine = Engine(env, family, bridge, env_id=env_id, seed_base=seed_base, autoreset=opts.autoreset,
                    journal=not family.native)
    late.engine = engine
    engine.size = opts.size
    try:
        engine.reset(seed_base, None)
    except ValueError as exc:
        say(f"{env_id}: {exc}")
        return 1
    notes = _renderings(engine, env, modes, rgb)
    for note in notes:
        say(note)
    engine.notes = notes
    if engine.pictures:
        bridge.screenshot(engine.capture)
    _commands.register(bridge, engine)
    if engine.keys:
        bridge.command(key_command(_commands.Keys(engine), engine, _commands.words(engine)), toolset=TOOLSET)
    snapshots = Snapshots(engine, {"env": env_id, "makeKwargs": _json_kwargs(kwargs), "packages": packages},
                          remake=lambda: _remake(env_id, kwargs))
    engine.snapshots = snapshots
    _on_signals(bridge)
    if start(bridge, opts.port, env_id, say) is None:
        return 1
    fps = opts.fps if opts.fps is not None else family.default_fps()
    try:
        drive(engine, bridge, hz=fps, max_chunk=MAX_CHUNK)
    finally:
        bridge.stop()
        if engine.env is not env:  # a load by re-execution put a fresh environment in its place
            _close(engine.env)
    book = engine.book
    say(f"{env_id} ended ({engine.gone or 'stopped'}) after {book.steps} steps, {book.episode} episodes")
    return 0


def _closed(late: Late) -> None:
    late.engine.gone = "closed by the agent"


def _renderings(engine: Any, env: Any, modes: list[str], rgb: Any) -> list[str]:
    """What the environment shows (a picture, a text), each one it lacks said once."""
    from ._make import PICTURE_MODE

    notes = []
    mode = getattr(env, "render_mode", None)
    if mode != PICTURE_MODE and not (mode is not None and mode not in modes):  # (an own mode may still give pictures)
        notes.append(f"no picture: the environment renders {mode or 'nothing'}, not rgb_array (its render modes: "
                     f"{', '.join(modes) or 'none'})")
    else:
        try:
            engine.pictures = rgb(env.render()) is not None
            if not engine.pictures:
                notes.append(f"no picture: its {mode} rendering is not an RGB image")
        except Exception as exc:  # noqa: BLE001 - a rendering that needs what is missing (pygame, a display)
            why = " ".join(str(exc).split())[:300]
            notes.append(f"no picture: its {mode} rendering failed: {type(exc).__name__}: {why}")
    if engine.shown()["text"] is None:
        notes.append("no text picture (ui.text): the environment has no text rendering the wrapper knows "
                     "(ansi, or its family's)")
    return notes


def _remake(env_id: str, kwargs: dict[str, Any]) -> Any:
    from ._make import make

    return make(env_id, kwargs)


def _packages(env: Any) -> dict[str, str]:
    """The versions a snapshot must match: Gymnasium's and the environment's package's."""
    from importlib import metadata

    from ._make import provider_of

    names = ["gymnasium"]
    spec = getattr(env, "spec", None)
    if spec is not None:
        provider = provider_of(spec)
        if provider not in names:
            names.append(provider)
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def _json_kwargs(kwargs: dict[str, Any]) -> Any:
    import json

    return json.loads(json.dumps(kwargs, default=repr))


def _description(env_id: str, env: Any, family: Any) -> str:
    from . import _spaces

    unwrapped = env.unwrapped
    names: list[str] | None = family.action_names() if _spaces.kind(env.action_space) == "Discrete" else None
    actions = f"its actions: {', '.join(names[:DESCRIBED_ACTIONS])}{', ...' if len(names) > DESCRIBED_ACTIONS else ''}" \
        if names else f"its action space: {str(env.action_space)[:200]}"
    kind = f"{family.label}: {type(unwrapped).__name__}"
    return str(f"{env_id}: a Gymnasium environment ({kind}) run unmodified by game-bridge-mcp's gym wrapper. "
            "One simulation frame is one env.step with the held action. act {action, frames} takes an "
            "action for that many steps (on a paused game it runs them at once and answers with their reward); "
            f"{actions}. reset {{seed}} starts an episode. /state game: episode, step, reward, totalReward, terminated, "
            "truncated, lives, info, observation; ui.text shows the screen as text where it has one, screenshots "
            "the rgb_array rendering. Events: episode:start, episode:end, life:lost, reward." + str(family.description()))


def _on_signals(bridge: Any) -> None:
    def handler(_signum: int, _frame: Any) -> None:
        bridge.request_stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)


def _check_init(opts: Options) -> None:
    check_env_id(opts.env_id)


CLI = Cli(row=ROW, usage=USAGE, command_line=COMMAND_LINE, declaration=declaration, run=run,
          target=lambda opts: opts.env_id, check_init=_check_init, verb="serves")


def main(argv: Sequence[str] | None = None) -> int:
    return wrapper_main(CLI, argv)


__all__ = ["CLI", "UsageError", "main", "run"]
