"""The kit's ``/screenshot`` under a real game-loop thread: fresh frames captured on the
game thread, scaled to fit, the headers, and every way a game can fail to show itself."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
import pygame  # noqa: E402

from game_bridge_mcp.game import GameBridge, Pixels  # noqa: E402
from png_helpers import read_png  # noqa: E402

pytestmark = pytest.mark.timeout(30)


class Painter:
    """A game whose whole picture is one colour, set by a command."""

    def __init__(self, size: tuple[int, int] = (64, 32)) -> None:
        self.size = size
        self.colour = (10, 20, 30)
        self.capture_threads: list[str] = []

    def capture(self) -> Pixels:
        self.capture_threads.append(threading.current_thread().name)
        width, height = self.size
        return Pixels(bytes(self.colour) * (width * height), width, height, "RGB")


@contextmanager
def running(bridge: GameBridge, *, hz: float = 200.0, pumping: threading.Event | None = None) -> Iterator[GameBridge]:
    """Serve ``bridge`` on port 0 with a game loop on its own thread named 'game-loop'.
    ``pumping``: while it is clear the loop does not call pump() (a blocked game)."""
    bridge.start(0)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set() and bridge.running:
            if pumping is None or pumping.is_set():
                bridge.pump()
            time.sleep(1 / hz)

    thread = threading.Thread(target=loop, name="game-loop", daemon=True)
    thread.start()
    try:
        yield bridge
    finally:
        stop.set()
        thread.join(5)
        bridge.stop()


def get(bridge: GameBridge, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", bridge.port, timeout=15)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def painter_bridge(painter: Painter, **kwargs: Any) -> GameBridge:
    bridge = GameBridge("Painter", "1.0", register=False, screenshot=painter.capture, **kwargs)

    @bridge.command(toolset="play")
    def paint(r: int, g: int, b: int) -> None:
        """Paint the whole picture one colour."""
        painter.colour = (r, g, b)

    return bridge


def test_a_screenshot_is_a_png_of_a_frame_after_the_request_captured_on_the_game_thread() -> None:
    painter = Painter()
    with running(painter_bridge(painter)) as bridge:
        before = bridge.frame
        status, headers, body = get(bridge, "/screenshot?maxWidth=768&maxHeight=768")
        assert status == 200, body
        assert headers["content-type"] == "image/png"
        assert int(headers["x-game-frame"]) > before
        assert "x-game-window" not in headers
        width, height, colour, _depth, pixels = read_png(body)
        assert (width, height, colour) == (64, 32, 2)
        assert pixels == bytes([10, 20, 30]) * (64 * 32)
        assert set(painter.capture_threads) == {"game-loop"}


def test_the_picture_shows_a_command_completed_before_the_request() -> None:
    painter = Painter()
    with running(painter_bridge(painter)) as bridge:
        status, headers, body = get(bridge, "/command?cmd=paint&r=200&g=100&b=0")
        command_id = json.loads(body)["commandId"]
        deadline = time.monotonic() + 5
        while bridge.completed_command_id < command_id and time.monotonic() < deadline:
            time.sleep(0.002)
        completed_at = bridge.frame
        status, headers, body = get(bridge, "/screenshot")
        assert status == 200
        assert int(headers["x-game-frame"]) > completed_at
        assert read_png(body)[4][:3] == bytes([200, 100, 0])


@pytest.mark.parametrize("query, size", [
    ("maxWidth=100&maxHeight=100", (100, 50)),
    ("maxWidth=1000&maxHeight=30", (60, 30)),
    ("maxWidth=5000&maxHeight=5000", (400, 200)),   # never up
    ("", (400, 200)),                                # defaults: 768 x 768
])
def test_the_picture_is_scaled_to_fit_keeping_its_aspect(query: str, size: tuple[int, int]) -> None:
    with running(painter_bridge(Painter((400, 200)))) as bridge:
        status, _headers, body = get(bridge, "/screenshot?" + query)
        assert status == 200
        assert read_png(body)[:2] == size


@pytest.mark.parametrize("query, message", [
    ("maxWidth=abc", "maxWidth must be a whole number"),
    ("maxWidth=0", "maxWidth must be a whole number from 1 to 16384, got '0'"),
    ("maxHeight=-5", "maxHeight must be a whole number"),
    ("maxWidth=99999999999", "maxWidth must be a whole number"),
    ("maxWidth=10&maxWidth=20", "given more than once"),
])
def test_bad_limits_are_a_400_naming_the_parameter(query: str, message: str) -> None:
    with running(painter_bridge(Painter())) as bridge:
        status, headers, body = get(bridge, "/screenshot?" + query)
        assert status == 400
        assert headers["content-type"].startswith("application/json")
        doc = json.loads(body)
        assert doc["ok"] is False and message in doc["error"]


def capture_bridge(capture: Callable[[], Any]) -> GameBridge:
    return GameBridge("Broken", "1.0", register=False, screenshot=capture)


def _raises() -> Any:
    raise RuntimeError("the GPU went away")


@pytest.mark.parametrize("capture, message", [
    (_raises, "the game's capture failed: RuntimeError: the GPU went away"),
    (lambda: None, "nothing to show right now"),
    (lambda: "a picture", "returned a str"),
    (lambda: Pixels(b"\0" * 5, 2, 2), "need 12 bytes"),
    (lambda: Pixels(b"", 20000, 20000), "larger than the kit accepts"),
    (lambda: b"<html>not an image</html>", "not a PNG or JPEG"),
])
def test_a_game_that_cannot_render_answers_503_with_the_reason(capture, message) -> None:
    with running(capture_bridge(capture)) as bridge:
        status, headers, body = get(bridge, "/screenshot")
        assert status == 503
        doc = json.loads(body)
        assert doc["ok"] is False and message in doc["error"], doc
        # ...and the game keeps serving
        assert get(bridge, "/health")[0] == 200


def test_a_game_that_does_not_pump_answers_503_within_the_wait() -> None:
    painter = Painter()
    bridge = GameBridge("Stuck", "1.0", register=False)
    bridge.screenshot(painter.capture, wait_s=0.3)
    pumping = threading.Event()
    with running(bridge, pumping=pumping):
        status, _headers, body = get(bridge, "/screenshot")
        assert status == 503
        assert "did not reach a frame within 0.3 s" in json.loads(body)["error"]
        pumping.set()  # the loop comes back: the next request is served
        assert get(bridge, "/screenshot")[0] == 200
        assert painter.capture_threads  # captured only once the loop pumped


def test_stopping_releases_a_waiting_request_at_once() -> None:
    bridge = GameBridge("Stopping", "1.0", register=False, screenshot=Painter().capture)
    pumping = threading.Event()
    answers: list[tuple[int, bytes]] = []
    with running(bridge, pumping=pumping):
        waiter = threading.Thread(target=lambda: answers.append(get(bridge, "/screenshot")[::2]))
        waiter.start()
        deadline = time.monotonic() + 5
        while not (bridge.screenshots and bridge.screenshots.waiting) and time.monotonic() < deadline:
            time.sleep(0.005)
        bridge.stop()
        waiter.join(30)
        assert not waiter.is_alive()
    assert answers and answers[0][0] == 503
    assert "closing" in json.loads(answers[0][1])["error"]


def test_health_advertises_screenshot_only_when_a_capture_is_registered() -> None:
    with running(GameBridge("Plain", "1.0", register=False)) as plain:
        assert "screenshot" not in json.loads(get(plain, "/health")[2]).get("features", [])
        assert get(plain, "/screenshot")[0] == 404
    with running(painter_bridge(Painter())) as shooter:
        assert "screenshot" in json.loads(get(shooter, "/health")[2])["features"]


def test_a_surface_capture_is_smoothscaled_and_says_its_window() -> None:
    surface = pygame.Surface((320, 240))
    surface.fill((0, 200, 0))
    bridge = GameBridge("Surface", "1.0", register=False)

    @bridge.screenshot(window=surface.get_size)
    def capture() -> Any:
        return surface

    with running(bridge):
        status, headers, body = get(bridge, "/screenshot?maxWidth=160&maxHeight=160")
        assert status == 200 and headers["x-game-window"] == "320x240"
        width, height, _colour, _depth, pixels = read_png(body)
        assert (width, height) == (160, 120)
        assert pixels[:3] == bytes([0, 200, 0])


def test_a_capture_that_takes_the_limits_renders_at_that_size() -> None:
    asked: list[tuple[int, int]] = []

    def capture(max_width: int, max_height: int) -> Pixels:
        asked.append((max_width, max_height))
        return Pixels(b"\xff" * (max_width * max_height), max_width, max_height, "L")

    with running(capture_bridge(capture)) as bridge:
        status, _headers, body = get(bridge, "/screenshot?maxWidth=30&maxHeight=20")
        assert status == 200 and read_png(body)[:3] == (30, 20, 0)
    assert asked == [(30, 20)]


def test_concurrent_requests_share_one_capture() -> None:
    painter = Painter()
    pumping = threading.Event()
    results: list[int] = []
    with running(painter_bridge(painter), pumping=pumping) as bridge:
        threads = [threading.Thread(target=lambda: results.append(get(bridge, "/screenshot")[0]))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 5
        while bridge.screenshots is not None and bridge.screenshots.waiting < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        pumping.set()
        for thread in threads:
            thread.join(10)
    assert results == [200] * 4
    assert len(painter.capture_threads) == 1
