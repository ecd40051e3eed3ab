"""``check`` on the extensions: every advertised feature of the hand-made reference game
(written from docs/contract.md, not with the kit) passes, and each way of lying about one
gets the FAIL line that says what was wrong."""

from __future__ import annotations

import io
import json
import sys
import threading
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pytest

from game_bridge_mcp import contract
from game_bridge_mcp.check.runner import main

from peers.handmade import FEATURES, HandmadeGame
from peers.fakegame import wait_until
from peers.kitfakes import free_port

pytestmark = pytest.mark.timeout(60)
HANDMADE = Path(__file__).parents[1] / "peers" / "handmade.py"


class Result:
    """The checklist: each line with its indented details."""

    def __init__(self, code: int, out: str) -> None:
        self.code, self.out = code, out
        self.lines: list[str] = []
        for line in out.splitlines():
            if line[:4] in ("PASS", "WARN", "FAIL", "SKIP"):
                self.lines.append(line)
            elif line.startswith("      ") and self.lines:
                self.lines[-1] += "\n" + line.strip()

    def levels(self, level: str) -> list[str]:
        return [line[6:] for line in self.lines if line.startswith(level)]

    def has(self, level: str, fragment: str) -> bool:
        return any(fragment in line for line in self.levels(level))

    def __repr__(self) -> str:
        return f"exit {self.code}\n{self.out}"


def check(*argv: str, environ: dict[str, str] | None = None) -> Result:
    out = io.StringIO()
    code = main(list(argv), stdout=out, stderr=io.StringIO(), environ=environ or {})
    return Result(code, out.getvalue())


def played(game: HandmadeGame, commands: Iterable[str] = ("emit&n=5", "emit&n=6")) -> HandmadeGame:
    """Make some events (more than a small buffer holds) and wait until they are applied."""
    last = 0
    for query in commands:
        with urllib.request.urlopen(f"{game.url}/command?cmd={query}", timeout=5) as answer:
            last = json.loads(answer.read())["commandId"]
    def done() -> bool:
        with urllib.request.urlopen(f"{game.url}/health", timeout=5) as answer:
            return bool(json.loads(answer.read())["completedCommandId"] >= last)

    assert wait_until(done, 5)
    return game


def check_game(game: HandmadeGame, *extra: str, tmp: Path) -> Result:
    return check("--port", str(game.port), "--timeout", "2000", *extra,
                 environ={"GAME_BRIDGE_INSTANCES": str(tmp / "instances"), "HOME": str(tmp)})


# --------------------------------------------------------------------------- what conforms

@pytest.mark.slow
def test_every_feature_of_the_reference_game_passes(tmp_path: Path) -> None:
    with played(HandmadeGame(hz=120, event_buffer=8).start()) as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 0, result
    assert not result.levels("FAIL"), result
    assert [w.split("\n")[0] for w in result.levels("WARN")] == [
        f"no registry entry for port {game.port} in {tmp_path / 'instances'}"], result
    for fragment in (f"features: {', '.join(FEATURES)}",
                     "results: an entry for each of the 17 'noop' commands",
                     "after: /state and /health hold until the command is applied",
                     "view: /state?view=digest keeps only the digest fields",
                     "events: seq counts up by one (4..11 buffered, older ones dropped)",
                     "input: key {key, action, frames}", "screenshot: GET /screenshot?maxWidth=320&maxHeight=240: PNG 320x240",
                     "maxHeight=64: PNG 64x48", "clock: pause holds simFrame", "step {frames: 5} advances simFrame by "
                     "exactly 5", "clock: resume restarts simFrame", "conventions: game.description and ui.text",
                     "snapshot: a load gives back the saved /state", "and POST /snapshot takes them back",
                     "refuses cut off, damaged, another game's, a pickle (code in disguise), empty bytes with 400",
                     "over snapshotMaxBytes (67,108,864) is refused with 413", "snapshot: a load leaves the clock as it was",
                     "snapshot: full at 16 kept"):
        assert result.has("PASS", fragment), (fragment, result)
    assert result.has("SKIP", "GAME_BRIDGE_START_PAUSED: checked only with --launch"), result


def test_a_game_without_features_is_checked_as_before(tmp_path: Path) -> None:
    with HandmadeGame(features=()) as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 0, result
    assert result.has("PASS", "features: none advertised")
    assert not any(line.startswith(("results", "after", "view", "events", "clock", "screenshot", "input", "snapshot"))
                   for line in result.levels("PASS") + result.levels("SKIP")), result


def test_no_events_yet_is_a_skip_not_a_pass(tmp_path: Path) -> None:
    with HandmadeGame(features={"events"}) as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 0, result
    assert result.has("SKIP", "events: the game has made no events yet"), result


def test_a_game_that_cannot_render_says_why(tmp_path: Path) -> None:
    with HandmadeGame(features={"screenshot"}, unavailable="running headless") as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 0, result
    assert result.has("WARN", "screenshot: the game cannot render now (503: \"running headless\")"), result


# --------------------------------------------------------------------------- each lie

