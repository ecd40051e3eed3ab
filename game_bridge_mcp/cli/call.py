"""``game-bridge-mcp call TOOL [JSON]``: run one tool in-process, the way an agent would
(docs/cli.md, "From the shell: ``call``")."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from ..config import parse_cli
from ..launch.declaration import apply_project_config
from ..errors import ERROR_TYPES, BridgeError, BridgeUsageError, exit_codes_text
from ..core.screenshot import IMAGE_KEY, ImagePayload
from ..core.tools.table import BRIDGE_TOOLS, TOOL_NAMES, TOOLS, tool_def
from ..terminal.progress import Progress, TerminalProgress
from ..terminal.text import terminal

CALL_USAGE = """\
usage: game-bridge-mcp call TOOL [JSON] [--keep] [--out FILE] [server options]
       game-bridge-mcp call --url http://HOST:PORT/mcp [--token-file FILE | --token -] TOOL [JSON] [--out FILE]
       game-bridge-mcp call --list [--verbose]
       game-bridge-mcp call TOOL --help [--port N]

Runs TOOL once, in-process, and prints its result as JSON on stdout. TOOL is one of the
advertised tools or any tool call_tool can reach (bridge tools, composites, the game's tools);
JSON is its arguments object. Errors go to stderr; the exit code says which:
  """ + exit_codes_text() + """.
TOOL --help describes one tool and its arguments (a game's tool: read from the game on --port).
--keep lets launch_instance leave the game running after the command returns.
--record FILE (or GAME_BRIDGE_RECORD) appends the call to a trace for game-bridge-mcp replay.
--out FILE writes the image a tool returns (get_screenshot) to FILE.
--url URL runs TOOL on a bridge served with --http (possibly on another machine) in a
session of its own, which ends when the command returns (what it launched is stopped);
The token sent with it is read from --token-file FILE (its first line), from standard input
with --token - , else from GAME_BRIDGE_TOKEN, else for a loopback URL from the file the server
on that port wrote (--token T works too, but puts it where every user can see it: ps).
"""


def _out_file(argv: Sequence[str]) -> tuple[list[str], Path | None]:
    """``--out FILE`` (or ``--out=FILE``) taken out of ``argv``."""
    rest: list[str] = []
    out: Path | None = None
    args = list(argv)
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--out" or word.startswith("--out="):
            value = word[len("--out="):] if "=" in word else (args[i + 1] if i + 1 < len(args) else "")
            if not value:
                raise BridgeUsageError("--out needs a file name: --out shot.png")
            out = Path(value)
            i += 1 if "=" in word else 2
            continue
        rest.append(word)
        i += 1
    return rest, out


def _write_image(result: dict[str, Any], tool: str, path: Path | None) -> None:
    """Take the image out of a result; with --out, write it to ``path`` (whole or not at all)."""
    image = result.pop(IMAGE_KEY, None)
    if path is None:
        return
    if not isinstance(image, ImagePayload):
        raise BridgeUsageError(f"--out writes the image a tool returns, and '{tool}' returned none "
                               "(get_screenshot does).")
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        tmp.write_bytes(image.data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BridgeUsageError(f"--out could not write {path}: {exc.strerror or exc}. The screenshot itself "
                               f"was taken; its copy is {result.get('file')}.") from None
    result["out"] = str(path)


def _remote_options(argv: Sequence[str]) -> tuple[list[str], str | None, dict[str, str]]:
    """``--url URL`` and the token's source (``--token T``, ``--token -`` for standard input,
    ``--token-file FILE``; or ``--name=value``) taken out of ``argv``."""
    rest: list[str] = []
    found: dict[str, str] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        word = args[i]
        name = word.split("=", 1)[0]
        if name in ("--url", "--token", "--token-file"):
            value = word.split("=", 1)[1] if "=" in word else (args[i + 1] if i + 1 < len(args) else "")
            if not value.strip():
                raise BridgeUsageError(f"{name} needs a value, e.g. --url http://127.0.0.1:8765/mcp --token-file FILE")
            found[name] = value.strip()
            i += 1 if "=" in word else 2
            continue
        rest.append(word)
        i += 1
    if ("--token" in found or "--token-file" in found) and "--url" not in found:
        raise BridgeUsageError("--token and --token-file go with --url (the token of a bridge served with --http).")
    if "--token" in found and "--token-file" in found:
        raise BridgeUsageError("Give the token one way: --token-file FILE, --token - (standard input) or --token T.")
    url = found.pop("--url", None)
    return rest, url, found


#: What --token T on the command line costs (said once, on stderr).
TOKEN_IN_ARGV = ("game-bridge-mcp: warning: --token T puts the token in the command line, where every user of this "
                 "machine can read it (ps, /proc): prefer --token-file FILE, --token - (standard input) or "
                 "GAME_BRIDGE_TOKEN.\n")


def _given_token(source: dict[str, str], stdin: TextIO, err: TextIO) -> str | None:
    """The token from where ``call`` was told to read it (None: not given)."""
    if "--token-file" in source:
        path = Path(source["--token-file"]).expanduser()
        try:
            with path.open(encoding="utf-8") as handle:
                token = handle.readline().strip()
        except OSError as exc:
            raise BridgeUsageError(f"--token-file {path}: cannot be read ({exc.strerror or exc}).") from None
        if not token:
            raise BridgeUsageError(f"--token-file {path} is empty: its first line is the token.")
        return token
    if source.get("--token") == "-":
        token = stdin.readline().strip()
        if not token:
            raise BridgeUsageError("--token - reads the token from standard input, which gave none.")
        return token
    if "--token" in source:
        err.write(TOKEN_IN_ARGV)
        return source["--token"]
    return None


def _run_remote(url: str, token: str | None, tool: str, arguments: dict[str, Any],
                environ: Mapping[str, str]) -> dict[str, Any]:
    """One call on a bridge served over HTTP; its error becomes the error type it names."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise BridgeUsageError(f"--url {url!r} is not an http(s) URL; a bridge served with --http is at "
                               "http://HOST:PORT/mcp.")
    if token is None:
        token = (environ.get("GAME_BRIDGE_TOKEN") or "").strip() or None
    if token is None and parsed.hostname in ("127.0.0.1", "localhost", "::1") and parsed.port:
        from ..mcp_server.http.token import read_token_file
        token = read_token_file(environ, None, parsed.port)
    from ..mcp_server.http.remote import call_remote

    if tool not in TOOL_NAMES:
        tool, arguments = "call_tool", {"name": tool, "arguments": arguments}
    failed, value, images = call_remote(url, token, tool, arguments)
    if failed:
        raise RemoteError(str(value))
    result: dict[str, Any] = dict(value) if isinstance(value, dict) else {"result": value}
    if images:
        mime, data = images[0]
        result[IMAGE_KEY] = ImagePayload(data=data, mime=mime)
    return result


