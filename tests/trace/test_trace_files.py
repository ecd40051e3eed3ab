"""Files beside a trace, through the CLI: ``call --record`` copies screenshots only into a
private folder of its own (never one planted by someone else, never through a link), the
trace is written 0600, and ``replay --report`` embeds only images from the trace's own
folder, whatever paths the trace names."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from game_bridge_mcp.trace.compare import IgnoreRules
from game_bridge_mcp.trace.files import CopyFolder
from game_bridge_mcp.trace.reader import read_trace
from game_bridge_mcp.trace.replay import replay
from game_bridge_mcp.trace.report import render_report
from browser import write_png
from peers.handmade import HandmadeGame

ROOT = Path(__file__).resolve().parents[2]
OTHER_UID = 65534  # nobody


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(tmp_path / "home")}
    env.pop("GAME_BRIDGE_PORT", None)
    env.pop("GAME_BRIDGE_RECORD", None)
    return subprocess.run([sys.executable, "-m", "game_bridge_mcp", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)


def record_screenshot(tmp_path: Path, port: int, trace: Path) -> dict:
    out = cli(tmp_path, "call", "get_screenshot", '{"maxWidth": 64, "maxHeight": 48}', "--port", str(port),
              "--record", str(trace), "--out", str(tmp_path / "shot.png"))
    assert out.returncode == 0, out.stderr
    return json.loads(trace.read_text().splitlines()[-1])


def plant(folder: Path, how: str, victim: Path) -> None:
    """Make ``folder`` (the name the recorder wants) as an attacker would."""
    if how == "symlink":
        folder.symlink_to(victim, target_is_directory=True)
        return
    folder.mkdir()
    for n in range(200):  # links at names a copy could take
        (folder / f"{n}.png").symlink_to(victim / "notes.txt")
    if how == "another user's" and os.geteuid() == 0:
        os.chown(folder, OTHER_UID, OTHER_UID)
        folder.chmod(0o755)
    else:  # not root: a folder anyone may write to is just as much someone else's
        folder.chmod(0o777)


@pytest.mark.parametrize("how", ["another user's", "world-writable", "symlink"])
def test_a_planted_files_folder_is_never_used(tmp_path: Path, how: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("the victim's 37-byte text file here.\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    trace = shared / "session.trace"
    planted = shared / "session.trace.files"
    plant(planted, how, victim)
    before = sorted(os.listdir(planted))
    with HandmadeGame(features={"screenshot"}, size=(64, 48)) as game:
        first = record_screenshot(tmp_path, game.port, trace)
        second = record_screenshot(tmp_path, game.port, trace)
    assert (victim / "notes.txt").read_text() == "the victim's 37-byte text file here.\n"
    assert sorted(os.listdir(victim)) == ["notes.txt"] and sorted(os.listdir(planted)) == before
    copies = [first["screenshot"]["copy"], second["screenshot"]["copy"]]
    folders = {c.split("/")[0] for c in copies}
    assert len(folders) == 2 and planted.name not in folders  # fresh each run: never the planted one
    for copy in copies:
        folder = shared / copy.split("/")[0]
        info = os.lstat(folder)
        assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700
        shot = shared / copy
        assert not shot.is_symlink() and stat.S_IMODE(shot.stat().st_mode) == 0o600
        assert shot.read_bytes().startswith(b"\x89PNG")
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600


def test_our_own_files_folder_is_reused_and_a_link_in_it_is_never_followed(tmp_path: Path) -> None:
    trace = tmp_path / "session.trace"
    with HandmadeGame(features={"screenshot"}, size=(64, 48)) as game:
        first = record_screenshot(tmp_path, game.port, trace)
        second = record_screenshot(tmp_path, game.port, trace)
    assert first["screenshot"]["copy"].split("/")[0] == second["screenshot"]["copy"].split("/")[0] \
        == "session.trace.files"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "session.trace.files" / "planted.png").symlink_to(victim)
    copy = CopyFolder(trace).write("planted.png", b"\x89PNG data")
    assert copy == "session.trace.files/planted-2.png" and victim.read_text() == "keep me"


def test_a_trace_file_of_another_user_or_a_link_is_not_written(tmp_path: Path) -> None:
    victim = tmp_path / "victim.trace"
    victim.write_text('{"format":"game-bridge-trace","version":1}\n')
    link = tmp_path / "link.trace"
    link.symlink_to(victim)
    with HandmadeGame(features={"screenshot"}, size=(64, 48)) as game:
        out = cli(tmp_path, "call", "get_health", "--port", str(game.port), "--record", str(link))
    assert out.returncode == 0 and "not recording" in out.stderr and "symbolic link" in out.stderr
    assert victim.read_text() == '{"format":"game-bridge-trace","version":1}\n'


def png(path: Path, width: int, height: int, rgb: tuple[int, int, int]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_png(path, width, height, rgb)


def png_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def test_the_report_embeds_images_only_from_the_traces_own_folder(tmp_path: Path) -> None:
    secret = png(tmp_path / "secret" / "ci-secret.png", 8, 8, (255, 0, 0))
    folder = tmp_path / "pr"
    (folder / "rec.trace.files").mkdir(parents=True)
    own = write_png(folder / "rec.trace.files" / "1.png", 9, 9, (0, 255, 0))
    (folder / "rec.trace.files" / "link.png").symlink_to(secret)
    (folder / "rec.trace.files" / "sub").symlink_to(secret.parent, target_is_directory=True)
    shots = [{"file": str(secret)},                                   # the original, absolute
             {"file": str(secret), "copy": str(secret)},              # an absolute copy
             {"file": "x", "copy": "rec.trace.files/../../secret/ci-secret.png"},
             {"file": "x", "copy": "rec.trace.files/link.png"},       # a link inside the folder
             {"file": "x", "copy": "rec.trace.files/sub/ci-secret.png"},  # through a linked folder
             {"file": str(secret), "copy": "rec.trace.files/1.png"}]  # the only good one
    with HandmadeGame(features={"screenshot"}) as game:
        lines = [{"format": "game-bridge-trace", "version": 1}]
        lines += [{"type": "call", "tool": "call_tool", "name": "noop", "port": game.port, "arguments": {},
                   "answer": {"anything": n}, "screenshot": shot} for n, shot in enumerate(shots)]
        trace = folder / "rec.trace"
        trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
        report = tmp_path / "report.html"
        out = cli(tmp_path, "replay", str(trace), "--port", str(game.port), "--update", "--force",
                  "--report", str(report))
    assert out.returncode == 0, out.stderr
    html = report.read_text()
    assert png_uri(secret) not in html
    assert html.count(png_uri(own)) == 1
    assert html.count("screenshot") and html.count("is not available") >= 5
    # --update keeps the replay's screenshots (none here), never a file the trace named
    updated = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    assert len(updated) == len(shots) and not any("screenshot" in line for line in updated)


def test_a_replayed_screenshot_is_read_only_from_the_bridges_own_folder(tmp_path: Path) -> None:
    secret = write_png(tmp_path / "secret.png", 8, 8, (255, 0, 0))
    shots = tmp_path / "bridge-shots"
    ours = png(shots / "screenshot-1.png", 8, 8, (0, 0, 255))
    trace = tmp_path / "t.trace"
    lines = [{"format": "game-bridge-trace", "version": 1},
             {"type": "call", "tool": "call_tool", "name": "a", "port": 7820, "arguments": {}, "answer": {}},
             {"type": "call", "tool": "call_tool", "name": "b", "port": 7820, "arguments": {}, "answer": {}}]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    answers = [{"format": "png", "file": str(secret)}, {"format": "png", "file": str(ours)}]
    result = replay(read_trace(trace), lambda *_a: answers.pop(0), {7820: 1}, rules=IgnoreRules(),
                    summarise=lambda s: s, keep_going=True)
    result.screenshots = shots
    html = render_report(result)
    assert png_uri(secret) not in html and png_uri(ours) in html
