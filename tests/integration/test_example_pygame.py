"""examples/star_catcher.py, a real pygame-ce game on the kit, launched the way the bridge
launches games (a gamebridge.json, the Launcher, a free port): its screenshots are its
real display Surface, and they change when a command moves the player."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from typing import Any

import pytest

from launch_helpers import PYTHON, LauncherFactory, free_range
from png_helpers import read_png

pytestmark = pytest.mark.timeout(90)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "star_catcher.py"
CATCHER = (80, 170, 255)
CATCHER_ROW = 480 - 32  # the middle of the catcher


def declare(directory: Path) -> Path:
    low, high = free_range(4)
    doc = {"name": "Star Catcher",
           "launch": {"argv": [PYTHON, str(EXAMPLE), "--debug-port", "{port}", "--seed", "3"],
                      "portRange": f"{low}-{high}", "readyTimeoutMs": 30000}}
    path = directory / "gamebridge.json"
    path.write_text(json.dumps(doc))
    return path


def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def command(port: int, query: str) -> dict[str, Any]:
    answer = json.loads(get(port, "/command?" + query)[2])
    assert answer["accepted"], answer
    deadline = time.monotonic() + 10
    while json.loads(get(port, "/health")[2])["completedCommandId"] < answer["commandId"]:
        assert time.monotonic() < deadline, "the command did not complete"
        time.sleep(0.01)
    return answer


def catcher_columns(pixels: bytes, width: int) -> list[int]:
    row = pixels[CATCHER_ROW * width * 3:(CATCHER_ROW + 1) * width * 3]
    return [x for x in range(width) if tuple(row[3 * x:3 * x + 3]) == CATCHER]


@pytest.mark.slow
def test_the_pygame_example_shows_its_real_frames_and_the_player_moves(tmp_path: Path,
                                                                       launchers: LauncherFactory) -> None:
    launcher = launchers(declare(tmp_path))
    port = launcher.launch()["port"]
    health = json.loads(get(port, "/health")[2])
    assert "screenshot" in health["features"]

    status, headers, body = get(port, "/screenshot?maxWidth=768&maxHeight=768")
    assert status == 200 and headers["content-type"] == "image/png"
    assert int(headers["x-game-frame"]) >= health["frame"]
    width, height, _colour, _depth, before = read_png(body)
    assert (width, height) == (640, 480)
    start = catcher_columns(before, width)
    assert start and min(start) < 320 < max(start)  # the catcher starts in the middle

    command(port, "cmd=move&dx=-200")
    status, headers, body = get(port, "/screenshot")
    after = read_png(body)[4]
    moved = catcher_columns(after, width)
    assert moved and max(moved) < min(start)  # drawn 200 px to the left, in a later frame
    state = json.loads(get(port, "/state")[2])
    assert state["game"]["x"] == 120

    status, _headers, small = get(port, "/screenshot?maxWidth=320&maxHeight=320")
    assert status == 200 and read_png(small)[:2] == (320, 240)  # smoothscaled by the kit

    assert launcher.stop(port, grace_ms=5000)["how"] == "closed cleanly"
