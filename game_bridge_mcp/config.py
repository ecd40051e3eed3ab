"""Options: CLI options, then the environment, then defaults; and port resolution. Pure over
``argv`` and an ``environ`` mapping."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ._version import __version__
from .errors import BridgeError, BridgeUsageError
from .jsonio import as_int

DEFAULT_PORT = 7777
DEFAULT_SCAN_RANGE = "7777,7800-7810"
DEFAULT_TIMEOUT_MS = 5000
MAX_PORTS_IN_SPEC = 4096
#: ``--http``: the address served when only a port is given.
DEFAULT_HTTP_HOST = "127.0.0.1"
#: ``--session-idle``: minutes an HTTP session may go without a request before it ends.
DEFAULT_SESSION_IDLE_MIN = 30.0
#: ``--max-sessions``: HTTP sessions open at once.
DEFAULT_MAX_SESSIONS = 16
MAX_SESSIONS_LIMIT = 1024


def parse_port_spec(spec: str) -> tuple[int, ...]:
    """``"7777,7800-7810"`` -> ports in order, de-duplicated. Raises BridgeUsageError
    quoting the spec when it is not a list of ports and ranges within 1-65535."""
    text = str(spec).strip()
    ports: dict[int, None] = {}
    if not text:
        raise BridgeUsageError(f"Port spec {spec!r} is empty. Use single ports, ranges and lists, e.g. '7777,7800-7810'.")
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        low_text, dash, high_text = part.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise BridgeUsageError(
                f"Port spec {spec!r} is not valid: {part!r} is not a port or a range. "
                "Use single ports, ranges and lists, e.g. '7777,7800-7810'.") from None
        if not (1 <= low <= 65535 and 1 <= high <= 65535) or high < low:
            raise BridgeUsageError(
                f"Port spec {spec!r} is not valid: {part!r} is outside 1-65535 or runs backwards.")
        if len(ports) + (high - low + 1) > MAX_PORTS_IN_SPEC:
            raise BridgeUsageError(
                f"Port spec {spec!r} names more than {MAX_PORTS_IN_SPEC} ports; narrow it.")
        for port in range(low, high + 1):
            ports[port] = None
    if not ports:
        raise BridgeUsageError(f"Port spec {spec!r} names no ports.")
    return tuple(ports)


def port_number(value: Any, *, text: bool = True, floats: bool = True) -> int | None:
    """The one rule for a TCP port (1-65535), wherever it comes from: an int, a whole
    float unless ``floats`` is False, a digit string when ``text``; None otherwise.
    (getaddrinfo wraps 70000 to 4464: a bad port must never reach a socket.)"""
    if text and isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    number = as_int(value, floats=floats)
    return number if number is not None and 1 <= number <= 65535 else None


def parse_http_address(text: str, *, what: str = "--http") -> tuple[str, int]:
    """``[HOST:]PORT`` -> (host, port); an IPv6 host in brackets (``[::1]:8765``). Port 0
    lets the system choose a free one (the server says which on stderr)."""
    value = str(text).strip()
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = "", value
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise BridgeUsageError(f"{what} {text!r}: write an IPv6 address in brackets, e.g. [::1]:8765.")
    port_text = port_text.strip()
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BridgeUsageError(f"{what} {text!r} is not [HOST:]PORT: the port must be 0-65535 (0: any free port), "
                               "e.g. 8765 or 127.0.0.1:8765.")
    if any(c.isspace() or c in "/?#@" for c in host):
        raise BridgeUsageError(f"{what} {text!r}: {host!r} is not a host name or address.")
    return host or DEFAULT_HTTP_HOST, int(port_text)


def check_port(value: Any, *, what: str = "port") -> int:
    """A port number from a tool argument or option (see :func:`port_number`), or a
    BridgeUsageError saying what is wrong with it."""
    number = port_number(value)
    if number is None:
        raise BridgeUsageError(f"{what} must be a number between 1 and 65535, not {value!r}.")
    return number


@dataclass
class Config:
    """What the bridge was told: options, environment and the project's declaration."""

    port: int | None = None
    scan_range: tuple[int, ...] = field(default_factory=lambda: parse_port_spec(DEFAULT_SCAN_RANGE))
    scan: bool = True
    registry: bool = True
    registry_dir: Path | None = None
    config_file: Path | None = None
    launch_hint: str | None = None
    manifest_file: Path | None = None
    eager: bool = False
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    #: Where to record a trace of every tool call (``--record``, ``GAME_BRIDGE_RECORD``).
    record: Path | None = None
    #: ``--http [HOST:]PORT`` (``GAME_BRIDGE_HTTP``): serve MCP over streamable HTTP there, not stdio.
    http: tuple[str, int] | None = None
    #: ``--session-idle`` in seconds: an HTTP session without a request this long ends.
    session_idle_s: float = DEFAULT_SESSION_IDLE_MIN * 60
    #: ``--max-sessions``: HTTP sessions open at once; one more is answered 503.
    max_sessions: int = DEFAULT_MAX_SESSIONS
    #: ``--allow-host``: more names a client may reach the HTTP server by (``Host``, ``Origin``).
    allow_hosts: tuple[str, ...] = ()
    #: The project's launch declaration (a ``launch.declaration.LaunchDeclaration``), set by
    #: ``apply_project_config``; typed loosely so this leaf needs nothing above it.
    declaration: object | None = None
    #: The declaration's command line with ``{port}`` left in, shown when a port is dead.
    declaration_hint: str | None = None
    #: Why the declaration found by walking up could not be read (reported on launch).
    declaration_error: BridgeError | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def default_port(self) -> int:
        """The port for a call that names none: ``--port``, then ``GAME_BRIDGE_PORT``, then 7777."""
        if self.port is not None:
            return self.port
        env = self.environ.get("GAME_BRIDGE_PORT", "").strip()
        if env:
            return check_port(env, what="GAME_BRIDGE_PORT")
        return DEFAULT_PORT

    def resolve_port(self, explicit: Any = None) -> int:
        """The documented port order (docs/cli.md): the call's own ``port``, ``--port``, ``GAME_BRIDGE_PORT``, 7777."""
        if explicit is not None:
            return check_port(explicit)
        return self.default_port()

    def effective_launch_hint(self) -> str | None:
        """The command shown when a port is dead: ``--launch-hint``, else the declaration's
        (``hint()``, rendered once when the declaration is read)."""
        return self.launch_hint or self.declaration_hint


