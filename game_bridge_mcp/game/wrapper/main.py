"""A wrapper's ``main``: its command line read, ``--help``, ``--init`` (the gamebridge.json
that launches the game through it) or the game run; usage errors exit 2 with the usage."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic

from ...config import command_name
from ...wrappers import Wrapper
from .options import O, CommandLine, UsageError, write_init


@dataclass(frozen=True)
class Cli(Generic[O]):
    """What ``main`` needs of one wrapper."""

    #: Its row in the table of wrappers (game_bridge_mcp/wrappers.py).
    row: Wrapper
    #: ``--help``'s text, and what a usage error is followed by.
    usage: str
    #: Its options and how it reads the game's name.
    command_line: CommandLine[O]
    #: The gamebridge.json ``--init`` writes.
    declaration: Callable[[O], Mapping[str, Any]]
    run: Callable[[O], int]
    #: What the game is called in ``--init``'s message.
    target: Callable[[O], str]
    #: Checks before ``--init`` writes (UsageError says why not).
    check_init: Callable[[O], None] = lambda _opts: None
    #: What ``launch_instance`` does to the game, in ``--init``'s message ("starts", "opens").
    verb: str = "starts"

    @property
    def prog(self) -> str:
        return f"game-bridge-mcp {self.row.name}"


def main(cli: Cli[Any], argv: Sequence[str] | None = None) -> int:
    try:
        opts = cli.command_line.parse(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        sys.stderr.write(f"{cli.prog}: {exc}\n{cli.usage}")
        return 2
    if opts.help:
        sys.stdout.write(cli.usage)
        return 0
    if opts.init:
        try:
            cli.check_init(opts)
            path = write_init(cli.declaration(opts), Path.cwd(), force=opts.force)
        except (UsageError, OSError) as exc:
            sys.stderr.write(f"{cli.prog} --init: {exc}\n")
            return 2
        sys.stdout.write(f"Wrote {path}.\nFrom this directory, launch_instance {cli.verb} {cli.target(opts)} through "
                         f"the wrapper; try:\n  {command_name()} call launch_instance --keep\n")
        return 0
    return cli.run(opts)
