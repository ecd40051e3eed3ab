"""Fruit Merge: a small headless game built on the kit, to see the bridge working.

Run it with ``python -m game_bridge_mcp.game.demo --port 7820 [--seed 7] [--hz 60]``; its rules
are :func:`rules`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
from pathlib import Path
from collections.abc import Sequence
from typing import Annotated, Any

from ..._version import __version__
from ..kit.args import Arg, Range
from .picture import HEIGHT as PICTURE_HEIGHT, WIDTH as PICTURE_WIDTH, render_picture
from .fruit import (BUTTONS, COLUMNS, DROP_KINDS, DROP_WEIGHTS, FALL_TICKS, GAME_NAME, HALF,
                     MERGE_TICKS, PIECES, POINTS, POP_POINTS, ROWS, SCREENSHOT_FRAMES, SYMBOLS,
                     FruitMerge, RuleError, rules)
from ..kit import GameBridge, RawJson

__all__ = ["BUTTONS", "COLUMNS", "DROP_KINDS", "DROP_WEIGHTS", "FALL_TICKS", "GAME_NAME", "HALF",
           "MERGE_TICKS", "PIECES", "POINTS", "POP_POINTS", "ROWS", "SCREENSHOT_FRAMES", "SYMBOLS",
           "FruitMerge", "RuleError", "build", "main", "padding_json", "rules"]


def padding_json(kilobytes: int, seed: int = 0) -> RawJson | None:
    """About ``kilobytes`` KiB of entity-like objects, encoded once (benchmark sizes)."""
    if kilobytes <= 0:
        return None
    rng = random.Random(seed)
    target = kilobytes * 1024
    parts: list[str] = []
    size = 2
    index = 0
    while size < target:
        item = json.dumps({"id": index, "kind": "crate", "x": round(rng.uniform(-50, 50), 3),
                           "y": round(rng.uniform(0, 100), 3), "tags": ["static", "padding"]},
                          separators=(",", ":"))
        parts.append(item)
        size += len(item) + 1
        index += 1
    return RawJson("[" + ",".join(parts) + "]")


def build(game: FruitMerge, *, register: bool = True, padding_kb: int = 0,
          environ: dict[str, str] | None = None, snapshot: bool = True) -> GameBridge:
    """A :class:`GameBridge` serving ``game``: its rules, commands, toolsets, state and
    the kit's clock. Drive it with ``bridge.run(game.update, render=game.frame_tick)``."""
    padding = padding_json(padding_kb)

    def state() -> dict[str, Any]:
        doc = game.to_state()
        if padding is not None:
            doc["padding"] = padding
        return doc

    bridge = GameBridge(GAME_NAME, __version__, state=state, on_close=game.teardown,
                        description=rules(), clock=True, register=register, environ=environ,
                        snapshot=None if snapshot else False,
                        toolsets={
        "play": "Play a round the way a player does: drop fruit, hold one back, click buttons.",
        "flow": "Control the session: new rounds, seeds and screenshots.",
    }, passthrough={"description": "Also accepted: close (quit through the game's teardown) "
                                   "and noop (completes on the next frame).",
                    "examples": ["close", "noop"]})
    # The picture is the window: X-Game-Window says its size, so get_screenshot's answer has it.
    bridge.screenshot(lambda: render_picture(game), window=lambda: (PICTURE_WIDTH, PICTURE_HEIGHT))
    game.emit = bridge.event
    game.clock = bridge  # the kit's clock holds the pause
    bridge.snapshot_skip(game.shot_files)  # its files are on disk, not in a snapshot

    @bridge.command(toolset="play")
    def drop(x: Annotated[float, Range(-HALF, HALF)]) -> dict[str, Any]:
        """Drop the current fruit at world x; it falls and merges with an equal neighbour
        where it lands. The main move. The result forecasts the outcome (the column and
        row it comes to rest in, merges, scoreGained, framesToSettle); the board itself moves for some frames after the
        command completes: wait for game.moving to reach 0 (or step a paused game).

        Args:
            x: World x from -3 (left column) to 3 (right column); rounded to the nearest column.
        """
        return game.drop(x)

    @bridge.command(toolset="play")
    def hold() -> dict[str, Any]:
        """Swap the current fruit with the held one (the first hold takes the next fruit);
        once per drop. Use it to save a fruit for a better spot."""
        return game.hold()

    @bridge.command(toolset="play")
    def click(label: Annotated[str, Arg(choices=BUTTONS)]) -> dict[str, Any]:
        """Click a visible button by its label, as listed in ui.elements. Use it to move
        between screens; Pause and Resume stop and restart the game's clock.

        Args:
            label: The button's label, exactly as in ui.elements.
        """
        return game.click(label)

    @bridge.command(toolset="flow")
    def restart() -> dict[str, Any]:
        """Start a new round with the current seed, from any screen. Same seed and same
        drops give the same result."""
        game.new_round()
        return game.round_info()

    @bridge.command(toolset="flow")
    def set_seed(seed: int) -> dict[str, Any]:
        """Set the random seed and start a new round with it (for reproducible runs).

        Args:
            seed: Any integer; the fruit sequence depends only on it.
        """
        game.new_round(seed)
        return game.round_info()

    @bridge.command(toolset="flow")
    def screenshot(name: str = "") -> dict[str, Any]:
        """Queue a text picture of the board. The command completes when it is queued
        (screenshots.pending goes up); the file is written some frames later: wait for
        screenshots.pending to reach 0 (wait_for), then read screenshots.last for its path.

        Args:
            name: File name (letters, digits, '-' and '_'); default shot-N.
        """
        return game.screenshot(name)

    return bridge


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m game_bridge_mcp.game.demo",
        description=f"{GAME_NAME}: a headless demo game that speaks the game-bridge contract.")
    parser.add_argument("--port", "--debug-port", type=int, default=0,
                        help="debug port to serve on 127.0.0.1 (0: any free port)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--hz", type=float, default=60.0,
                        help="loop frames per second (default 60; 1000 for benchmarks)")
    parser.add_argument("--state-padding-kb", type=int, default=0, metavar="N",
                        help="add about N KiB of entity objects to /state (benchmarks)")
    parser.add_argument("--screenshot-dir", type=Path, default=None,
                        help="where the screenshot command writes its files, relative to the working "
                             "directory (default: a new private directory in the temp dir)")
    parser.add_argument("--no-snapshot", action="store_true",
                        help="do not save and load itself (the bridge then re-executes it, as a wrapped game)")
    parser.add_argument("--start", action="store_true",
                        help="start a round at once instead of showing the menu")
    parser.add_argument("--no-register", action="store_true",
                        help="do not write the instance registry entry")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0-65535, not {args.port}")
    if not 0 < args.hz <= 10000:
        parser.error(f"--hz must be above 0 and at most 10000, not {args.hz}")
    if args.state_padding_kb < 0:
        parser.error("--state-padding-kb must not be negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # A relative --screenshot-dir is the game's working directory's (a declaration's cwd):
    # made absolute once, so the paths the state reports mean the same to every reader.
    shots = args.screenshot_dir.absolute() if args.screenshot_dir is not None else None
    game = FruitMerge(args.seed, screenshot_dir=shots)
    bridge = build(game, register=not args.no_register, padding_kb=args.state_padding_kb,
                   snapshot=not args.no_snapshot)
    if args.start:
        game.new_round()
    try:
        port = bridge.start(args.port)
    except OSError as exc:
        print(f"{GAME_NAME}: cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: bridge.request_stop())
    print(f"{GAME_NAME} {__version__} (pid {os.getpid()}, seed {args.seed}) serving on "
          f"http://127.0.0.1:{port} at {args.hz:g} Hz" + (", paused" if bridge.paused else ""),
          flush=True)
    try:
        bridge.run(game.update, hz=args.hz, render=game.frame_tick)
    finally:
        game.shot_files.close()  # a temporary screenshot directory goes with the game
    print(f"{GAME_NAME}: closed (frame {bridge.frame}, score {game.score})", flush=True)
    return 0

