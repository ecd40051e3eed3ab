"""A wrapper's command line: the options every wrapper reads alike (``--port``, ``--paused``,
``--init``, ``--force``, ``--help``, and ``--seed``, ``--size`` where a wrapper takes them),
the reading of a command line up to the game's name, and the ``gamebridge.json`` that
``--init`` writes. Pure, but for :func:`write_init`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from ...contract import ENV_DEBUG_PORT, ENV_SEED

DECLARATION = "gamebridge.json"
#: The largest ``--size`` side.
MAX_SIDE = 8192


class UsageError(Exception):
    """A command line the wrapper cannot run (the message says what is wrong)."""


@dataclass
class Options:
    """What every wrapper's options hold; a wrapper's own Options add its fields."""

    port: int = 0
    paused: bool = False
    init: bool = False
    force: bool = False
    help: bool = False


O = TypeVar("O", bound=Options)  # noqa: E741 - the options' type variable
#: An option that takes a value: it checks the value and sets it on the options.
Setter = Callable[[Any, str], None]
#: What reads the game's name (and, for some wrappers, the game's own words after it): it
#: is given every word from the first one that is not a wrapper's option, and the options.
TargetReader = Callable[[Any, list[str]], None]


def port_number(value: str, source: str) -> int:
    text = value.strip()
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise UsageError(f"{source} expects a port number 0-65535, got {value!r}")
    return int(text)


def size(value: str, source: str = "--size", max_side: int = MAX_SIDE) -> tuple[int, int]:
    width, _x, height = value.lower().partition("x")
    if not (width.isdigit() and height.isdigit() and 1 <= int(width) <= max_side and 1 <= int(height) <= max_side):
        raise UsageError(f"{source} expects WIDTHxHEIGHT, each 1 to {max_side} (e.g. 800x600), got {value!r}")
    return int(width), int(height)


#: ``--seed``'s bound (a seed is a whole number 0 or more, as random number generators take).
MAX_SEED = 2**63 - 1


def seed(value: str, source: str = "--seed") -> int:
    text = value.strip()
    if not text.isdigit() or int(text) > MAX_SEED:
        raise UsageError(f"{source} expects a whole number from 0 to {MAX_SEED}, got {value!r}")
    return int(text)


def launch_seed(given: int | None, environ: Mapping[str, str] | None = None) -> int:
    """The seed a wrapper uses: ``--seed``, else ``GAME_BRIDGE_SEED``, else 0 (a launch is
    the same as the last one with the same inputs unless told otherwise); UsageError for a
    malformed ``GAME_BRIDGE_SEED``."""
    if given is not None:
        return given
    env = os.environ if environ is None else environ
    text = env.get(ENV_SEED, "").strip()
    return seed(text, ENV_SEED) if text else 0


#: The switches every wrapper reads (``--port`` is the one valued option they all read).
COMMON_SWITCHES = ("--paused", "--init", "--force")


def _set_port(opts: Any, value: str) -> None:
    opts.port = port_number(value, "--port")


def _set_size(opts: Any, value: str) -> None:
    opts.size = size(value)


def _set_seed(opts: Any, value: str) -> None:
    opts.seed = seed(value)


#: Shared options a wrapper may take, meaning the same in each (its Options then has the field).
SIZE: Mapping[str, Setter] = {"--size": _set_size}
SEED: Mapping[str, Setter] = {"--seed": _set_seed}


@dataclass(frozen=True)
class CommandLine(Generic[O]):
    """One wrapper's command line: its Options type, its switches and valued options beside
    the common ones, and what reads the game's name. :meth:`parse` reads options until the
    first word that is not one, then hands the rest to ``target`` (which also sees ``--``
    and a wrapper's own way of naming the game, such as ``-m MODULE``)."""

    #: Makes the wrapper's Options, at their defaults.
    options: Callable[[], O]
    target: TargetReader
    #: The usage error when no game is named.
    missing: str
    #: Its switches beside ``--paused``, ``--init`` and ``--force`` (``--window`` sets ``window``).
    switches: tuple[str, ...] = ()
    #: Its options that take a value, beside ``--port`` (``--size`` or ``--size=WxH``).
    valued: Mapping[str, Setter] = field(default_factory=dict)

    def all_valued(self) -> dict[str, Setter]:
        return {"--port": _set_port, **self.valued}

    def all_switches(self) -> tuple[str, ...]:
        return COMMON_SWITCHES + self.switches

    def parse(self, argv: Sequence[str], environ: Mapping[str, str] | None = None) -> O:
        env = os.environ if environ is None else environ
        opts = self.options()
        if env.get(ENV_DEBUG_PORT, "").strip():
            opts.port = port_number(env[ENV_DEBUG_PORT], ENV_DEBUG_PORT)
        valued, switches = self.all_valued(), self.all_switches()
        args = list(argv)
        index = 0
        while index < len(args):
            arg = args[index]
            name, eq, inline = arg.partition("=")
            if arg in ("-h", "--help"):
                opts.help = True
                return opts
            if name in valued:
                if eq:
                    value = inline
                elif index + 1 < len(args):
                    index += 1
                    value = args[index]
                else:
                    raise UsageError(f"{name} needs a value")
                valued[name](opts, value)
            elif arg in switches:
                setattr(opts, arg[2:].replace("-", "_"), True)
            else:
                self.target(opts, args[index:])
                return opts
            index += 1
        raise UsageError(self.missing)


def declaration(module: str, name: str, argv: Sequence[str], *, ready_timeout_ms: int) -> dict[str, Any]:
    """The launch declaration that runs a game through the wrapper ``module`` with the
    bridge's own interpreter (``{python}``) on the port the bridge gives (``{port}``):
    ``argv`` is the rest of its command line. No path of this machine but what ``argv``
    names, so it can be committed (the launcher puts the bridge's package on the
    wrapper's path)."""
    launch: dict[str, Any] = {"argv": ["{python}", "-m", module, "--port", "{port}", *argv], "cwd": ".",
                              "readyTimeoutMs": ready_timeout_ms}
    return {"name": name, "launch": launch}


def write_init(doc: Mapping[str, Any], directory: Path, *, force: bool) -> Path:
    path = directory / DECLARATION
    if path.exists() and not force:
        raise FileExistsError(f"{path} already exists; pass --force to replace it")
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path