LOG_FORMAT = "game-bridge-mcp: %(levelname)s %(name)s: %(message)s"


def configure_logging(environ: Mapping[str, str] | None = None) -> None:
    """The one logging set-up: stderr (never stdout, the protocol), at ``GAME_BRIDGE_LOG``
    (default WARNING). Leaves a host application's own handlers alone; an unknown level
    name falls back to WARNING with a warning, never a crash."""
    root = logging.getLogger()
    if root.handlers:
        return
    name = (os.environ if environ is None else environ).get("GAME_BRIDGE_LOG", "").strip().upper() or "WARNING"
    level = logging.getLevelName(name)
    logging.basicConfig(stream=sys.stderr, level=level if isinstance(level, int) else logging.WARNING,
                        format=LOG_FORMAT)
    if not isinstance(level, int):
        logging.getLogger("game_bridge_mcp").warning(
            "GAME_BRIDGE_LOG=%r is not a log level (use DEBUG, INFO, WARNING or ERROR); using WARNING", name)


class OptionError(BridgeUsageError):
    """A mistake on a command line: an unknown option, a missing or bad value."""


class OptionParser(argparse.ArgumentParser):
    """The one argument-parser base for the bridge's commands: a mistake raises
    :class:`OptionError` (exit code 2) instead of argparse printing and exiting, so each
    command reports it in its own words."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise OptionError(f"{message}. Run with --help to see the options.")


def command_name(argv0: str | None = None, executable: str | None = None) -> str:
    """How a hint names this program so that it runs where the user is: the installed command
    ``game-bridge-mcp``, or ``python3 -m game_bridge_mcp`` (this interpreter's name) when the
    program was started as a module, as a vendored copy, which has no command, always is."""
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    if name in ("__main__.py", "-m"):
        return f"{Path(executable or sys.executable or 'python3').name} -m {__package__}"
    return "game-bridge-mcp"


def build_parser(prog: str = "game-bridge-mcp", *, usage: str | None = None) -> argparse.ArgumentParser:
    """The server's options. The ``call`` subcommand takes the same ones. ``usage``
    replaces argparse's generated usage line (the CLI's one usage block)."""
    p = OptionParser(prog=prog, usage=usage, add_help=False, description=(
        "An MCP server (stdio, or streamable HTTP with --http) that lets an agent launch, drive and read games that serve "
        "the game-bridge HTTP contract on localhost."))
    p.add_argument("-p", "--port", help="Default port for tools that do not name one (default 7777; env GAME_BRIDGE_PORT)")
    p.add_argument("--scan-range", metavar="SPEC", help=f"Ports list_instances sweeps (default {DEFAULT_SCAN_RANGE}; env GAME_BRIDGE_SCAN_RANGE or GAME_BRIDGE_SCAN)")
    p.add_argument("--no-scan", action="store_true", help="Discover only via the instance registry")
    p.add_argument("--no-registry", action="store_true", help="Discover only by scanning ports")
    p.add_argument("--registry-dir", metavar="DIR", help="Where instance entries live (default ~/.game-bridge/instances; env GAME_BRIDGE_INSTANCES, GAME_BRIDGE_HOME)")
    p.add_argument("--config", metavar="FILE", help="Project launch declaration (default: nearest gamebridge.json; env GAME_BRIDGE_CONFIG)")
    p.add_argument("--launch-hint", metavar="CMD", help="Command shown when a port is dead; {port} is substituted (env GAME_BRIDGE_LAUNCH_HINT or GAME_BRIDGE_LAUNCH)")
    p.add_argument("--manifest", metavar="FILE", help="Tool manifest for games that do not serve GET /tools (env GAME_BRIDGE_MANIFEST)")
    p.add_argument("--eager", action="store_true", help="Advertise every game tool flatly, for clients that cannot discover")
    p.add_argument("--timeout", metavar="MS", help=f"HTTP and command timeout in ms (default {DEFAULT_TIMEOUT_MS})")
    p.add_argument("--record", metavar="FILE", help="Append a trace of every tool call to FILE (JSON Lines), for game-bridge-mcp replay (env GAME_BRIDGE_RECORD)")
    p.add_argument("--http", metavar="[HOST:]PORT", help=f"Serve MCP over streamable HTTP at http://HOST:PORT/mcp instead of stdio (host default {DEFAULT_HTTP_HOST}; a bearer token is required, see GAME_BRIDGE_TOKEN; env GAME_BRIDGE_HTTP)")
    p.add_argument("--session-idle", metavar="MIN", help=f"With --http: minutes an MCP session may go without a request before it ends and its launched games are stopped (default {DEFAULT_SESSION_IDLE_MIN:g}; env GAME_BRIDGE_SESSION_IDLE)")
    p.add_argument("--max-sessions", metavar="N", help=f"With --http: MCP sessions open at once; one more is answered 503 (default {DEFAULT_MAX_SESSIONS}; env GAME_BRIDGE_MAX_SESSIONS)")
    p.add_argument("--allow-host", metavar="NAMES", help="With --http: more host names clients reach this machine by (comma-separated; e.g. host.docker.internal), accepted in Host and Origin besides the bound address (env GAME_BRIDGE_ALLOW_HOSTS)")
    p.add_argument("-h", "--help", action="store_true", help="Show this help and exit")
    p.add_argument("-v", "--version", action="store_true", help="Show the version and exit")
    return p


@dataclass
class ParsedCli:
    """The result of ``parse_cli``: the config, plus whether help or version was asked for."""

    config: Config
    help: bool = False
    version: bool = False


def _env(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def _session_idle_s(text: str) -> float:
    """``--session-idle`` minutes (a fraction allowed, up to a week) in seconds."""
    try:
        minutes = float(str(text).strip())
    except ValueError:
        minutes = float("nan")
    if not 0 < minutes <= 7 * 24 * 60:  # also false for NaN
        raise BridgeUsageError(f"--session-idle must be a number of minutes above 0 and at most 10080 (a week), "
                               f"not {text!r}.")
    return minutes * 60


def parse_cli(argv: Sequence[str], environ: Mapping[str, str] | None = None,
              *, prog: str = "game-bridge-mcp") -> ParsedCli:
    """Options first, then the environment, then defaults. Raises BridgeUsageError."""
    env = dict(os.environ if environ is None else environ)
    parser = build_parser(prog)
    ns = parser.parse_args(list(argv))
    cfg = Config(environ=env)
    if ns.port is not None:
        cfg.port = check_port(ns.port, what="--port")
    elif _env(env, "GAME_BRIDGE_PORT") is not None:
        check_port(_env(env, "GAME_BRIDGE_PORT"), what="GAME_BRIDGE_PORT")  # fail early on a bad value
    scan_spec = ns.scan_range or _env(env, "GAME_BRIDGE_SCAN_RANGE", "GAME_BRIDGE_SCAN")
    if scan_spec is not None:
        cfg.scan_range = parse_port_spec(scan_spec)
    cfg.scan = not ns.no_scan
    cfg.registry = not ns.no_registry
    if ns.registry_dir:
        cfg.registry_dir = Path(ns.registry_dir).expanduser()
    config_file = ns.config or _env(env, "GAME_BRIDGE_CONFIG")
    if config_file:
        cfg.config_file = Path(config_file).expanduser()
    cfg.launch_hint = ns.launch_hint or _env(env, "GAME_BRIDGE_LAUNCH_HINT", "GAME_BRIDGE_LAUNCH")
    manifest = ns.manifest or _env(env, "GAME_BRIDGE_MANIFEST")
    if manifest:
        cfg.manifest_file = Path(manifest).expanduser()
    cfg.eager = bool(ns.eager)
    record = ns.record or _env(env, "GAME_BRIDGE_RECORD")
    if record:
        cfg.record = Path(record).expanduser()
    http = ns.http or _env(env, "GAME_BRIDGE_HTTP")
    if http:
        cfg.http = parse_http_address(http, what="--http" if ns.http else "GAME_BRIDGE_HTTP")
    idle = ns.session_idle or _env(env, "GAME_BRIDGE_SESSION_IDLE")
    if idle is not None:
        cfg.session_idle_s = _session_idle_s(idle)
    sessions = ns.max_sessions or _env(env, "GAME_BRIDGE_MAX_SESSIONS")
    if sessions is not None:
        text = str(sessions).strip()
        if not text.isdigit() or not 1 <= int(text) <= MAX_SESSIONS_LIMIT:
            raise BridgeUsageError(f"--max-sessions must be a whole number between 1 and {MAX_SESSIONS_LIMIT}, not {sessions!r}.")
        cfg.max_sessions = int(text)
    allow = ns.allow_host or _env(env, "GAME_BRIDGE_ALLOW_HOSTS")
    if allow:
        names = tuple(n.strip() for n in allow.split(",") if n.strip())
        bad = [n for n in names if any(c.isspace() or c in "/?#@[]" for c in n) or n.count(":") == 1]
        if bad:
            raise BridgeUsageError(f"--allow-host takes host names or addresses without a port, comma-separated; "
                                   f"not {bad[0]!r}.")
        cfg.allow_hosts = names
    if ns.timeout is not None:
        try:
            cfg.timeout_ms = int(ns.timeout)
        except ValueError:
            raise BridgeUsageError(f"--timeout must be a number of milliseconds, not {ns.timeout!r}.") from None
        if not 1 <= cfg.timeout_ms <= 3_600_000:
            raise BridgeUsageError(f"--timeout must be between 1 and 3600000 ms, not {cfg.timeout_ms}.")
    return ParsedCli(config=cfg, help=bool(ns.help), version=bool(ns.version))


__all__ = ["Config", "ParsedCli", "command_name", "parse_cli", "parse_port_spec", "check_port", "port_number",
           "build_parser", "parse_http_address", "DEFAULT_PORT", "DEFAULT_SCAN_RANGE",
           "DEFAULT_TIMEOUT_MS", "__version__"]