class RemoteError(BridgeError):
    """An error a remote bridge answered with: its text as it was, its exit code by the
    type it names."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
        name = text.split(":", 1)[0].strip()
        self.exit_code = next((e.exit_code for e in ERROR_TYPES if e.__name__ == name), 1)

    def render(self) -> str:
        return self.text


def _split(argv: Sequence[str]) -> tuple[list[str], list[str], bool, bool]:
    """Positional words (TOOL, JSON), server options, --keep, --list."""
    positional: list[str] = []
    options: list[str] = []
    keep = listing = False
    takes_value = {"-p", "--port", "--scan-range", "--registry-dir", "--config", "--launch-hint",
                   "--manifest", "--timeout", "--record"}
    args = list(argv)
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--keep":
            keep = True
        elif word == "--list":
            listing = True
        elif word in takes_value:
            options += args[i:i + 2]
            i += 1
        elif word.startswith("-") and not (positional and len(positional) == 1 and word.lstrip("-")[:1].isdigit()):
            options.append(word)
        else:
            positional.append(word)
        i += 1
    return positional, options, keep, listing


def _purpose(description: str) -> str:
    """A description's first sentence: what the tool is for, in one line."""
    first = description.split(". ")[0].strip().rstrip(".")
    if len(first) <= 96:
        return first
    cut = max(first.rfind(", ", 0, 96), first.rfind(": ", 0, 96))
    return (first[:cut] if cut > 40 else first[:first.rfind(" ", 0, 93)]) + " ..."


def _arguments(schema: Mapping[str, Any]) -> list[str]:
    """One line per argument of a JSON Schema: name, type, required, range or choices, text."""
    props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    required = set(schema.get("required") or [])
    lines = []
    for name, spec in (props or {}).items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind = spec.get("type", "any")
        facts = [kind if isinstance(kind, str) else "/".join(map(str, kind))]
        if name in required:
            facts.append("required")
        if "minimum" in spec or "maximum" in spec:
            facts.append(f"{spec.get('minimum', '')}..{spec.get('maximum', '')}")
        if isinstance(spec.get("enum"), list):
            facts.append("one of " + ", ".join(json.dumps(v) for v in spec["enum"][:20]))
        text = str(spec.get("description") or "")
        lines.append(f"    {name} ({'; '.join(facts)})" + (f": {text}" if text else ""))
    return lines or ["    (no arguments)"]


def _describe(out: TextIO, name: str, title: str, description: str, schema: Mapping[str, Any]) -> None:
    out.write(f"{name}: {title}\n" if title else f"{name}\n")
    out.write(textwrap.fill(description, width=88, initial_indent="  ", subsequent_indent="  ") + "\n")
    out.write("  arguments:\n" + "\n".join(_arguments(schema)) + "\n")


def _list(out: TextIO, *, verbose: bool) -> int:
    for heading, tools in (("Tools (game-bridge-mcp call TOOL [JSON]):", TOOLS),
                           ("Bridge toolset (run through call_tool; also callable directly here):", BRIDGE_TOOLS)):
        out.write(heading + "\n")
        for tool in tools:
            if verbose:
                _describe(out, tool.name, tool.title, tool.description, tool.input_schema)
            else:
                out.write(f"  {tool.name:18} {_purpose(tool.description)}\n")
    out.write("Any other name is run through call_tool on the game (its manifest, then passthrough); "
              "'call NAME --help --port N' describes a game's tool.\n")
    return 0


