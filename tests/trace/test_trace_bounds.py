"""A crafted trace costs little: it is read line by line and let go (a call keeps where its
line is, and reads it again when its answer is wanted), within bounds on its size, a line
and its calls; and the report renders any answer in bounded time (a huge one as plain,
cut JSON), through the CLI where it matters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.trace import reader
from game_bridge_mcp.trace.compare import IgnoreRules
from game_bridge_mcp.trace.reader import MAX_LINE_BYTES, read_trace
from game_bridge_mcp.trace.replay import replay
from game_bridge_mcp.trace.report import MAX_JSON_CHARS, render_report
from peers.handmade import HandmadeGame

ROOT = Path(__file__).resolve().parents[2]
HEADER = {"format": "game-bridge-trace", "version": 1}


def call_line(n: int, answer: object, **extra: object) -> dict:
    return {"type": "call", "tool": "call_tool", "name": "noop", "port": 7820, "session": "s1",
            "arguments": {"n": n}, "answer": answer, **extra}


def write(path: Path, lines: list[dict]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
    return path


@pytest.mark.slow
def test_reading_holds_no_line_once_it_is_checked(tmp_path: Path) -> None:
    entity = {"id": 1, "kind": "crate", "pos": [1.5, 2.5], "tags": ["a", "b"]}
    answer = {"game": {"entities": [dict(entity, id=i) for i in range(120)]}}  # ~7 KB a line
    path = write(tmp_path / "big.trace", [HEADER] + [call_line(n, answer) for n in range(3000)])
    size = path.stat().st_size
    assert size > 20_000_000
    tracemalloc.start()
    try:
        trace = read_trace(path)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(trace.calls) == 3000
    assert peak < size / 4, f"reading a {size:,}-byte trace peaked at {peak:,} bytes"
    # every call still gives its whole record, read again from the file
    assert trace.calls[2999].arguments == {"n": 2999} and trace.calls[17].record["answer"] == answer
    assert trace.calls[5].session == "s1" and trace.identity(7820) == {}


def test_a_line_too_long_and_too_many_calls_are_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_line = call_line(1, {"blob": "x" * (MAX_LINE_BYTES + 10)})
    path = write(tmp_path / "long.trace", [HEADER, call_line(0, {}), long_line])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "replay", str(path), "--port", "1"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "a line longer than 16,777,216 bytes (line 3)" in out.stderr
    monkeypatch.setattr(reader, "MAX_CALLS", 50)
    many = write(tmp_path / "many.trace", [HEADER] + [call_line(n, {}) for n in range(51)])
    with pytest.raises(BridgeUsageError, match="more than 50 calls"):
        read_trace(many)


def test_a_file_changed_under_a_replay_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path / "t.trace", [HEADER, call_line(0, {"a": 1}), call_line(1, {"b": 2})])
    trace = read_trace(path)
    path.write_text(path.read_text().replace('"b": 2', '"b": "changed"!'))
    with pytest.raises(BridgeUsageError, match="changed while it was replayed"):
        trace.calls[1].record  # noqa: B018 - the access is what raises


@pytest.mark.slow
def test_a_huge_answer_is_reported_as_plain_cut_json(tmp_path: Path) -> None:
    wide = {"rows": [{"id": i, "name": f"entity {i}", "pos": [i, i + 1]} for i in range(110_000)]}
    path = write(tmp_path / "wide.trace", [HEADER, call_line(0, wide)])
    assert path.stat().st_size > 4_300_000
    trace = read_trace(path)
    result = replay(trace, lambda *_a: {"rows": []}, {7820: 1}, rules=IgnoreRules.defaults(),
                    summarise=lambda s: s)
    assert result.steps[0].status == "diverged"
    html = render_report(result)
    assert "more characters left out" in html and len(html) < 4 * MAX_JSON_CHARS + 200_000
    assert '<table class="diff">' in html and html.count("<tr><td>rows.") >= 1  # the differences, listed


@pytest.mark.slow
def test_replay_of_a_trace_with_a_huge_line_through_the_cli(tmp_path: Path) -> None:
    wide = {"rows": [{"id": i, "name": f"entity {i}", "pos": [i, i + 1]} for i in range(110_000)]}
    with HandmadeGame() as game:
        path = write(tmp_path / "wide.trace", [HEADER, dict(call_line(0, wide), port=game.port)])
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
        out = subprocess.run([sys.executable, "-m", "game_bridge_mcp", "replay", str(path), "--port", str(game.port),
                              "--force", "--report", str(tmp_path / "r.html")],
                             capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1 and "DIVERGED at step 1 of 1" in out.stdout, out.stderr
    assert len(out.stdout) < 20_000  # the label and the values shown are cut
    assert "more characters left out" in (tmp_path / "r.html").read_text()
