"""``game-bridge-mcp demo``: the bundled demo game launched and played with the advertised tools in a
temporary directory; ``--init`` writes its ``gamebridge.json`` here instead."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from ..config import OptionError, OptionParser, command_name
from ..errors import BridgeError
from ..terminal.progress import TerminalProgress
from ..terminal.text import terminal

DECLARATION = "gamebridge.json"
#: Where the game launched from ``demo --init``'s declaration writes its screenshots:
#: beside the declaration, in the project (relative to its cwd), not a shared temp dir.
SCREENSHOTS = "screenshots"


def build_parser() -> argparse.ArgumentParser:
    parser = OptionParser(prog="game-bridge-mcp demo", add_help=False,
                     description="Launch the bundled demo game through the bridge, play a short round "
                                 "and print what happened; or --init a gamebridge.json for it here.")
    parser.add_argument("--init", action="store_true",
                        help=f"write a {DECLARATION} for the demo game into the current directory and exit "
                             f"(the game it launches keeps its screenshots in ./{SCREENSHOTS})")
    parser.add_argument("--force", action="store_true", help=f"with --init, replace an existing {DECLARATION}")
    parser.add_argument("--seed", type=int, default=7, help="the round's seed (default 7)")
    parser.add_argument("--drops", type=int, default=8, help="how many fruit to drop (default 8)")
    parser.add_argument("--hz", type=float, default=60.0, help="the demo game's frame rate (default 60)")
    parser.add_argument("--port", type=int, default=None,
                        help="launch on this port (default: the launcher picks a free one)")
    parser.add_argument("-h", "--help", action="store_true", help="show this help")
    return parser


def declaration(*, hz: float = 60.0, screenshot_dir: Path | None = None) -> dict[str, Any]:
    """The launch declaration for the demo game: run by the bridge's own interpreter
    (``{python}``), with no path of this machine in it, so it can be committed (the
    launcher puts the bridge's package on the game's path)."""
    argv = ["{python}", "-m", "game_bridge_mcp.game.demo", "--port", "{port}"]
    if hz != 60.0:
        argv += ["--hz", f"{hz:g}"]
    if screenshot_dir is not None:
        argv += ["--screenshot-dir", str(screenshot_dir)]
    launch: dict[str, Any] = {
        "argv": argv,
        "cwd": ".",
        "readyTimeoutMs": 30000,
    }
    return {"name": "Fruit Merge (game-bridge-mcp demo)", "launch": launch}


def write_declaration(directory: Path, *, hz: float = 60.0, force: bool = False,
                      screenshot_dir: Path | None = None) -> Path:
    path = directory / DECLARATION
    if path.exists() and not force:
        raise FileExistsError(f"{path} already exists; pass --force to replace it")
    doc = declaration(hz=hz, screenshot_dir=screenshot_dir)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- playing

def choose_x(game: Mapping[str, Any]) -> tuple[int, str]:
    """Where to drop the current fruit: onto an equal one if a column is topped by it,
    else into the lowest column (nearest the middle)."""
    board = game.get("board") or []
    columns = int(game.get("columns") or 7)
    current = game.get("current")
    tops: list[tuple[int, Any]] = []  # (height, top piece) per column
    for column in range(columns):
        cells = [row[column] for row in board if isinstance(row, list) and column < len(row)]
        filled = [cell for cell in cells if cell is not None]
        tops.append((len(filled), filled[0] if filled else None))
    half = columns // 2
    matching = [c for c in range(columns) if tops[c][1] == current and tops[c][0] < len(board) - 1]
    if matching:
        column = min(matching, key=lambda c: (tops[c][0], abs(c - half)))
        return column - half, f"onto the {current} there"
    column = min(range(columns), key=lambda c: (tops[c][0], abs(c - half)))
    return column - half, "the lowest column"


class _Printer:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def step(self, call: str) -> None:
        self.out.write(f"\n> {call}\n")
        self.out.flush()

    def say(self, text: str = "") -> None:
        for line in text.splitlines() or [""]:
            self.out.write(f"  {line}\n")
        self.out.flush()


def _args_text(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), separators=(", ", ": "))


#: The demo board's letters (the demo's ui.text), in the order of the fruit ladder.
SYMBOLS = "CSGOAPHIMW"
PIECES = ("cherry", "strawberry", "grape", "orange", "apple", "pear", "peach", "pineapple", "melon", "watermelon")
SETTLED = {"path": "game.moving", "equals": 0, "timeoutMs": 10000}


def board_from_text(text: str) -> list[list[Any]]:
    """The demo's ``ui.text`` as rows of fruit names, top row first: rows of one letter a
    fruit and ``.`` (``..C....``), the empty rows above folded into ``(7 empty rows)``
    (a bordered ``|. . C . . . .|`` screenshot board reads too)."""
    cells = set(SYMBOLS) | {"."}
    lines = [line.strip() for line in text.splitlines()]
    lines = [line if line.startswith("(") else line.strip("|").replace(" ", "") for line in lines]
    width = max((len(line) for line in lines if line and set(line) <= cells), default=7)
    rows: list[list[Any]] = []
    for line in lines:
        folded = re.fullmatch(r"\((\d+) empty rows?\)", line)
        if folded:
            rows += [[None] * width for _ in range(min(int(folded.group(1)), 1000))]
        elif line and set(line) <= cells:
            rows.append([PIECES[SYMBOLS.index(c)] if c in SYMBOLS else None for c in line])
    return rows


def _move_text(answer: Mapping[str, Any], score: Any) -> str:
    """What one move's answer says: whether it settled, what it did, what happened."""
    raw = answer.get("result")
    result: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    merges = result.get("merges") or []
    did = (f"landed in column {result.get('column')}" + (f", merged {', '.join(map(str, merges))}" if merges else "")
           + f", +{result.get('scoreGained', 0)}")
    events = [str(e.get("m")) if isinstance(e, Mapping) else str(e) for e in answer.get("events", [])]
    size = len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))
    return (f"one call, {size} characters: {'settled' if answer.get('settled') else 'NOT settled'}; {did}; "
            f"score {score}" + (f"; events: {', '.join(events)}" if events else ""))


