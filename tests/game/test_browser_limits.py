"""The browser wrapper's bounds that end a page or outlive it (issue 38, item 8): a page
that holds more memory than --max-memory is ended and says so; the folder of a wrapper that
was ended hard (SIGKILL) is removed at the next start, never a live one's."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from game_bridge_mcp.game.browser._chromium import OWNER, SCRATCH_PREFIX, prune_scratch
from launch_helpers import PYTHON, ProcessGuard, wait_until
from web_helpers import PAGES, wrapped

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def run_ok(game: object, command: str) -> None:
    done = game.outcome(game.send(f"cmd={command}"))  # type: ignore[attr-defined]
    assert done["ok"] is True, done


def test_memory_over_the_cap_ends_the_page_and_says_so(tmp_path: Path, short_tmp_path: Path) -> None:
    guard = ProcessGuard(tmp_path)
    with wrapped(guard, "--size", "320x240", "--max-memory", "256", str(PAGES / "hostile"),
                 env={"TMPDIR": str(short_tmp_path)}) as game:
        run_ok(game, "hog&mb=768")  # (at most 768 MB held, on a shared machine)
        game.send("cmd=step&frames=60")
        assert game.proc is not None
        assert game.proc.wait(60) == 1
        assert game.proc.stderr is not None
        said = "".join(game.stderr) + game.proc.stderr.read()
        assert "over the cap of 256 MiB (--max-memory)" in said, said[-2000:]
    guard.check()


def test_a_hard_ended_wrappers_folder_is_removed_at_the_next_start(tmp_path: Path, short_tmp_path: Path) -> None:
    guard = ProcessGuard(tmp_path)
    base = short_tmp_path
    with wrapped(guard, "--size", "320x240", str(PAGES), env={"TMPDIR": str(base)}) as game:
        folders = [p for p in base.iterdir() if p.name.startswith(SCRATCH_PREFIX)]
        assert len(folders) == 1 and (folders[0] / OWNER).is_file()
        assert game.proc is not None
        os.kill(game.proc.pid, signal.SIGKILL)  # no cleanup runs
        game.proc.wait(10)
    assert folders[0].exists()  # left behind
    assert wait_until(lambda: not guard.tagged(), 15)  # (its browser went with its driver)
    foreign = base / f"{SCRATCH_PREFIX}live"
    foreign.mkdir()
    (foreign / OWNER).write_text(f"{os.getpid()} {__import__('psutil').Process().create_time()}")
    removed = prune_scratch(base)
    assert removed == [folders[0]] and foreign.exists()  # a live owner's folder is kept
    # the next start prunes it by itself
    leftover = base / f"{SCRATCH_PREFIX}dead"
    leftover.mkdir()
    (leftover / OWNER).write_text("999999999 1.0")
    done = subprocess.run([PYTHON, "-m", "game_bridge_mcp.game.browser", "--port", "0", "--load-timeout", "5",
                           "http://127.0.0.1:9/"], capture_output=True, text=True, timeout=60,
                          env={**guard.env, "TMPDIR": str(base)})
    assert done.returncode != 0 and not leftover.exists() and foreign.exists()
    assert [p for p in base.iterdir() if p.name.startswith(SCRATCH_PREFIX)] == [foreign]
