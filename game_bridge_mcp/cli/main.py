"""The command line: serve over stdio (the default), ``call`` a tool once, ``check`` a
game's conformance, run the ``demo``, or ``replay`` a recording. Exit codes come from the
error types (``errors.exit_codes_text``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .._version import __version__
from ..config import build_parser, command_name, configure_logging, parse_cli
from ..launch.declaration import apply_project_config
from ..launch.guarantees import warn_once
from ..launch.parent import become_subreaper, restore_sigchld
from ..terminal.text import terminal
from ..errors import BridgeError, BridgeUsageError, exit_codes_text
from ..wrappers import NAMES as WRAPPERS, find as find_wrapper

log = logging.getLogger("game_bridge_mcp")

#: The subcommands: these, and each wrapper in game_bridge_mcp/wrappers.py's table.
SUBCOMMANDS = ("call", "check", "demo", "replay", *WRAPPERS)
USAGE = """\
game-bridge-mcp [options]                 serve MCP over stdio (the default)
       game-bridge-mcp --http [HOST:]PORT [options]  serve MCP over streamable HTTP at /mcp
       game-bridge-mcp call TOOL [JSON] [options] run one tool and print its result
       game-bridge-mcp call --list                list the tools call can run
       game-bridge-mcp call --url URL [--token T] TOOL [JSON]  run one tool on a remote bridge
       game-bridge-mcp check (--port N | --launch)  check a game against the contract
       game-bridge-mcp demo [--init]              launch and play the bundled demo game
       game-bridge-mcp replay FILE (--port N | --launch)  replay a recorded session and compare
""" + "".join(f"       game-bridge-mcp {row.name} {row.usage}  {row.summary}\n"
              for row in map(find_wrapper, WRAPPERS) if row is not None)


def _load_project(config: Any, err: TextIO) -> None:
    """Read gamebridge.json; a broken one is reported when launching, not fatal at start."""
    apply_project_config(config, defer=True)
    if config.declaration_error is not None:
        err.write(f"game-bridge-mcp: warning: {config.declaration_error.render()}\n")


def serve(argv: Sequence[str], environ: dict[str, str] | None = None) -> int:
    parsed = parse_cli(argv, environ)
    if parsed.help:
        sys.stdout.write(build_parser(usage=USAGE).format_help() + ENVIRONMENT_HELP)
        return 0
    if parsed.version:
        sys.stdout.write(f"game-bridge-mcp {__version__}\n")
        return 0
    from ..mcp_server import transports  # the table of transports (no SDK until one serves)

    _load_project(parsed.config, sys.stderr)
    if sys.stdin.isatty() and transports.chosen(parsed.config).uses_stdio:
        sys.stderr.write(terminal_hint(command_name()))
    warn_once(sys.stderr)  # what cannot be guaranteed here (psutil missing), once
    try:
        return transports.serve(parsed.config)  # the transport the options choose (mcp_server/transports.py)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("mcp", "anyio", "pydantic", "starlette", "uvicorn"):
            raise BridgeUsageError(
                f"Serving MCP needs the MCP SDK, which is not installed here ({exc}). Install it with "
                "pip install 'mcp>=1.23,<3'. The call, check, demo and pygame commands work without it.") from None
        raise


ENVIRONMENT_HELP = """
environment:
  GAME_BRIDGE_PORT          default port (after --port)
  GAME_BRIDGE_SCAN_RANGE    ports list_instances sweeps (also GAME_BRIDGE_SCAN)
  GAME_BRIDGE_LAUNCH_HINT   command shown when a port is dead (also GAME_BRIDGE_LAUNCH)
  GAME_BRIDGE_MANIFEST      tool manifest file for games without GET /tools
  GAME_BRIDGE_CONFIG        launch declaration file
  GAME_BRIDGE_INSTANCES     instance registry directory
  GAME_BRIDGE_HOME          where the bridge writes: instances/, locks/, logs/, screenshots/
                            (default ~/.game-bridge)
  GAME_BRIDGE_LOG           log level on stderr (default WARNING)
  GAME_BRIDGE_RECORD        append every tool call to this trace file (as --record)
  GAME_BRIDGE_SCREENSHOTS   where get_screenshot keeps its copies
  GAME_BRIDGE_SDK_DISPATCH  1: every call through the SDK's dispatch (no fast path)
  GAME_BRIDGE_HTTP          serve over streamable HTTP at [HOST:]PORT (as --http)
  GAME_BRIDGE_TOKEN         with --http: the bearer token clients must send (at least 16
                            characters; required beyond loopback; generated otherwise);
                            for call --url: the token to send (as --token)
  GAME_BRIDGE_SESSION_IDLE  with --http: idle minutes before a session ends (as --session-idle)
  GAME_BRIDGE_MAX_SESSIONS  with --http: sessions open at once (as --max-sessions)
  GAME_BRIDGE_ALLOW_HOSTS   with --http: more host names clients may use (as --allow-host)