LYING = [
    ("simframe-runs-while-paused", {"clock"}, "clock: simFrame ran while paused"),
    ("step-early", {"clock"}, "completed with simFrame"),
    ("step-early", {"clock", "after"}, "(0 frames from"),
    ("step-short", {"clock"}, "(4 frames from"),
    ("resume-ignored", {"clock"}, "clock: after resume completed, /state paused is true"),
    ("seq-restart", {"events"}, "seq goes from 5 to 1"),
    ("seq-gap", {"events"}, "seq jumps from"),
    ("events-no-seq", {"events"}, "/state.events entries carry no integer seq"),
    ("events-next-wrong", {"events"}, "says next 0, but the last seq it returned is 11"),
    ("events-no-dropped", {"events"}, "starts at seq 4 and says dropped false"),
    ("results-not-list", {"results"}, "commandResults is a JSON dict, not a list"),
    ("results-bad-types", {"results"}, "commandResults entries have the wrong types"),
    ("results-missing", {"results"}, "commandResults has no entry for it"),
    ("results-late", {"results"}, "It appeared in a later snapshot"),
    ("after-ignored", {"after"}, "after: /state?after=1000"),
    ("after-hangs", {"after"}, "(already done) was held"),
    ("view-drops", {"view"}, "view: /state?view=digest leaves out completedCommandId, game.x"),
    ("screenshot-not-image", {"screenshot"}, "the body is not a PNG or JPEG image"),
    ("screenshot-wrong-type", {"screenshot"}, "the answer is text/plain, not image/png or image/jpeg"),
    ("screenshot-truncated", {"screenshot"}, "the PNG is truncated"),
    ("screenshot-ihdr-mismatch", {"screenshot"}, "IHDR says 640x480"),
    ("screenshot-oversize", {"screenshot"}, "larger than the 64x64 asked for"),
    ("screenshot-stale", {"screenshot"}, "the image is stale"),
    ("screenshot-no-frame", {"screenshot"}, "X-Game-Frame is null"),
    ("screenshot-huge", {"screenshot"}, "the image is over 32 MB"),
    ("screenshot-never", {"screenshot"}, "no answer within 1000 ms"),
    ("screenshot-503-bad", {"screenshot"}, "answered 503 without"),
    ("input-wrong-args", {"input"}, "'key' has no argument key"),
    ("input-no-wheel", {"input"}, "'mouse' has no arguments dx, dy"),
    ("screenshot-no-window", {"input", "screenshot"}, "no X-Game-Window header"),
    ("snapshot-load-partial", {"snapshot", "results", "clock"}, "/state is not what it was at saving: simFrame"),
    ("snapshot-post-unchecked", {"snapshot", "results", "clock"}, "POST /snapshot took bytes that are not this build's"),
    ("snapshot-save-bad-id", {"snapshot", "results", "clock"}, "snapshot_save's id \"../h1\" is not 1-64 of"),
    ("snapshot-get-junk", {"snapshot", "results", "clock"}, "POST /snapshot of the game's own bytes: HTTP 400"),
    ("snapshot-post-no-id", {"snapshot", "results", "clock"}, "HTTP 200 without {\"id\": ...}"),
    ("snapshot-event-no-id", {"snapshot", "results", "clock"}, "event after loading 'h1' carries id"),
    ("snapshot-no-limit", {"snapshot", "results", "clock"}, "kept more than 16 snapshots it was not told to drop"),
    ("snapshot-drop-ignored", {"snapshot", "results", "clock"}, "a snapshot_drop did not make room"),
    ("snapshot-load-pauses", {"snapshot", "results", "clock"}, "a load while the clock ran left /state.paused true"),
]


@pytest.mark.slow
@pytest.mark.parametrize("lie,features,fragment", LYING, ids=[f"{lie}-{'+'.join(sorted(f))}" for lie, f, _ in LYING])
def test_each_lie_is_a_fail_that_says_what_was_wrong(lie: str, features: set[str], fragment: str,
                                                     tmp_path: Path) -> None:
    with played(HandmadeGame(hz=120, event_buffer=8, features=features, lies={lie}).start()) as game:
        result = check_game(game, "--no-close", "--timeout", "1000", tmp=tmp_path)
    assert result.code == 1, result
    assert result.has("FAIL", fragment), result


@pytest.mark.slow
def test_snapshots_kept_in_the_process_and_a_snapshot_without_its_companions(tmp_path: Path) -> None:
    with played(HandmadeGame(hz=120, snapshot_portable=False, snapshot_max_bytes=4096).start()) as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 0 and not result.levels("FAIL"), result
    assert result.has("PASS", "GET /snapshot answers 409: the game keeps live copies"), result
    assert result.has("PASS", "snapshot: full at 16 kept"), result
    with HandmadeGame(features={"snapshot", "clock"}) as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 1 and result.has("FAIL", "snapshot: advertised without results"), result


