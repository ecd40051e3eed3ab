"""Fruit Merge's rules: the board, the ladder of fruit, merges, scoring, screens. Pure and
frame by frame; the package (:mod:`game_bridge_mcp.game.demo`) wires them to the kit."""

from __future__ import annotations

import collections
import copy
import random
import re
from pathlib import Path
from typing import Any, Callable, Protocol

from .files import PrivateDir

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
HALF = COLUMNS // 2  # x runs from -HALF to HALF
#: Simulation frames per row fallen, and per merge.
FALL_TICKS = 2
MERGE_TICKS = 3
#: Loop frames between a screenshot request and the file on disk.
SCREENSHOT_FRAMES = 12
#: Simulation frames a drop's forecast may play forward before giving up.
FORECAST_FRAMES = 5000
BUTTONS = ("Start", "Hold", "Pause", "Resume", "Restart", "Menu")

Emit = Callable[..., None]


class RuleError(ValueError):
    """A command the rules do not allow right now (the message says what would work)."""


class PauseControl(Protocol):
    """Who decides whether the game is paused: the kit's clock (a :class:`GameBridge`
    with ``clock=True``), or :class:`OwnPause` when the rules run on their own."""

    @property
    def paused(self) -> bool: ...

    def set_paused(self, paused: bool) -> None: ...


class OwnPause:
    """A pause flag for the rules on their own (tests, the picture's tests)."""

    def __init__(self) -> None:
        self.paused = False

    def set_paused(self, paused: bool) -> None:
        self.paused = bool(paused)


def rules() -> str:
    """The rules as an agent reads them (``game.description``)."""
    ladder = ", ".join(f"{PIECES[i]} {POINTS[i]}" for i in range(1, len(PIECES)))
    half = COLUMNS // 2
    return (f"{GAME_NAME}: drop fruit into a board of {COLUMNS} columns (x from {-half} on the left "
            f"to {half} on the right) and {ROWS} rows; it falls one row every {FALL_TICKS} "
            "simulation frames. A fruit that lands touching one of the same kind merges with it "
            f"into the next kind on the ladder {' > '.join(PIECES)}; two watermelons pop. A merge "
            f"scores the kind it makes ({ladder}; a pop {POP_POINTS}). Merged fruit falls and can "
            "merge again. Drops wait while the board moves; the round is over when a drop finds "
            "its column full to the top. hold swaps the current fruit with the held one, once per "
            "drop. From the menu, click Start (or call restart). ui.text is the board, top row first, "
            f"one letter a fruit ({', '.join(f'{SYMBOLS[i]} {PIECES[i]}' for i in range(len(PIECES)))}; "
            "'.' empty; the empty rows above the fruit are one line, '(7 empty rows)'); "
            "game.moving is 0 once it has settled. The same seed and the same moves give the "
            "same game.")


def _merge_text(piece: str) -> str:
    """``cherry->strawberry``; ``watermelon->pop``."""
    index = PIECES.index(piece)
    return f"{piece}->{PIECES[index + 1]}" if index + 1 < len(PIECES) else f"{piece}->pop"


