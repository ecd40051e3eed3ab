"""The table of wrappers: each a row naming an engine whose unmodified games the bridge can
drive (``game-bridge-mcp NAME ...`` and ``python -m game_bridge_mcp.game.NAME ...``).

The command line reads it (its subcommands, usage and ``-v``); the wrapper itself is the
package ``game/NAME/``, built on what every wrapper shares (``game/wrapper/``). Adding a
wrapper is that package and one row here; ``tests/game/test_wrapper_family.py`` says what
else a row needs. Pure data: standard library only, imported by the CLI and the game side.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wrapper:
    """One wrapper, as the command line sees it."""

    #: The subcommand, and the package under game/ (``game_bridge_mcp.game.<name>``).
    name: str
    #: What follows ``game-bridge-mcp NAME`` in the usage line.
    usage: str
    #: What it does, for the usage line.
    summary: str
    #: Its options that take a value (``--port N``): reading its command line for ``-v``
    #: skips their values.
    valued: tuple[str, ...] = ("--port",)
    #: Options that name the game (``-m MODULE``): what follows is not the wrapper's.
    names_game: tuple[str, ...] = ()
    #: Whether the words after the game's name are the game's own (its ``-v`` is not ours).
    game_args: bool = False

    @property
    def module(self) -> str:
        """The module ``python -m`` runs, and the one ``--init`` writes into gamebridge.json."""
        return f"game_bridge_mcp.game.{self.name}"


WRAPPERS: tuple[Wrapper, ...] = (
    Wrapper("pygame", "[--init] (-m MODULE | SCRIPT) [ARGS]", "run a pygame game, drivable",
            names_game=("-m",), game_args=True, valued=("--port", "--seed")),
    Wrapper("browser", "[--init] (URL | FILE | DIR)", "open a web game in headless Chromium, drivable",
            valued=("--port", "--size", "--seed", "--date", "--browser", "--screenshot", "--load-timeout",
                    "--max-memory")),
    Wrapper("gym", "[--init] ENV_ID", "serve a Gymnasium environment (Atari, NetHack, MiniGrid, ...), drivable",
            valued=("--port", "--seed", "--size", "--make-kwargs", "--fps")),
)
NAMES: tuple[str, ...] = tuple(wrapper.name for wrapper in WRAPPERS)


def find(name: str) -> Wrapper | None:
    """The row named ``name``, or None."""
    return next((wrapper for wrapper in WRAPPERS if wrapper.name == name), None)



def named(name: str) -> Wrapper:
    """The row named ``name`` (a wrapper's own, which must be in the table)."""
    found = find(name)
    if found is None:
        raise LookupError(f"no wrapper {name!r} in game_bridge_mcp/wrappers.py's table")
    return found