@pytest.mark.slow
@pytest.mark.parametrize("lie,fragment", [
    ("snapshot-get-text", "GET /snapshot answers Content-Type \"text/plain\", not application/octet-stream"),
    ("snapshot-400-silent", "refused cut off, damaged, another game's, a pickle (code in disguise), empty bytes "
                            "with 400 and no reason"),
])
def test_snapshot_bytes_without_their_type_or_a_refusal_without_its_reason_are_warned(
        lie: str, fragment: str, tmp_path: Path) -> None:
    with played(HandmadeGame(hz=120, features={"snapshot", "results", "clock"}, lies={lie}).start()) as game:
        result = check_game(game, "--no-close", "--timeout", "1000", tmp=tmp_path)
    assert result.code == 0 and not result.levels("FAIL"), result
    assert result.has("WARN", fragment), result


def test_a_description_or_a_screen_text_too_long_is_warned(tmp_path: Path) -> None:
    with HandmadeGame(features=(), description="x" * 5000, ui_text="y" * 5000) as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 0, result
    assert result.has("WARN", "game.description is 5,000 characters"), result
    assert "ui.text is 5,000 characters" in result.out, result


def test_view_that_keeps_everything_is_only_a_warning(tmp_path: Path) -> None:
    with HandmadeGame(features={"view"}, lies={"view-leaks"}) as game:
        result = check_game(game, "--no-close", tmp=tmp_path)
    assert result.code == 0, result
    assert result.has("WARN", "view: /state?view=digest still carries extra, game.board, game.meta"), result


# --------------------------------------------------------------------------- starting paused, under --launch

def declaration(directory: Path, *args: str) -> Path:
    path = directory / "gamebridge.json"
    port = free_port()
    path.write_text(json.dumps({"name": "Handmade", "launch": {
        "argv": [sys.executable, str(HANDMADE), "--port", "{port}", "--register", "--hz", "120", *args],
        "cwd": ".", "portRange": f"{port}-{port}", "readyTimeoutMs": 20000}}))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("lie", [None, "start-paused-ignored"])
def test_launch_checks_that_start_paused_is_honoured(tmp_path: Path, lie: str | None) -> None:
    config = declaration(tmp_path, *(["--lie", lie, "--features", "clock"] if lie else []))
    environ = {"GAME_BRIDGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    result = check("--launch", "--config", str(config), environ=environ)
    if lie is None:  # every feature, the registry entry and close: all of it conforms
        assert result.code == 0, result
        assert not result.levels("FAIL") and not result.levels("WARN"), result
        assert result.has("PASS", "close shuts the game down") and result.has("PASS", "registry entry was written "
                                                                                       "after the port was bound")
        assert result.has("PASS", "clock: launched with GAME_BRIDGE_START_PAUSED=1 it starts paused"), result
    else:
        assert result.code == 1, result
        assert result.has("FAIL", "clock: GAME_BRIDGE_START_PAUSED=1 is not honoured"), result
    assert not list((tmp_path / "home" / "instances").glob("*.json")), "a launched game was left behind"


def test_every_lie_named_by_the_reference_game_is_covered() -> None:
    from peers.handmade import LIES

    covered = {lie for lie, _f, _m in LYING} | {"start-paused-ignored", "view-leaks", "huge-result",
                                                "huge-description", "snapshot-get-text", "snapshot-400-silent"}
    assert set(LIES) == covered
    assert FEATURES == contract.FEATURES  # (tests/project/test_extensions.py names what is missing)


# --------------------------------------------------------------------------- the kit's games

@contextmanager
def kit_game(capture: Callable[[], Any], *, hz: float = 200.0) -> Iterator[Any]:
    """A kit GameBridge serving ``capture`` as its screenshot, pumped by its own loop thread."""
    from game_bridge_mcp.game import GameBridge

    bridge = GameBridge("Kit Under Check", "1.0", register=False, screenshot=capture)
    bridge.start(0)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set() and bridge.running:
            bridge.pump()
            stop.wait(1 / hz)

    thread = threading.Thread(target=loop, name="kit-loop", daemon=True)
    thread.start()
    try:
        yield bridge
    finally:
        stop.set()
        thread.join(5)
        bridge.stop()


@pytest.mark.slow
def test_the_kits_screenshot_passes(tmp_path: Path) -> None:
    from game_bridge_mcp.game import Pixels

    with kit_game(lambda: Pixels(b"\x10\x80\xf0" * (400 * 300), 400, 300, "RGB")) as bridge:
        result = check("--port", str(bridge.port), "--no-close", environ={"HOME": str(tmp_path)})
    assert not result.levels("FAIL"), result
    assert any(line.startswith("features: ") and "screenshot" in line for line in result.levels("PASS")), result
    assert result.has("PASS", "maxWidth=320&maxHeight=240: PNG 320x240"), result
    assert result.has("PASS", "maxWidth=64&maxHeight=64: PNG 64x48"), result


@pytest.mark.slow
def test_the_kits_503_carries_the_games_reason(tmp_path: Path) -> None:
    def capture() -> Any:
        raise RuntimeError("the GPU went away")

    with kit_game(capture) as bridge:
        result = check("--port", str(bridge.port), "--no-close", environ={"HOME": str(tmp_path)})
    assert result.code == 0, result
    assert result.has("WARN", "screenshot: the game cannot render now (503: \"the game's capture failed"), result