def _tool_help(out: TextIO, name: str, options: list[str], environ: dict[str, str] | None) -> int:
    """``call TOOL --help``: the tool's full description and arguments. A name that is not
    the bridge's is looked up in the game's manifest (on --port, or the default port)."""
    tool = tool_def(name)
    if tool is not None:
        _describe(out, tool.name, tool.title, tool.description, tool.input_schema)
        return 0
    from ..core.bridge import Bridge

    config = parse_cli([o for o in options if o not in ("-h", "--help")], environ, prog="game-bridge-mcp call").config
    bridge = Bridge(config)
    try:
        port = config.default_port()
        spec = bridge.manifest(port).find(name)
    finally:
        bridge.shutdown()
    if spec is None:
        raise BridgeUsageError(f"'{name}' is neither a bridge tool nor in the manifest of the game on port {port}. "
                               "Run 'game-bridge-mcp call --list', or name the game's port with --port N.")
    _describe(out, spec.name, f"a tool of the game on port {port}, toolset {spec.toolset}",
              spec.description, spec.input_schema)
    return 0


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         environ: dict[str, str] | None = None) -> int:
    out = terminal(stdout or sys.stdout)  # what it prints quotes games and traces: cleaned for a terminal
    err = terminal(stderr or sys.stderr)
    try:
        argv, out_path = _out_file(argv)
        argv, url, token_source = _remote_options(argv)
        token = _given_token(token_source, sys.stdin, err)
    except BridgeError as exc:
        err.write(exc.render() + "\n")
        return exc.exit_code
    positional, options, keep, listing = _split(argv)
    wants_help = "-h" in options or "--help" in options
    if listing:
        return _list(out, verbose="--verbose" in options)
    if wants_help and len(positional) == 1:
        try:
            return _tool_help(out, positional[0], options, environ)
        except BridgeError as exc:
            err.write(exc.render() + "\n")
            return exc.exit_code
    if wants_help:
        out.write(CALL_USAGE)
        return 0
    try:
        if not positional or len(positional) > 2:
            raise BridgeUsageError("call needs a tool name and at most one JSON object of arguments. "
                                   "Run 'game-bridge-mcp call --list' to see the tools.")
        tool = positional[0]
        arguments: Any = {}
        if len(positional) == 2:
            try:
                arguments = json.loads(positional[1])
            except json.JSONDecodeError as exc:
                raise BridgeUsageError(f"The arguments are not valid JSON ({exc.msg} at column {exc.colno}): "
                                       f"{positional[1][:200]!r}. Quote them for your shell, e.g. '{{\"x\": 1}}'.") from None
            if not isinstance(arguments, dict):
                raise BridgeUsageError("The arguments must be a JSON object, e.g. '{\"x\": 1}'.")
        if url is not None:
            result = _run_remote(url, token, tool, arguments, os.environ if environ is None else environ)
            _write_image(result, tool, out_path)
            out.write(json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n")
            return 0
        parsed = parse_cli(options, environ, prog="game-bridge-mcp call")
        config = parsed.config
        if tool == "launch_instance":
            if not keep:
                raise BridgeUsageError(
                    "call launch_instance would leave a game running after this command returns, with "
                    "nothing left to reap it or read its output. Run it through the MCP server (which "
                    "reaps what it launched), or pass --keep to start it deliberately and end it later "
                    "with: game-bridge-mcp call close --port <port>.")
        apply_project_config(config, defer=tool != "launch_instance")
        shown = TerminalProgress(err, f"game-bridge-mcp call {tool}")  # a launch or a long wait, on a terminal
        try:
            result = _run(config, tool, arguments, keep=keep, progress=shown.callback)
        finally:
            shown.clear()
        _write_image(result, tool, out_path)
    except BridgeError as exc:
        err.write(exc.render() + "\n")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - report, do not dump a traceback on the user
        err.write(f"InternalError: {type(exc).__name__}: {exc}\n")
        return 1
    out.write(json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n")
    return 0


def _run(config: Any, tool: str, arguments: dict[str, Any], *, keep: bool,
         progress: Progress | None = None) -> dict[str, Any]:
    from ..core.bridge import Bridge

    launcher = None
    if keep:
        from ..launch.launcher import Launcher
        launcher = Launcher(config, detached=True)
    bridge = Bridge(config, launcher=launcher)
    if tool not in TOOL_NAMES:
        tool, arguments = "call_tool", {"name": tool, "arguments": arguments}
    try:
        if config.record is not None:  # --record FILE / GAME_BRIDGE_RECORD: append this call
            from ..trace.recorder import Recorder
            recorder = Recorder(config.record, bridge, recorder="call")
            try:
                result: dict[str, Any] = recorder.call(tool, arguments,
                                                       lambda: bridge.run_tool(tool, arguments, progress=progress))
                return result
            finally:
                recorder.writer.close()
        return bridge.run_tool(tool, arguments, progress=progress)
    finally:
        if not keep:
            bridge.shutdown()

