"""Screenshots in a recording and in its report: the recorder keeps a copy of each saved
screenshot beside the trace, and the report shows them inline, checked in a real browser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.errors import GameOffline
from game_bridge_mcp.trace.compare import IgnoreRules
from game_bridge_mcp.trace.reader import read_trace
from game_bridge_mcp.trace.recorder import Recorder
from game_bridge_mcp.trace.replay import replay
from game_bridge_mcp.trace.report import json_html, render_report, write_report
from browser import count_colour, dump_dom, read_png, screenshot, write_png

MAGENTA, CYAN = (255, 0, 255), (0, 200, 200)


class Shots:
    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def directory(self) -> Path | None:
        return self.folder


class OfflineBridge:
    """The edge the recorder reads identity from: here, a game that never answers, and the
    folder where its bridge saves screenshots (the only place copies are taken from)."""

    def __init__(self, shots: Path | None = None) -> None:
        self.config = Config(environ={}, registry_dir=Path("/nonexistent"))
        self.screenshots = Shots(shots)

    def manifest(self, port: int, **_kw: Any) -> Any:
        raise GameOffline(port)

    def launched_ports(self) -> list[int]:
        return []


def shot_answer(path: Path, frame: int) -> dict:
    return {"port": 7820, "frame": frame, "width": 60, "height": 40, "format": "png",
            "bytes": path.stat().st_size, "changed": True, "file": str(path)}


@pytest.mark.slow
def test_screenshots_are_copied_beside_the_trace_and_shown_inline(tmp_path: Path) -> None:
    shots = tmp_path / "bridge-shots"
    shots.mkdir()
    first = write_png(shots / "a.png", 60, 40, MAGENTA)
    trace_path = tmp_path / "rec" / "session.trace"
    recorder = Recorder(trace_path, OfflineBridge(shots))
    arguments = {"port": 7820, "name": "get_screenshot", "arguments": {"maxWidth": 60}}
    recorder.call("call_tool", arguments, lambda: shot_answer(first, 10))
    recorder.call("call_tool", arguments, lambda: shot_answer(first, 11))
    first.unlink()  # the bridge pruned its copy; the recording keeps its own
    trace = read_trace(trace_path)
    copies = [c.screenshot["copy"] for c in trace.calls]  # type: ignore[index]
    assert all(c.startswith("session.trace.files/") for c in copies) and len(set(copies)) == 2
    assert all((trace_path.parent / c).is_file() for c in copies)
    line = json.loads(trace_path.read_text().splitlines()[1])
    assert line["answer"]["format"] == "png" and "game" not in line  # no identity from a silent game

    replayed = [write_png(shots / "r1.png", 60, 40, MAGENTA), write_png(shots / "r2.png", 60, 40, CYAN)]
    answers = [dict(shot_answer(replayed[0], 90), port=40001), dict(shot_answer(replayed[1], 91), port=40001)]
    answers[1]["changed"] = False  # the second replayed screenshot is "the same as before": a divergence
    result = replay(trace, lambda _n, _a, _p, _o: answers.pop(0), {7820: 40001},
                    rules=IgnoreRules.defaults(), summarise=lambda s: s)
    assert [s.status for s in result.steps] == ["same", "diverged"]
    result.screenshots = shots  # the replaying bridge's folder
    page = write_report(tmp_path / "report.html", result)
    html = page.read_text()
    assert html.count('src="data:image/png;base64,') == 4  # recorded and replayed, both steps
    dom = dump_dom(page, tmp_path / "profile")
    assert dom.count('<img class="shot"') == 4
    assert "<td>changed</td><td>true</td><td>false</td>" in dom
    width, height, rows = read_png(screenshot(page, tmp_path / "profile", tmp_path / "page.png", size="900,1200"))
    # three magenta pictures (60x40 each) and one cyan one, drawn by the browser
    assert count_colour(rows, MAGENTA, tolerance=2) >= 3 * 60 * 40
    assert count_colour(rows, CYAN, tolerance=2) >= 60 * 40


def test_the_json_view_marks_differences_and_dims_what_is_ignored() -> None:
    text = json_html({"frame": 3, "game": {"score": 5, "board": [1, 2]}}, {"game.score", "game.board"},
                     ignored=IgnoreRules(["**.frame"]))
    assert '<span class="ig" title="not compared">  &quot;frame&quot;: 3</span>' in text
    assert '<mark class="d">5</mark>' in text
    assert '<mark class="d">    &quot;board&quot;: [' in text


def test_hostile_text_in_a_trace_cannot_inject_markup(tmp_path: Path) -> None:
    evil = '<script>alert(1)</script><img src="http://example.invalid/x">'
    path = tmp_path / "evil.trace"
    lines = [{"format": "game-bridge-trace", "version": 1, "created": evil, "bridge": evil, "recorder": evil},
             {"type": "call", "tool": "call_tool", "name": evil, "port": 7820, "arguments": {evil: evil},
              "answer": {evil: evil}, "screenshot": {"file": "/etc/passwd", "copy": "../../etc/passwd"}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    trace = read_trace(path)
    result = replay(trace, lambda *_a: {evil: evil}, {7820: 1}, rules=IgnoreRules(), summarise=lambda s: s)
    html = render_report(result)
    assert "<script" not in html and "example.invalid/x\">" not in html and 'src="http' not in html
    assert "&lt;script&gt;" in html
    assert "/etc/passwd is not available" in html  # not an image: named, never inlined


SCREEN_BG = (0x26, 0x32, 0x38)  # pre.screen's background in the report's style


def boxes_of(rows: list[bytes], rgb: tuple[int, int, int], tolerance: int = 3) -> list[tuple[int, int, int, int]]:
    """Bounding boxes (x0, y0, x1, y1) of the areas of ``rgb``, told apart by the columns they span."""
    points: dict[int, list[int]] = {}
    for y, row in enumerate(rows):
        for x in range(len(row) // 3):
            if all(abs(row[3 * x + c] - rgb[c]) <= tolerance for c in range(3)):
                points.setdefault(x, []).append(y)
    boxes: list[tuple[int, int, int, int]] = []
    for x in sorted(points):
        if boxes and x - boxes[-1][2] <= 3:
            x0, y0, _x1, y1 = boxes[-1]
            boxes[-1] = (x0, min(y0, min(points[x])), x, max(y1, max(points[x])))
        else:
            boxes.append((x, min(points[x]), x, max(points[x])))
    return [box for box in boxes if box[2] - box[0] > 10]


@pytest.mark.slow
def test_the_games_text_picture_is_drawn_as_monospace_text_with_its_lines(tmp_path: Path) -> None:
    """ui.text (a command's ``text``) is shown as the picture it is: in the real browser the
    recorded 4-line and the replayed 8-line pictures are boxes of one width (8 narrow
    characters as wide as 8 wide ones: monospace) whose heights differ by four lines."""
    recorded_text = "\n".join(["iiiiiiii"] * 4)
    replayed_text = "\n".join(["WWWWWWWW"] * 8)
    path = tmp_path / "board.trace"
    lines = [{"format": "game-bridge-trace", "version": 1, "created": "2026-01-01T00:00:00Z", "bridge": "t",
              "recorder": "t"},
             {"type": "call", "tool": "call_tool", "name": "drop", "port": 7820, "arguments": {"x": 0},
              "answer": {"port": 7820, "applied": True, "text": recorded_text}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = replay(read_trace(path), lambda *_a: {"port": 40001, "applied": True, "text": replayed_text},
                    {7820: 40001}, rules=IgnoreRules.defaults(), summarise=lambda s: s)
    assert [s.status for s in result.steps] == ["diverged"]
    page = write_report(tmp_path / "report.html", result)
    dom = dump_dom(page, tmp_path / "profile")
    # Lines kept (not shown as an escaped "\n" string); a differing picture is outlined on both sides.
    assert f'<pre class="screen d" title="text">{recorded_text}</pre>' in dom
    assert f'<pre class="screen d" title="text">{replayed_text}</pre>' in dom
    _w, _h, rows = read_png(screenshot(page, tmp_path / "profile", tmp_path / "page.png", size="1200,900"))
    boxes = boxes_of(rows, SCREEN_BG)
    assert len(boxes) == 2, boxes
    (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = boxes
    assert abs((ax1 - ax0) - (bx1 - bx0)) <= 2, boxes  # monospace: "iiiiiiii" as wide as "WWWWWWWW"
    line = ((by1 - by0) - (ay1 - ay0)) / 4  # four more lines
    assert 12 <= line <= 30, boxes
    assert (ay1 - ay0) >= 4 * line, boxes  # the recorded picture's four lines are four lines


def test_a_text_picture_is_escaped_and_found_in_a_whole_state() -> None:
    from game_bridge_mcp.trace.report import text_picture

    assert text_picture({"ui": {"text": "a\nb"}, "frame": 1}) == ("ui.text", "a\nb")
    assert text_picture({"text": "x", "ui": {"text": "y"}}) == ("text", "x")
    assert text_picture({"text": 3}) is None and text_picture(None) is None and text_picture({"ui": "t"}) is None
    evil = {"text": "<script>alert(1)</script>\n</pre><img src=x>"}
    path_html = render_report(replay(_one_call_trace(evil), lambda *_a: evil, {7820: 1}, rules=IgnoreRules(),
                                     summarise=lambda s: s))
    assert "<script" not in path_html and "<img src=x>" not in path_html
    assert "&lt;/pre&gt;&lt;img src=x&gt;" in path_html


def _one_call_trace(answer: dict) -> Any:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="gbm-report-"))
    path = folder / "one.trace"
    lines = [{"format": "game-bridge-trace", "version": 1, "created": "c", "bridge": "b", "recorder": "r"},
             {"type": "call", "tool": "call_tool", "name": "look", "port": 7820, "arguments": {}, "answer": answer}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return read_trace(path)