class FruitMerge:
    """The game itself: pure rules, no threads and no I/O except writing screenshots.

    :meth:`update` is one simulation frame (the board moves only while a round runs);
    :meth:`frame_tick` one loop frame (screenshots come due); :meth:`tick` both.
    ``emit(message, **fields)`` receives the game's events. Pausing is not the game's:
    ``clock`` (the kit's, in the real program) holds it and decides when :meth:`update`
    runs; the Pause and Resume buttons ask it.
    """

    def __init__(self, seed: int = 1, *, emit: Emit | None = None,
                 screenshot_dir: Path | None = None, clock: PauseControl | None = None) -> None:
        self.seed = int(seed)
        self.emit: Emit = emit or (lambda *_a, **_k: None)
        self.clock: PauseControl = clock or OwnPause()
        self.screenshot_dir = screenshot_dir
        self.shot_files = PrivateDir(screenshot_dir, prefix="fruit-merge-shots-")
        self.screen = "MenuScreen"
        self.state = "MENU"
        self.best = 0
        self.frames = 0  # loop frames
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
        self.hold_used = False  # one hold per drop

    def _roll(self) -> int:
        return self.rng.choices(DROP_KINDS, weights=DROP_WEIGHTS)[0]

    def _set_screen(self, screen: str) -> None:
        if screen != self.screen:
            self.screen = screen
            self.emit(f"screen:{screen}")

    def new_round(self, seed: int | None = None) -> None:
        if seed is not None:
            self.seed = int(seed)
        self.best = max(self.best, self.score)  # a round left early still counts for the best
        self._reset_round()
        self.state = "RUNNING"
        self._set_screen("GameScreen")
        self.emit(f"round:seed={self.seed}")

    @property
    def paused(self) -> bool:
        return self.clock.paused

    def set_paused(self, paused: bool) -> None:
        self.clock.set_paused(paused)

    def round_info(self) -> dict[str, Any]:
        return {"seed": self.seed, "current": PIECES[self.current], "next": PIECES[self.next]}

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

    def drop(self, x: float) -> dict[str, Any]:
        """Queue the current fruit at ``x``; returns the forecast of what it will do."""
        self._require_running("drop")
        column = self.column_for(x)
        kind = self.current
        self.current, self.next = self.next, self._roll()
        self.pending_drops.append((kind, column))
        self.drops += 1
        self.hold_used = False
        self.emit(f"drop:{PIECES[kind]}")  # where: the command's result says
        return {"column": column, **self.forecast()}

    def hold(self) -> dict[str, Any]:
        self._require_running("hold")
        if self.hold_used:
            raise RuleError(f"hold was already used for this fruit ({PIECES[self.current]}): drop it "
                            "first (one hold per drop)")
        if self.held is None:
            self.held, self.current, self.next = self.current, self.next, self._roll()
        else:
            self.held, self.current = self.current, self.held
        self.hold_used = True
        self.emit(f"hold:{PIECES[self.held]}")
        return {"held": PIECES[self.held], "current": PIECES[self.current], "next": PIECES[self.next]}

    # ------------------------------------------------------------------ forecast
    def _clone(self, emit: Emit) -> "FruitMerge":
        """A copy of the round to play forward: its own board, queues and dice."""
        twin = copy.copy(self)
        twin.emit = emit
        twin.grid = [row[:] for row in self.grid]
        twin.falling = [piece[:] for piece in self.falling]
        twin.candidates = list(self.candidates)
        twin.pending_merges = list(self.pending_merges)
        twin.pending_drops = collections.deque(self.pending_drops)
        twin.rng = random.Random()
        twin.rng.setstate(self.rng.getstate())
        twin.shots_due = collections.deque()
        return twin

    def forecast(self) -> dict[str, Any]:
        """What the newest queued drop will do, found by playing a copy of the board
        forward (the game is deterministic and drops wait their turn, so this is what
        will happen unless the round is restarted first): where it lands, what merges,
        the score it gains, and how many simulation frames until the board is still."""
        seen: list[str] = []
        twin = self._clone(lambda message, **_fields: seen.append(message))
        score_before, mark, spawned, lands = twin.score, 0, False, None
        for frames in range(1, FORECAST_FRAMES + 1):  # noqa: B007 - read after the loop
            queued = len(twin.pending_drops)
            if queued == 1 and not spawned:
                score_before, mark = twin.score, len(seen)
            twin.update()
            spawned = spawned or (queued == 1 and not twin.pending_drops)
            if twin.state != "RUNNING":
                if not spawned:
                    return {"gameOver": True, "note": "an earlier drop ends the round first"}
                if lands is None:
                    return {"gameOver": True, "note": "the column is full to the top",
                            "score": twin.score}
                break
            if spawned and lands is None and not twin.falling and twin.candidates:
                lands = twin.candidates[0][0]  # the row it comes to rest in (its column is the drop's)
            if spawned and twin.moving == 0:
                break
        else:
            return {"note": f"the board is still moving after {FORECAST_FRAMES} frames"}
        merges = [_merge_text(message[len("merge:"):]) for message in seen[mark:]
                  if message.startswith("merge:")]
        result: dict[str, Any] = {"row": lands, "merges": merges,
                                  "scoreGained": twin.score - score_before, "framesToSettle": frames}
        if twin.state != "RUNNING":
            result["gameOver"] = True
        return result

    # ------------------------------------------------------------------ screens
    def elements(self) -> list[dict[str, Any]]:
        """The UI elements of the current screen (buttons are clickable by label)."""
        if self.screen == "MenuScreen":
            return [{"label": "Start", "visible": True, "kind": "button"},
                    {"label": f"Best: {self.best}", "visible": True, "kind": "text"}]
        if self.screen == "GameOverScreen":
            return [{"label": f"Score: {self.score}", "visible": True, "kind": "text"},
                    {"label": "Restart", "visible": True, "kind": "button"},
                    {"label": "Menu", "visible": True, "kind": "button"}]
        # (the score is game.score: not a text element too, which would repeat it in every answer)
        return [{"label": "Hold", "visible": not self.paused, "kind": "button"},
                {"label": "Pause", "visible": not self.paused, "kind": "button"},
                {"label": "Resume", "visible": self.paused, "kind": "button"},
                {"label": "Restart", "visible": self.paused, "kind": "button"},
                {"label": "Menu", "visible": self.paused, "kind": "button"}]

    def click(self, label: str) -> dict[str, Any]:
        """Press a visible button (Pause and Resume ask the clock)."""
        buttons = [e["label"] for e in self.elements() if e["visible"] and e["kind"] == "button"]
        if label not in buttons:
            raise RuleError(f"no visible button {label!r} on the {self.screen}; "
                            f"visible buttons: {', '.join(buttons)}")
        self.emit(f"click:{label}")
        result: dict[str, Any] = {}
        if label in ("Start", "Restart"):
            self.new_round()
            result.update(self.round_info())
        elif label == "Menu":
            self.state = "MENU"
            self._set_screen("MenuScreen")
        elif label == "Hold":
            result.update(self.hold())
        elif label in ("Pause", "Resume"):
            self.set_paused(label == "Pause")
            result["paused"] = self.paused
        return {"screen": self.screen, **result}

    def screenshot(self, name: str = "") -> dict[str, Any]:
        safe = re.sub(r"[^A-Za-z0-9_-]", "", name)[:40] or f"shot-{self.shots_taken + len(self.shots_due) + 1}"
        self.shots_due.append((self.frames + SCREENSHOT_FRAMES, safe))
        self.emit("screenshot:queued", name=safe)
        return {"name": safe, "dueInFrames": SCREENSHOT_FRAMES}

    # ------------------------------------------------------------------ time
    def tick(self) -> None:
        """One loop frame, simulated unless paused: the kit's loop, in one call (for
        running the rules on their own)."""
        self.frame_tick()
        if not self.paused:
            self.update()

    def frame_tick(self) -> None:
        """One loop frame, paused or not: screenshots come due."""
        self.frames += 1
        while self.shots_due and self.shots_due[0][0] <= self.frames:
            self._write_screenshot(self.shots_due.popleft()[1])

    def update(self) -> None:
        """One simulation frame: the board moves if a round runs."""
        if self.state == "RUNNING":
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
            if kind + 1 < len(PIECES):
                self.grid[target[0]][target[1]] = kind + 1
                made.append(target)
                points = POINTS[kind + 1]
                self.biggest = max(self.biggest if self.biggest is not None else 0, kind + 1)
            else:
                points = POP_POINTS
            self.score += points
            self.emit(f"merge:{PIECES[kind]}")  # the points: the drop's result and game.score
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

    def board_text(self, *, sep: str = "", border: str = "", fold_empty: bool = False) -> str:
        """The board as text, top row first: one letter a fruit (:data:`SYMBOLS`), ``.``
        empty. ``ui.text`` is the compact form (no border, and the empty rows above the
        fruit folded into one line, ``(7 empty rows)``): an agent reads every character."""
        falling = {(p[1], p[2]): p[0] for p in self.falling}
        rows = []
        for row in range(ROWS):
            cells = []
            for column in range(COLUMNS):
                kind = self.grid[row][column]
                if kind is None:
                    kind = falling.get((row, column))
                cells.append("." if kind is None else SYMBOLS[kind])
            rows.append(border + sep.join(cells) + border)
        if fold_empty:
            empty = next((i for i, row in enumerate(rows) if row.strip(".|") != ""), len(rows))
            if empty > 1:
                rows[:empty] = [f"({empty} empty rows)"]
        return "\n".join(rows)

    def render(self) -> str:
        """The screen as a text file: a header, then the board (the screenshot command)."""
        rows = self.board_text(sep=" ", border="|").split("\n")
        header = (f"{GAME_NAME}  seed {self.seed}  score {self.score}  {self.state}\n"
                  f"current {PIECES[self.current]}  next {PIECES[self.next]}  "
                  f"held {PIECES[self.held] if self.held is not None else '-'}")
        return header + "\n" + "\n".join(rows) + "\n+" + "-" * (2 * COLUMNS - 1) + "+\n"

    def _write_screenshot(self, name: str) -> None:
        try:  # a private directory; never over an existing name (see files.py)
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
            "ui": {"screen": self.screen, "elements": self.elements(), "text": self.board_text(fold_empty=True)},
            # The scalars are what an agent reads after every move (the digest shows them);
            # the round's details, the best score and the board's size are nested, read by
            # get_state (the best is also the menu's "Best: N").
            "game": {
                "state": self.state, "score": self.score, "moving": self.moving, "current": PIECES[self.current], "next": PIECES[self.next],
                "held": PIECES[self.held] if self.held is not None else None,
                "drops": self.drops, "merges": self.merges,
                "round": {"seed": self.seed, "holdUsed": self.hold_used, "pendingMerges": len(self.pending_merges),
                          "pendingDrops": len(self.pending_drops),
                          "biggest": PIECES[self.biggest] if self.biggest is not None else None},
                "size": {"columns": COLUMNS, "rows": ROWS}, "session": {"best": max(self.best, self.score)},
                "board": [[PIECES[k] if k is not None else None for k in row] for row in self.grid],
                "falling": [{"piece": PIECES[k], "row": r, "column": c} for k, r, c in self.falling],
            },
            "screenshots": {"pending": len(self.shots_due), "taken": self.shots_taken,
                            "last": self.last_shot},
        }
