"""The trace file: the writer's header and lines, its failures, and every way a reader
can be handed a broken file."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.trace.format import ANSWER_CAP, FORMAT, VERSION, answer_fields, header
from game_bridge_mcp.trace.reader import read_trace
from game_bridge_mcp.trace.writer import TraceWriter


def call_line(**over: object) -> dict:
    line = {"type": "call", "time": "2026-01-01T00:00:00.000Z", "t": 1.0, "tool": "call_tool",
            "name": "drop", "port": 7820, "arguments": {"x": 1}, "durationMs": 3.0,
            "answer": {"port": 7820, "game": {"score": 1}}}
    line.update(over)
    return line


def write_lines(path: Path, lines: list, *, newline: bool = True) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    path.write_text(text + ("\n" if newline else ""), encoding="utf-8")
    return path


def test_the_writer_starts_with_a_header_and_appends_one_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "rec.trace"
    writer = TraceWriter(path, recorder="serve", bridge_version="9.9")
    assert writer.write(call_line())
    assert writer.write(call_line(name="hold", arguments={}))
    writer.close()
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    assert first["format"] == FORMAT and first["version"] == VERSION
    assert first["bridge"] == "9.9" and first["recorder"] == "serve"
    assert [json.loads(x)["name"] for x in lines[1:]] == ["drop", "hold"]
    # a second writer (another `call` process) appends, with no second header
    again = TraceWriter(path, recorder="call", bridge_version="9.9")
    again.write(call_line(name="click"))
    again.close()
    trace = read_trace(path)
    assert [c.name for c in trace.calls] == ["drop", "hold", "click"]
    assert [c.step for c in trace.calls] == [1, 2, 3]


def test_lines_reach_the_file_as_they_are_written(tmp_path: Path) -> None:
    path = tmp_path / "rec.trace"
    writer = TraceWriter(path, recorder="serve", bridge_version="1")
    writer.write(call_line())
    # not closed, nothing flushed by hand: another reader sees the line already
    assert len(read_trace(path).calls) == 1
    writer.close()


def test_threads_writing_at_once_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "rec.trace"
    writer = TraceWriter(path, recorder="serve", bridge_version="1")
    big = "y" * 20000

    def work(n: int) -> None:
        for i in range(25):
            writer.write(call_line(arguments={"n": n, "i": i, "pad": big}))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    assert len(read_trace(path).calls) == 100


def test_a_write_failure_is_reported_once_and_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    warnings: list[str] = []
    writer = TraceWriter(blocker / "rec.trace", recorder="serve", bridge_version="1", warn=warnings.append)
    assert writer.write(call_line()) is False
    assert writer.write(call_line()) is False
    assert writer.failed
    assert len(warnings) == 1
    assert "not recording to" in warnings[0] and "cannot open it" in warnings[0]


def test_a_full_disk_is_one_warning(tmp_path: Path) -> None:
    warnings: list[str] = []
    writer = TraceWriter("/dev/full", recorder="serve", bridge_version="1", warn=warnings.append)
    assert writer.write(call_line()) is False
    assert writer.write(call_line()) is False
    assert len(warnings) == 1 and "No space" in warnings[0]


def test_a_fifo_or_a_directory_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    for target in (tmp_path / "fifo", tmp_path):
        warnings: list[str] = []
        writer = TraceWriter(target, recorder="serve", bridge_version="1", warn=warnings.append)
        assert writer.write(call_line()) is False and len(warnings) == 1


def test_the_writer_will_not_append_to_a_file_that_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my precious notes\n")
    warnings: list[str] = []
    writer = TraceWriter(path, recorder="serve", bridge_version="1", warn=warnings.append)
    assert writer.write(call_line()) is False
    assert path.read_text() == "my precious notes\n"
    assert len(warnings) == 1 and "is not a game-bridge trace" in warnings[0]


def test_an_answer_over_the_cap_is_kept_as_its_digest() -> None:
    state = {"port": 7820, "frame": 5, "game": {"score": 3, "board": ["x" * 1000] * (ANSWER_CAP // 900)}}
    fields = answer_fields(state, lambda s: {"game": {"score": s["game"]["score"]}})
    assert "answer" not in fields
    assert fields["answerSummary"] == {"port": 7820, "game": {"score": 3}}
    assert fields["answerBytes"] > ANSWER_CAP and len(fields["answerSha256"]) == 64
    small = answer_fields({"a": float("nan"), "b": b"\x89PNG"})
    assert small == {"answer": {"a": None, "b": {"bytes": 4}}}


# ----------------------------------------------------------------------------- bad input

def bad(path: Path) -> str:
    with pytest.raises(BridgeUsageError) as caught:
        read_trace(path)
    assert caught.value.exit_code == 2
    return caught.value.render()


def test_a_truncated_trace_says_which_line_and_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    full = json.dumps(call_line())
    write_lines(path, [header("serve", "1"), call_line(), full[: len(full) // 2]], newline=False)
    text = bad(path)
    assert "is truncated" in text and "line 3" in text
    assert "Delete line 3 to replay the 1 calls before it" in text


def test_a_line_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.trace", [header("serve", "1"), "this is not json", call_line()])
    text = bad(path)
    assert "not JSON: line 2" in text and "'this is not json'" in text


def test_json_that_is_not_an_object_and_nan_are_refused(tmp_path: Path) -> None:
    assert "not a JSON object: line 2" in bad(write_lines(tmp_path / "a.trace", [header("serve", "1"), "[1, 2]"]))
    assert "not JSON: line 2" in bad(write_lines(tmp_path / "b.trace", [header("serve", "1"), '{"t": NaN}']))


def test_a_deeply_nested_line_is_bad_input_not_a_crash(tmp_path: Path) -> None:
    deep = "[" * 100000 + "]" * 100000
    text = bad(write_lines(tmp_path / "t.trace", [header("serve", "1"), deep]))
    assert "line 2" in text


def test_a_newer_format_version_asks_for_an_upgrade(tmp_path: Path) -> None:
    head = header("serve", "1")
    head["version"] = VERSION + 1
    text = bad(write_lines(tmp_path / "t.trace", [head, call_line()]))
    assert f"format version {VERSION + 1}" in text and "Upgrade game-bridge-mcp" in text


def test_files_that_are_not_traces(tmp_path: Path) -> None:
    assert "missing.trace does not exist" in bad(tmp_path / "missing.trace")
    os.mkfifo(tmp_path / "fifo.trace")  # would block a plain open() for ever
    assert "is not a regular file" in bad(tmp_path / "fifo.trace")
    assert "is not a regular file" in bad(tmp_path)
    (tmp_path / "empty.trace").write_text("")
    assert "is empty" in bad(tmp_path / "empty.trace")
    assert "not a game-bridge trace" in bad(write_lines(tmp_path / "other.jsonl", [{"hello": 1}]))
    head = header("serve", "1")
    head["version"] = "1"
    assert "no valid format version" in bad(write_lines(tmp_path / "v.trace", [head]))


def test_call_lines_without_what_a_replay_needs(tmp_path: Path) -> None:
    h = header("serve", "1")
    assert "without a tool name on line 2" in bad(write_lines(tmp_path / "a.trace", [h, call_line(tool="")]))
    assert "invalid port 99999" in bad(write_lines(tmp_path / "b.trace", [h, call_line(port=99999)]))
    assert "without the tool it ran" in bad(write_lines(tmp_path / "c.trace", [h, call_line(name=None)]))
    assert "arguments are not a JSON object" in bad(write_lines(tmp_path / "d.trace", [h, call_line(arguments=[1])]))
    no_answer = call_line()
    del no_answer["answer"]
    assert "neither an answer nor an error" in bad(write_lines(tmp_path / "e.trace", [h, no_answer]))


def test_unknown_line_types_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.trace", [header("serve", "1"), {"type": "note", "text": "hi"}, "",
                                               call_line(), call_line(tool="list_instances", name=None, port=None)])
    trace = read_trace(path)
    assert len(trace.calls) == 2
    assert [c.replayed for c in trace.calls] == [True, False]
    assert trace.ports() == [7820]
