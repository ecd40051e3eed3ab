"""The demo game's picture (``/screenshot``) and its screenshot files in a private directory."""

from __future__ import annotations

import http.client
import json
import os
import stat
import time
from pathlib import Path

import pytest

from game_bridge_mcp.game.demo import picture
from game_bridge_mcp.game.demo.files import PrivateDir
from game_bridge_mcp.game.demo import SCREENSHOT_FRAMES, FruitMerge
from png_helpers import read_png
from peers.kitfakes import demo_process

pytestmark = pytest.mark.timeout(60)
CELL, TOP, MARGIN = picture.CELL, picture.TOP, picture.MARGIN


def pixel(pixels: bytes, width: int, x: int, y: int) -> tuple[int, ...]:
    offset = (y * width + x) * 3
    return tuple(pixels[offset:offset + 3])


def cell_centre(row: int, column: int) -> tuple[int, int]:
    return MARGIN + column * CELL + CELL // 2 + 8, TOP + row * CELL + CELL // 2  # right of the letter


def settle(game: FruitMerge, frames: int = 200) -> None:
    for _ in range(frames):
        game.tick()
        if not game.moving:
            return


def test_the_picture_shows_the_screen_the_fruit_and_the_score() -> None:
    game = FruitMerge(3)
    menu = picture.render_picture(game)
    assert (menu.width, menu.height, menu.mode) == (picture.WIDTH, picture.HEIGHT, "RGB")
    centre = (picture.WIDTH // 2, TOP + 5 * CELL - 30)
    assert pixel(menu.data, menu.width, *centre) != picture.BOARD  # the menu's banner covers the board

    game.new_round()
    kind = game.current
    empty = picture.render_picture(game)
    assert pixel(empty.data, empty.width, *cell_centre(9, 3)) == picture.BOARD
    game.drop(0)
    settle(game)
    landed = picture.render_picture(game)
    assert pixel(landed.data, landed.width, *cell_centre(9, 3)) == picture.FRUIT[kind]
    assert landed.data != empty.data

    game.score = 1234  # the score is drawn in the title bar
    scored = picture.render_picture(game)
    top_bar = slice(0, 3 * picture.WIDTH * 40)
    assert scored.data[top_bar] != landed.data[top_bar]

    game.set_paused(True)
    paused = picture.render_picture(game)
    assert pixel(paused.data, paused.width, *centre) != pixel(scored.data, scored.width, *centre)


def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def wait_completed(port: int, command_id: int) -> None:
    deadline = time.monotonic() + 10
    while json.loads(get(port, "/health")[2])["completedCommandId"] < command_id:
        assert time.monotonic() < deadline, "the command did not complete"
        time.sleep(0.01)


@pytest.mark.slow
def test_the_demo_program_serves_its_picture(tmp_path: Path) -> None:
    with demo_process("--hz", "200", "--no-register", "--screenshot-dir", str(tmp_path / "shots")) as demo:
        health = json.loads(get(demo.port, "/health")[2])
        assert "screenshot" in health["features"]
        status, headers, menu_png = get(demo.port, "/screenshot")
        assert status == 200 and headers["content-type"] == "image/png"
        assert int(headers["x-game-frame"]) >= health["frame"]
        width, height, _colour, _depth, menu = read_png(menu_png)
        assert (width, height) == (picture.WIDTH, picture.HEIGHT)

        answer = json.loads(get(demo.port, "/command?cmd=click&label=Start")[2])
        wait_completed(demo.port, answer["commandId"])
        status, _headers, game_png = get(demo.port, "/screenshot")
        assert status == 200 and read_png(game_png)[4] != menu  # the banner is gone

        status, _headers, small = get(demo.port, "/screenshot?maxWidth=192&maxHeight=192")
        assert status == 200 and read_png(small)[:2] == (120, 192)

        # the old text screenshot command still works alongside
        answer = json.loads(get(demo.port, "/command?cmd=screenshot&name=board")[2])
        wait_completed(demo.port, answer["commandId"])
        deadline = time.monotonic() + 10
        shot = tmp_path / "shots" / "board.txt"
        while not (shot.exists() and "Fruit Merge" in shot.read_text()):  # created first, then written
            assert time.monotonic() < deadline
            time.sleep(0.01)
        get(demo.port, "/command?cmd=close")
        assert demo.wait(10) == 0


# ---------------------------------------------------------------------- the screenshot files
def test_by_default_the_files_go_to_a_fresh_private_directory() -> None:
    first, second = FruitMerge(1), FruitMerge(1)
    for game in (first, second):
        game.screenshot("shot")
        for _ in range(SCREENSHOT_FRAMES):
            game.tick()
    paths = [Path(game.last_shot or "") for game in (first, second)]
    try:
        assert paths[0].parent != paths[1].parent  # one directory per game, not a fixed path
        for path in paths:
            assert path.name == "shot.txt"
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        for path in paths:
            path.unlink()
            path.parent.rmdir()


def test_a_planted_symlink_is_never_followed(tmp_path: Path) -> None:
    shots = tmp_path / "shots"
    shots.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (shots / "shot.txt").symlink_to(victim)
    written = PrivateDir(shots).write_new("shot", ".txt", b"picture")
    assert written == shots / "shot-2.txt" and written.read_bytes() == b"picture"
    assert victim.read_text() == "precious"


def test_a_symlinked_or_shared_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(OSError, match="not a directory of its own"):
        PrivateDir(tmp_path / "link").write_new("shot", ".txt", b"x")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(PermissionError, match="writable by other users"):
        PrivateDir(shared).write_new("shot", ".txt", b"x")
    assert list(real.iterdir()) == [] and list(shared.iterdir()) == []


def test_the_demo_reports_a_refused_directory_as_an_event(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    events: list[tuple[str, dict[str, object]]] = []
    game = FruitMerge(1, screenshot_dir=shared, emit=lambda m, **f: events.append((m, f)))
    game.screenshot("shot")
    for _ in range(SCREENSHOT_FRAMES):
        game.tick()
    failed = [fields for message, fields in events if message == "screenshot:failed"]
    assert failed and "writable by other users" in str(failed[0]["error"])
    assert game.to_state()["screenshots"]["pending"] == 0
