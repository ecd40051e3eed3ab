"""Fruit Merge: a small headless game built on the kit, to see the bridge working.

Why it ships in the package: a newcomer needs something drivable in the first minute,
and the project's own checks need a real game (rules, a score, screens, delayed
effects) rather than a fake. Run it with::

    python -m game_bridge_mcp.game.demo --port 7820 [--seed 7] [--hz 60]

The rules: fruit is dropped into a board of 7 columns and 10 rows and falls one row
every two simulation frames. When it lands next to a fruit of the same kind, the two
merge into the next kind (cherry, strawberry, grape, orange, apple, pear, peach,
pineapple, melon, watermelon; two watermelons pop), which scores and may fall and
merge again. Dropping onto a full column ends the game. Drops sent while the board is
still moving wait their turn, so the outcome depends only on the seed and the order of
commands, never on timing.

What it exercises: toolsets ``play`` (drop, hold, click) and ``flow`` (restart,
set_seed, pause, screenshot); ``ui.screen`` (MenuScreen, GameScreen, GameOverScreen)
and ``ui.elements``; events (``merge:cherry``, ``score:+3``); ``game.moving``, which
settles to 0 some frames after a drop; and ``screenshot``, applied at once but only
finished (``screenshots.pending`` back to 0, a file written into a private directory)
some frames later. ``GET /screenshot`` serves the screen as a PNG picture
(:mod:`._demo_picture`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from .._version import __version__
from ._demo_picture import render_picture
from ._private_files import PrivateDir
from .kit import GameBridge, RawJson

GAME_NAME = "Fruit Merge"
PIECES = ("cherry", "strawberry", "grape", "orange", "apple", "pear", "peach", "pineapple",
          "melon", "watermelon")
#: Points for creating each kind by a merge (triangular numbers); two watermelons pop.
POINTS = tuple((i + 1) * (i + 2) // 2 for i in range(len(PIECES)))
POP_POINTS = 100
#: One letter per kind, for the text screenshots.
SYMBOLS = "CSGOAPHIMW"
#: Kinds a drop can be, and their weights.
DROP_KINDS = (0, 1, 2, 3)
DROP_WEIGHTS = (4, 3, 2, 1)
COLUMNS = 7
ROWS = 10
#: Simulation frames per row fallen, and per merge.
FALL_TICKS = 2
MERGE_TICKS = 3
#: Loop frames between a screenshot request and the file on disk.
SCREENSHOT_FRAMES = 12

Emit = Callable[..., None]


class RuleError(ValueError):
    """A command the rules do not allow right now (the message says what would work)."""


class FruitMerge:
    """The game itself: pure rules, no threads and no I/O except writing screenshots.

    ``tick()`` advances one loop frame; the simulation only advances while a round is
    running and not paused. ``emit(message, **fields)`` receives the game's events.
    """

    def __init__(self, seed: int = 1, *, emit: Emit | None = None,
                 screenshot_dir: Path | None = None) -> None:
        self.seed = int(seed)
        self.emit: Emit = emit or (lambda *_a, **_k: None)
        self.screenshot_dir = screenshot_dir
        self.shot_files = PrivateDir(screenshot_dir, prefix="fruit-merge-shots-")
        self.screen = "MenuScreen"
        self.state = "MENU"
        self.paused = False
        self.best = 0
        self.frames = 0  # loop frames
        self.sim_frame = 0  # simulation frames, only while running
        self.shots_due: collections.deque[tuple[int, str]] = collections.deque()
        self.shots_taken = 0
        self.last_shot: str | None = None
        self._reset_round()

    # ------------------------------------------------------------------ rounds
    def _reset_round(self) -> None:
        self.rng = random.Random(self.seed)
        self.grid: list[list[int | None]] = [[None] * COLUMNS for _ in range(ROWS)]
        self.falling: list[list[int]] = []  # [kind, row, column]
        self.fall_clock = 0
        self.candidates: list[tuple[int, int]] = []
        self.pending_merges: list[tuple[tuple[int, int], tuple[int, int], int]] = []
        self.merge_timer = 0
        self.pending_drops: collections.deque[tuple[int, int]] = collections.deque()
        self.score = 0
        self.drops = 0
        self.merges = 0
        self.biggest: int | None = None
        self.current = self._roll()
        self.next = self._roll()
        self.held: int | None = None

    def _roll(self) -> int:
        return self.rng.choices(DROP_KINDS, weights=DROP_WEIGHTS)[0]

    def _set_screen(self, screen: str) -> None:
        if screen != self.screen:
            self.screen = screen
            self.emit(f"screen:{screen}")

    def new_round(self, seed: int | None = None) -> None:
        if seed is not None:
            self.seed = int(seed)
        self._reset_round()
        self.state = "RUNNING"
        self.paused = False
        self._set_screen("GameScreen")
        self.emit(f"round:seed={self.seed}")

    def _require_running(self, what: str) -> None:
        if self.state != "RUNNING":
            hint = "click Start" if self.state == "MENU" else "click Restart"
            raise RuleError(f"{what} does nothing on the {self.screen}: {hint} (or call restart) first")

    # ------------------------------------------------------------------ commands
    @staticmethod
    def column_for(x: float) -> int:
        half = COLUMNS // 2
        if not -half - 0.5 < x < half + 0.5:
            raise RuleError(f"x must be between {-half} and {half} (got {x})")
        return int(round(x)) + half

    def drop(self, x: float) -> None:
        self._require_running("drop")
        column = self.column_for(x)
        kind = self.current
        self.current, self.next = self.next, self._roll()
        self.pending_drops.append((kind, column))
        self.drops += 1
        self.emit(f"drop:{PIECES[kind]}", column=column)

    def hold(self) -> None:
        self._require_running("hold")
        if self.held is None:
            self.held, self.current, self.next = self.current, self.next, self._roll()
        else:
            self.held, self.current = self.current, self.held
        self.emit(f"hold:{PIECES[self.held]}")

    def set_paused(self, paused: bool) -> None:
        self._require_running("pause")
        if paused != self.paused:
            self.paused = paused
            self.emit("paused" if paused else "resumed")

    def elements(self) -> list[dict[str, Any]]:
        """The UI elements of the current screen (buttons are clickable by label)."""
        if self.screen == "MenuScreen":
            return [{"label": "Start", "visible": True, "kind": "button"},
                    {"label": f"Best: {self.best}", "visible": True, "kind": "text"}]
        if self.screen == "GameOverScreen":
            return [{"label": f"Score: {self.score}", "visible": True, "kind": "text"},
                    {"label": "Restart", "visible": True, "kind": "button"},
                    {"label": "Menu", "visible": True, "kind": "button"}]
        return [{"label": f"Score: {self.score}", "visible": True, "kind": "text"},
                {"label": "Hold", "visible": not self.paused, "kind": "button"},
                {"label": "Pause", "visible": not self.paused, "kind": "button"},
                {"label": "Resume", "visible": self.paused, "kind": "button"},
                {"label": "Restart", "visible": self.paused, "kind": "button"},
                {"label": "Menu", "visible": self.paused, "kind": "button"}]

    def click(self, label: str) -> None:
        buttons = [e["label"] for e in self.elements() if e["visible"] and e["kind"] == "button"]
        if label not in buttons:
            raise RuleError(f"no visible button {label!r} on the {self.screen}; "
                            f"visible buttons: {', '.join(buttons)}")
        self.emit(f"click:{label}")
        if label in ("Start", "Restart"):
            self.new_round()
        elif label == "Menu":
            self.state, self.paused = "MENU", False
            self._set_screen("MenuScreen")
        elif label == "Hold":
            self.hold()
        elif label in ("Pause", "Resume"):
            self.set_paused(label == "Pause")

    def screenshot(self, name: str = "") -> None:
        safe = re.sub(r"[^A-Za-z0-9_-]", "", name)[:40] or f"shot-{self.shots_taken + len(self.shots_due) + 1}"
        self.shots_due.append((self.frames + SCREENSHOT_FRAMES, safe))
        self.emit("screenshot:queued", name=safe)

    # ------------------------------------------------------------------ time
    def tick(self) -> None:
        """One loop frame: screenshots come due; the simulation steps if it runs."""
        self.frames += 1
        while self.shots_due and self.shots_due[0][0] <= self.frames:
            self._write_screenshot(self.shots_due.popleft()[1])
        if self.state == "RUNNING" and not self.paused:
            self.sim_frame += 1
            self._step()

    def _step(self) -> None:
        if self.merge_timer:
            self.merge_timer -= 1
            if self.merge_timer == 0:
                self._resolve_merges()
        elif self.falling:
            self.fall_clock += 1
            if self.fall_clock % FALL_TICKS == 0:
                self._advance_falling()
        elif self.candidates:
            self._find_merges()
        elif self.pending_drops:
            self._spawn(*self.pending_drops.popleft())

    def _spawn(self, kind: int, column: int) -> None:
        if self.grid[0][column] is not None:
            self.state = "GAME_OVER"
            self.best = max(self.best, self.score)
            self.pending_drops.clear()
            self._set_screen("GameOverScreen")
            self.emit("gameover", score=self.score)
            return
        self.falling.append([kind, 0, column])
        self.fall_clock = 0

    def _advance_falling(self) -> None:
        still: list[list[int]] = []
        for piece in sorted(self.falling, key=lambda p: (-p[1], p[2])):
            kind, row, column = piece
            if row + 1 < ROWS and self.grid[row + 1][column] is None:
                piece[1] += 1
                still.append(piece)
            else:
                self.grid[row][column] = kind
                self.candidates.append((row, column))
        self.falling = still

    def _find_merges(self) -> None:
        used: set[tuple[int, int]] = set()
        merges = []
        for row, column in self.candidates:
            kind = self.grid[row][column]
            if kind is None or (row, column) in used:
                continue
            for d_row, d_column in ((1, 0), (0, -1), (0, 1), (-1, 0)):
                other = (row + d_row, column + d_column)
                if (0 <= other[0] < ROWS and 0 <= other[1] < COLUMNS and other not in used
                        and self.grid[other[0]][other[1]] == kind):
                    merges.append(((row, column), other, kind))
                    used.update({(row, column), other})
                    break
        self.candidates = []
        if merges:
            self.pending_merges = merges
            self.merge_timer = MERGE_TICKS

    def _resolve_merges(self) -> None:
        made: list[tuple[int, int]] = []
        for first, second, kind in self.pending_merges:
            target = second if second[0] > first[0] else first
            self.grid[first[0]][first[1]] = None
            self.grid[second[0]][second[1]] = None
            self.merges += 1
            self.emit(f"merge:{PIECES[kind]}")
            if kind + 1 < len(PIECES):
                self.grid[target[0]][target[1]] = kind + 1
                made.append(target)
                points = POINTS[kind + 1]
                self.biggest = max(self.biggest if self.biggest is not None else 0, kind + 1)
            else:
                points = POP_POINTS
            self.score += points
            self.emit(f"score:+{points}")
        self.pending_merges = []
        for column in range(COLUMNS):  # whatever lost its support falls again
            for row in range(ROWS - 2, -1, -1):
                loose = self.grid[row][column]
                if loose is not None and self.grid[row + 1][column] is None:
                    self.grid[row][column] = None
                    self.falling.append([loose, row, column])
        self.fall_clock = 0
        self.candidates = [cell for cell in made if self.grid[cell[0]][cell[1]] is not None]

    # ------------------------------------------------------------------ output
    @property
    def moving(self) -> int:
        """How many things are still to happen on the board (0 when it has settled)."""
        return (len(self.falling) + len(self.pending_merges) + len(self.pending_drops)
                + len(self.candidates))

    def render(self) -> str:
        rows = []
        falling = {(p[1], p[2]): p[0] for p in self.falling}
        for row in range(ROWS):
            cells = []
            for column in range(COLUMNS):
                kind = self.grid[row][column]
                if kind is None:
                    kind = falling.get((row, column))
                cells.append("." if kind is None else SYMBOLS[kind])
            rows.append("|" + " ".join(cells) + "|")
        header = (f"{GAME_NAME}  seed {self.seed}  score {self.score}  {self.state}\n"
                  f"current {PIECES[self.current]}  next {PIECES[self.next]}  "
                  f"held {PIECES[self.held] if self.held is not None else '-'}")
        return header + "\n" + "\n".join(rows) + "\n+" + "-" * (2 * COLUMNS - 1) + "+\n"

    def _write_screenshot(self, name: str) -> None:
        try:  # a private directory; never over an existing name (see _private_files)
            path = self.shot_files.write_new(name, ".txt", self.render().encode("utf-8"))
        except OSError as exc:
            self.emit("screenshot:failed", name=name, error=str(exc)[:200])
            self.shots_taken += 1
            return
        self.shots_taken += 1
        self.last_shot = str(path)
        self.emit("screenshot:saved", name=name, path=str(path))

    def teardown(self) -> None:
        """The game's own shutdown: finish the screenshots still queued."""
        while self.shots_due:
            self._write_screenshot(self.shots_due.popleft()[1])
        self.emit("closing")

    def to_state(self) -> dict[str, Any]:
        return {
            "paused": self.paused,
            "ui": {"screen": self.screen, "elements": self.elements()},
            "game": {
                "state": self.state, "score": self.score, "best": max(self.best, self.score),
                "seed": self.seed, "moving": self.moving,
                "pendingMerges": len(self.pending_merges), "pendingDrops": len(self.pending_drops),
                "current": PIECES[self.current], "next": PIECES[self.next],
                "held": PIECES[self.held] if self.held is not None else None,
                "drops": self.drops, "merges": self.merges,
                "biggest": PIECES[self.biggest] if self.biggest is not None else None,
                "columns": COLUMNS, "rows": ROWS,
                "board": [[PIECES[k] if k is not None else None for k in row] for row in self.grid],
                "falling": [{"piece": PIECES[k], "row": r, "column": c} for k, r, c in self.falling],
            },
            "screenshots": {"pending": len(self.shots_due), "taken": self.shots_taken,
                            "last": self.last_shot},
        }


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