def play(bridge: Any, out: TextIO, *, seed: int, drops: int, port: int | None = None) -> dict[str, Any]:
    """The scripted session: each move is one call_tool with until. Returns the final digest."""
    p = _Printer(out)
    launch_args = {} if port is None else {"port": port}
    p.step(f"launch_instance {_args_text(launch_args)}")
    started = time.monotonic()
    shown = TerminalProgress(out, "launching")  # on a terminal, the boot as it happens
    try:
        launched = bridge.run_tool("launch_instance", launch_args, progress=shown.callback)
    finally:
        shown.clear()
    port = int(launched["port"])
    p.say(f"{launched.get('name')} {launched.get('version')} is up on port {port} (pid {launched.get('pid')}) "
          f"after {launched.get('readyInMs')} ms; its output goes to {launched.get('logFile')}")

    def call(name: str, arguments: Mapping[str, Any] | None = None, **top: Any) -> dict[str, Any]:
        answer: dict[str, Any] = bridge.run_tool("call_tool", {"port": port, "name": name,
                                                              "arguments": dict(arguments or {}), **top})
        return answer

    p.step(f"list_toolsets {{\"port\": {port}}}    # the rules, in the game's own words")
    toolsets = bridge.run_tool("list_toolsets", {"port": port})
    rules = str(toolsets.get("description", ""))
    p.say(textwrap.fill(rules[:300] + ("…" if len(rules) > 300 else ""), 96))
    for toolset in toolsets["toolsets"]:
        if "tools" in toolset:
            p.say(f"{toolset['name']:<12} {', '.join(toolset['tools'])}")
    p.step(f"describe_toolset {{\"port\": {port}, \"name\": \"play\"}}")
    for tool in bridge.run_tool("describe_toolset", {"port": port, "name": "play"})["tools"]:
        props = tool["inputSchema"].get("properties", {})
        required = set(tool["inputSchema"].get("required", []))
        args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any')}"
                         + (f" {v['minimum']}..{v['maximum']}" if "minimum" in v and "maximum" in v else "")
                         for k, v in props.items())
        p.say(f"{tool['name']}({args}): {tool['description'].split('. ')[0].rstrip('.')}.")

    p.step(f"call_tool set_seed {_args_text({'seed': seed})}")
    known = dict(call("set_seed", {"seed": seed}).get("game", {}))  # an answer shows what changed: keep the rest
    board = board_from_text(str(bridge.run_tool("call_tool", {"port": port, "name": "get_state",
                                                             "arguments": {"summary": True}}).get("text", "")))
    p.say(f"a new round; the current fruit is a {known.get('current')}")

    for _turn in range(drops):
        if known.get("state") not in (None, "RUNNING"):
            p.say(f"the round is over ({known.get('state')})")
            break
        x, why = choose_x({"board": board, "columns": len(board[0]) if board else 7, "current": known.get("current")})
        p.step(f"call_tool drop {_args_text({'x': x})} until {_args_text({'path': 'game.moving', 'equals': 0})}"
               f"    # a {known.get('current')}, {why}")
        answer = call("drop", {"x": x}, until=SETTLED)
        known.update(answer.get("game", {}))
        if "text" in answer:
            board = board_from_text(str(answer["text"]))
        p.say(_move_text(answer, known.get("score")))
        if "text" in answer:
            p.say(str(answer["text"]))

    p.step("call_tool hold, twice    # a move the rules refuse comes back as CommandFailed, with the reason")
    call("hold")
    try:
        call("hold")
        p.say("(the second hold was accepted)")
    except BridgeError as exc:
        p.say(exc.render().splitlines()[0])

    p.step('call_tool screenshot {"name": "demo"} until {"path": "screenshots.pending", "equals": 0}')
    shot = call("screenshot", {"name": "demo"}, until={"path": "screenshots.pending", "equals": 0, "timeoutMs": 10000})
    final = bridge.run_tool("call_tool", {"port": port, "name": "get_state"})
    path = final.get("screenshots", {}).get("last")
    p.say(f"{'written' if shot.get('settled') else 'NOT written in time'}: {path}")
    if path and Path(path).is_file():
        p.say(Path(path).read_text(encoding="utf-8").rstrip())

    p.step('call_tool get_state {"summary": true}')
    digest = call("get_state", {"summary": True})
    p.say(json.dumps({k: v for k, v in digest.items() if k not in ("port", "text")}, indent=2))

    p.step(f"stop_instance {{\"port\": {port}}}")
    stopped = bridge.run_tool("stop_instance", {"port": port})
    p.say(f"stopped: {stopped.get('how')} in {stopped.get('stoppedInMs')} ms"
          + ("" if stopped.get("stopped", True) else f"; NOT all of it: {stopped.get('message')}"))
    out.write(f"\nDone in {time.monotonic() - started:.1f} s. Every step above is a tool an agent calls over MCP; each "
              "move was one call_tool that said whether it worked, what it did, what happened and how the board "
              "looks. `game-bridge-mcp demo --init` writes this gamebridge.json into your directory so "
              "launch_instance works there.\n")
    return digest


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``game-bridge-mcp demo [--init]``: 0 on success, 2 for usage errors, else the
    bridge error's exit code."""
    out = terminal(stdout or sys.stdout)  # what it prints quotes games and traces: cleaned for a terminal
    err = terminal(stderr or sys.stderr)
    try:
        ns = build_parser().parse_args(list(argv))
        if ns.drops < 0 or ns.drops > 200 or not 0 < ns.hz <= 10000:
            raise OptionError("--drops must be 0-200 and --hz above 0 and at most 10000")
        if ns.port is not None and not 1 <= ns.port <= 65535:
            raise OptionError(f"--port must be 1-65535, not {ns.port}")
    except OptionError as exc:
        err.write(f"game-bridge-mcp demo: {exc}\n{build_parser().format_usage()}")
        return 2
    if ns.help:
        out.write(build_parser().format_help())
        return 0
    if ns.init:
        try:  # its screenshots go into the project too (relative to the declaration's cwd)
            path = write_declaration(Path.cwd(), hz=ns.hz, force=ns.force, screenshot_dir=Path(SCREENSHOTS))
        except (FileExistsError, OSError) as exc:
            err.write(f"game-bridge-mcp demo --init: {exc}\n")
            return 2
        command = command_name()
        out.write(f"Wrote {path}.\nFrom this directory, launch_instance starts the demo game (its screenshots "
                  f"go into {path.parent / SCREENSHOTS}); try:\n"
                  f"  {command} call launch_instance --keep    (then: {command} call close --port <port>)\n"
                  f"or register the bridge with your MCP client (claude mcp add game-bridge -- {command})\n"
                  "and ask the agent to play a round.\n")
        return 0

    from ..core.bridge import Bridge
    from ..config import Config
    from ..launch.declaration import apply_project_config, declaration_of
    from ..paths import registry_home

    workdir = Path(tempfile.mkdtemp(prefix="game-bridge-demo-"))
    bridge = None
    try:
        config_path = write_declaration(workdir, hz=ns.hz, screenshot_dir=workdir / "screenshots")
        config = Config(config_file=config_path)
        apply_project_config(config)
        declared = declaration_of(config)
        low, high = declared.port_range if declared is not None else (0, 0)
        where = f"port {ns.port}" if ns.port is not None else f"a free port of {low}-{high}"
        out.write(f"game-bridge-mcp demo: wrote {config_path} and launching the demo game through the bridge, "
                  f"on {where}; its log and port lock go under {registry_home(config.environ, config.registry_dir)} "
                  "(GAME_BRIDGE_HOME)\n")
        bridge = Bridge(config)
        play(bridge, out, seed=ns.seed, drops=ns.drops, port=ns.port)
        return 0
    except BridgeError as exc:
        err.write(exc.render() + "\n")
        return exc.exit_code
    finally:
        if bridge is not None:
            bridge.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)


__all__ = ["board_from_text", "build_parser", "choose_x", "declaration", "main", "play", "write_declaration"]