exit codes: """ + exit_codes_text() + "\n"

def terminal_hint(command: str) -> str:
    """Printed (on stderr) when the server is started by hand on a terminal; ``command`` is
    how the user started it (``config.command_name()``)."""
    return (f"game-bridge-mcp: this is an MCP server speaking JSON-RPC on stdin/stdout, now waiting "
            f"for a client. Connect one (claude mcp add game-bridge -- {command}), or try "
            f"'{command} demo' or '{command} call --list'. Ctrl-C quits.\n")


VERSION_FLAGS = frozenset({"-v", "--version"})


def asks_version(command: str, rest: Sequence[str]) -> bool:
    """Whether a subcommand's arguments ask for the version: ``-v`` and ``--version`` mean
    that for every command, as for the server (``--verbose`` is verbose, where there is
    one). For a wrapper that passes the words after the game's name to the game (pygame),
    only before that name: what follows it is the game's."""
    wrapper = find_wrapper(command)
    if wrapper is not None and wrapper.game_args:
        words = iter(rest)
        for word in words:
            if word in VERSION_FLAGS:
                return True
            if not word.startswith("-") or word in wrapper.names_game:
                return False
            if word in wrapper.valued:
                next(words, None)
        return False
    return bool(VERSION_FLAGS & set(rest))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None and not (args and args[0] in WRAPPERS):  # a wrapper becomes the game: its output is its own
        # As the process's entry point: everything printed (log lines included) may quote a
        # game or a trace, so one cleaner, installed before logging takes its stream.
        # Serving keeps stdout for the protocol.
        sys.stderr = terminal(sys.stderr)
        if args and args[0] in SUBCOMMANDS:
            sys.stdout = terminal(sys.stdout)
    configure_logging()
    restore_sigchld()  # before anything is launched (an inherited "ignore" loses exit codes and pids)
    if argv is None and not (args and args[0] in WRAPPERS):
        # As this process's own entry point (not embedded, as in a test runner), and not for
        # a game about to be exec'd: adopt what double-forks away from launched games.
        become_subreaper()
    try:
        if args and args[0] in SUBCOMMANDS:
            command, rest = args[0], args[1:]
            if asks_version(command, rest):
                sys.stdout.write(f"game-bridge-mcp {__version__}\n")
                return 0
            if command not in WRAPPERS and not {"-h", "--help"} & set(rest):
                warn_once(sys.stderr)  # each of these may launch a game: say what cannot be guaranteed
            if command == "call":
                from .call import main as call_main
                return call_main(rest)
            if command == "check":
                from ..check.runner import main as check_main
                return check_main(rest)
            if command == "replay":
                from .replay import main as replay_main
                return replay_main(rest)
            wrapper = find_wrapper(command)
            if wrapper is not None:
                from .wrapper import main as wrapper_main
                return wrapper_main(wrapper, rest)
            from .demo import main as demo_main
            return demo_main(rest)
        return serve(args)
    except BridgeError as exc:
        sys.stderr.write(exc.render() + "\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


__all__ = ["asks_version", "main", "serve", "USAGE"]