def build(game: FruitMerge, *, register: bool = True, padding_kb: int = 0) -> GameBridge:
    """A :class:`GameBridge` serving ``game``: its commands, toolsets and state."""
    padding = padding_json(padding_kb)

    def state() -> dict[str, Any]:
        doc = game.to_state()
        if padding is not None:
            doc["padding"] = padding
        return doc

    bridge = GameBridge(GAME_NAME, __version__, state=state, on_close=game.teardown,
                        register=register, screenshot=lambda: render_picture(game), toolsets={
        "play": "Play a round the way a player does: drop fruit, hold one back, click buttons.",
        "flow": "Control the session: new rounds, seeds, pausing and screenshots.",
    }, passthrough={"description": "Also accepted: close (quit through the game's teardown) "
                                   "and noop (completes on the next frame).",
                    "examples": ["close", "noop"]})
    game.emit = bridge.event

    @bridge.command(toolset="play")
    def drop(x: float) -> None:
        """Drop the current fruit at world x and let it fall; it merges with an equal
        neighbour where it lands. The main move. The board keeps moving for some frames
        after the command completes: wait for game.moving to reach 0 to see the result.

        Args:
            x: World x from -3 (left column) to 3 (right column); rounded to the nearest column.
        """
        game.drop(x)

    @bridge.command(toolset="play")
    def hold() -> None:
        """Swap the current fruit with the held one (the first hold takes the next fruit).
        Use it to save a fruit for a better spot."""
        game.hold()

    @bridge.command(toolset="play")
    def click(label: str) -> None:
        """Click a visible button by its label, as listed in ui.elements (Start, Pause,
        Resume, Restart, Menu, Hold). Use it to move between screens.

        Args:
            label: The button's label, exactly as in ui.elements.
        """
        game.click(label)

    @bridge.command(toolset="flow")
    def restart() -> None:
        """Start a new round with the current seed, from any screen. Same seed and same
        drops give the same result."""
        game.new_round()

    @bridge.command(toolset="flow")
    def set_seed(seed: int) -> None:
        """Set the random seed and start a new round with it (for reproducible runs).

        Args:
            seed: Any integer; the fruit sequence depends only on it.
        """
        game.new_round(seed)

    @bridge.command(toolset="flow")
    def pause(paused: bool = True) -> None:
        """Pause (or, with paused=false, resume) the simulation; frame keeps counting,
        simFrame stops.

        Args:
            paused: true to pause, false to resume.
        """
        game.set_paused(paused)

    @bridge.command(toolset="flow")
    def screenshot(name: str = "") -> None:
        """Queue a text picture of the board. The command completes when it is queued
        (screenshots.pending goes up); the file is written some frames later: wait for
        screenshots.pending to reach 0 (wait_for), then read screenshots.last for its path.

        Args:
            name: File name (letters, digits, '-' and '_'); default shot-N.
        """
        game.screenshot(name)

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
                        help="where the screenshot command writes its files (default: a new private "
                             "directory in the temp dir)")
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
    game = FruitMerge(args.seed, screenshot_dir=args.screenshot_dir)
    bridge = build(game, register=not args.no_register, padding_kb=args.state_padding_kb)
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
          f"http://127.0.0.1:{port} at {args.hz:g} Hz", flush=True)

    def update() -> None:
        game.tick()
        bridge.sim_frame = game.sim_frame

    bridge.run(update, hz=args.hz)
    print(f"{GAME_NAME}: closed (frame {bridge.frame}, score {game.score})", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through subprocess tests
    sys.exit(main())
