"""What an agent sees of a web page and how it points at it (issue 37): ``ui.text`` is the
text in the viewport, in reading order, capped, the whole page's text is in the full state;
a click at a point of a scaled picture, with its scale, lands on what the picture shows
there; the wheel scrolls. One wrapper on tests/peers/web/long at 800x600 (its default
screenshot, 768x576, is scaled), in real headless Chromium."""

from __future__ import annotations

import io
from typing import Any, Iterator

import pytest

from game_bridge_mcp.game.browser._look import UI_TEXT
from launch_helpers import ProcessGuard
from web_helpers import PAGES, Wrapped, wrapped

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

#: The boxes' page rectangles (left, top, width, height), as the page's CSS places them.
BOXES = {"red": (40, 120, 100, 60), "blue": (640, 470, 100, 60)}


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wrapped]:
    guard = ProcessGuard(tmp_path_factory.mktemp("view-guard"))
    with wrapped(guard, "--size", "800x600", str(PAGES / "long")) as running:
        yield running
    guard.check()


def state(game: Wrapped) -> dict[str, Any]:
    return dict(game.doc("/state"))


def test_ui_text_is_what_the_viewport_shows_in_reading_order_and_capped(game: Wrapped) -> None:
    seen = state(game)
    text = seen["ui"]["text"]
    assert text.startswith("First line of the page."), text[:80]
    assert "Score 42" in text.split("\n")[0]  # the fixed HUD reads on the first line, after it
    second = text.split("\n")[1]
    assert second == "Second line, with bold words inside it."  # one line, its parts in order
    for hidden in ("Hidden by display none", "Hidden by visibility", "Far below the fold"):
        assert hidden not in text
    assert len(text) <= UI_TEXT + 3 and text.endswith("...")
    assert seen["browser"]["textLength"] > UI_TEXT
    # the whole page, off-screen text included (hidden text is not), in the full state
    page = seen["browser"]["text"]
    assert "Far below the fold." in page and "Hidden by" not in page
    assert page.index("First line") < page.index("Second line") < page.index("Far below")
    assert "Second line, with bold words inside it." in page
    digest = game.doc("/state?view=digest")
    assert "browser" not in digest and digest["ui"]["text"] == text


def pixel(png: bytes, x: int, y: int) -> tuple[int, int, int]:
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB").getpixel((x, y))  # type: ignore[no-any-return]


@pytest.mark.parametrize("bounds", ["", "?maxWidth=400&maxHeight=400", "?maxWidth=640&maxHeight=640"])
def test_a_click_at_a_point_of_the_picture_lands_on_what_it_shows_there(game: Wrapped, bounds: str) -> None:
    status, headers, png = game.get("/screenshot" + bounds)
    assert status == 200 and headers["x-game-window"] == "800x600"
    from PIL import Image

    width = Image.open(io.BytesIO(png)).size[0]
    scale = round(width / 800, 4)
    assert scale < 1
    for name, (left, top, w, h) in BOXES.items():
        # the box's centre as the picture shows it
        x, y = int((left + w / 2) * scale), int((top + h / 2) * scale)
        assert pixel(png, x, y) == ({"red": (221, 0, 0), "blue": (0, 0, 221)}[name])
        click = game.send(f"cmd=mouse&x={x}&y={y}&scale={scale}")
        game.run("cmd=step&frames=2")
        done = game.outcome(click)
        assert done["ok"] is True and done["result"]["scale"] == scale, done
        target, cx, cy = state(game)["game"]["clicks"][-1]
        assert target == name, (name, target, cx, cy)
        assert left <= cx < left + w and top <= cy < top + h
    outside = game.outcome(game.send(f"cmd=mouse&x={width}&y=1&scale={scale}"))
    assert outside["ok"] is False and "outside the" in outside["error"] and "picture" in outside["error"]


def test_the_wheel_scrolls_the_page_where_the_pointer_is(game: Wrapped) -> None:
    before = state(game)["game"]
    assert before["scrollY"] == 0
    wheel = game.send("cmd=mouse&x=400&y=300&action=wheel&dy=1200")
    game.run("cmd=step&frames=2")
    assert game.outcome(wheel)["result"] == {"x": 400, "y": 300, "button": 1, "action": "wheel", "dx": 0, "dy": 1200}
    after = state(game)
    assert after["game"]["scrollY"] == 1200 and after["game"]["wheels"] == before["wheels"] + 1
    assert "First line" not in after["ui"]["text"]  # scrolled out of view
    # the green box (page y 1500) is now at viewport y 300: a click there hits it
    game.send("cmd=mouse&x=350&y=330")
    game.run("cmd=step&frames=2")
    assert state(game)["game"]["clicks"][-1][0] == "green"
    back = game.send("cmd=mouse&x=400&y=300&action=wheel&dy=-5000")
    game.run("cmd=step&frames=2")
    assert game.outcome(back)["ok"] is True and state(game)["game"]["scrollY"] == 0  # (as far as it goes)
    for bad, why in (("action=wheel", "give at least one"), ("action=click&dy=100", "dx and dy are for action wheel")):
        refused = game.outcome(game.send(f"cmd=mouse&x=1&y=1&{bad}"))
        assert refused["ok"] is False and why in refused["error"], refused
