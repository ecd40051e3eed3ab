"""What the command line prints reaches a person at a terminal, so text a crafted trace or a
hostile game carries (escape sequences that set the title, write the clipboard or clear the
screen, bidi overrides, invisible characters) is removed from every output path: ``replay``
in a real process here; ``check`` in test_boundary.py."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from game_bridge_mcp.terminal.text import TerminalText, terminal
from peers.handmade import HandmadeGame
from peers.hostile_text import EVIL, forbidden

ROOT = Path(__file__).resolve().parents[2]
TITLE, CLIPBOARD, CLEAR = "\x1b]0;owned\x07", "\x1b]52;c;ZXZpbA==\x07", "\x1b[2J\x1b[H"
CRAFTED = f"{TITLE}{CLIPBOARD}{CLEAR}\u202etxt.exe\u202c\x9b31m{EVIL}"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    env.pop("GAME_BRIDGE_PORT", None)
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=90)


def assert_clean(text: str) -> None:
    for line in text.splitlines():
        assert not forbidden(line), (forbidden(line), line[:300])


def crafted_trace(path: Path, port: int) -> Path:
    game = {"name": "Handmade", "version": CRAFTED, "cwd": f"/tmp/{CRAFTED}", "paused": False,
            "declaration": {"command": [CRAFTED]}}
    lines = [{"format": "game-bridge-trace", "version": 1, "created": CRAFTED, "bridge": CRAFTED},
             {"type": "call", "tool": "call_tool", "name": "noop", "port": port, "session": CRAFTED,
              "arguments": {f"\u202e{CRAFTED}": CRAFTED}, "answer": {CRAFTED: CRAFTED}, "game": game},
             {"type": "call", "tool": "call_tool", "name": f"no{CRAFTED}", "port": port,
              "arguments": {}, "answer": {"x": CRAFTED}, "game": game}]
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.slow
def test_replay_prints_a_crafted_traces_text_without_its_escapes(tmp_path: Path) -> None:
    with HandmadeGame() as game:
        trace = crafted_trace(tmp_path / "crafted.trace", game.port)
        refused = run(tmp_path, "replay", str(trace), "--port", str(game.port))  # the version differs
        forced = run(tmp_path, "replay", str(trace), "--port", str(game.port), "--force")
        updated = run(tmp_path, "replay", str(trace), "--port", str(game.port), "--force", "--update")
    assert refused.returncode == 2 and "owned" in refused.stderr  # the text is shown, cleaned
    assert forced.returncode == 1 and "DIVERGED" in forced.stdout and "txt.exe" in forced.stdout
    assert "note:" in forced.stdout and updated.returncode == 0
    for out in (refused, forced, updated):
        assert_clean(out.stdout)
        assert_clean(out.stderr)


@pytest.mark.slow
def test_a_broken_traces_line_is_quoted_clean(tmp_path: Path) -> None:
    trace = tmp_path / "broken.trace"
    trace.write_text('{"format": "game-bridge-trace", "version": 1}\n' + CRAFTED + "\n", encoding="utf-8")
    out = run(tmp_path, "replay", str(trace), "--port", "1")
    assert out.returncode == 2 and "not JSON" in out.stderr
    assert_clean(out.stderr)


def test_the_one_cleaner_keeps_text_and_lines_and_wraps_once() -> None:
    sink = io.StringIO()
    stream = terminal(sink)  # type: ignore[arg-type]
    assert terminal(stream) is stream and isinstance(stream, TerminalText)
    stream.write("score: 12\n\tnext ")
    stream.write(CRAFTED[:3])  # a sequence split across writes is removed all the same
    stream.write(CRAFTED[3:] + "\n")
    assert sink.getvalue().startswith("score: 12\n\tnext ]0;owned]52;c;ZXZpbA==[2J[Htxt.exe31mAB[31mC")
    assert not forbidden(sink.getvalue().replace("\n", "").replace("\t", ""))
