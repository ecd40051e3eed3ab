"""The hand-made reference game does what docs/contract.md says (so tests that use it as the
independent implementation test the bridge, not a second mistake), in-process and as a
child process. Read with urllib and zlib only: nothing from game_bridge_mcp."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any

import pytest

from peers.handmade import HandmadeGame

pytestmark = pytest.mark.timeout(60)
HANDMADE = Path(__file__).parents[1] / "peers" / "handmade.py"


def get(url: str) -> tuple[int, Any, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def doc(url: str) -> Any:
    return json.loads(get(url)[2])


def until(predicate: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.005)


def command(game: HandmadeGame, query: str) -> int:
    return int(doc(f"{game.url}/command?cmd={query}")["commandId"])


def test_outcomes_after_and_the_event_cursor() -> None:
    with HandmadeGame(hz=200, event_buffer=4) as game:
        assert doc(game.url + "/health")["features"] == ["results", "after", "view", "events", "screenshot",
                                                         "clock", "input", "snapshot"]
        bad, good = command(game, "move&dx=9"), command(game, "spawn&kind=barrel")
        state = doc(f"{game.url}/state?after={good}&waitMs=5000")
        assert state["completedCommandId"] >= good
        results = {r["id"]: r for r in state["commandResults"]}
        assert results[bad] == {"id": bad, "ok": False, "error": "dx must be between -3 and 3 (got 9)"}
        assert results[good]["result"] == {"spawned": "barrel-1"}
        emitted = command(game, "emit&n=6")
        doc(f"{game.url}/state?after={emitted}&waitMs=5000")
        page = doc(f"{game.url}/events?since=0&limit=2")
        assert [e["seq"] for e in page["events"]] == [4, 5] and page["next"] == 5 and page["dropped"] is True
        rest = doc(f"{game.url}/events?since=5")
        assert [e["seq"] for e in rest["events"]] == [6, 7] and rest["dropped"] is False
        assert doc(f"{game.url}/events?since=99") == {"events": [], "next": 99, "dropped": False}
        digest = doc(f"{game.url}/state?view=digest")
        assert "extra" not in digest and "board" not in digest["game"] and digest["game"]["spawned"] == 1


def test_clock_step_is_exact_and_the_screenshot_is_a_real_png() -> None:
    with HandmadeGame(hz=200, size=(400, 200), environ={"GAME_BRIDGE_START_PAUSED": "1"}) as game:
        first = doc(game.url + "/state")
        assert first["paused"] is True
        until(lambda: doc(game.url + "/health")["frame"] > first["frame"] + 3)
        assert doc(game.url + "/state")["simFrame"] == first["simFrame"]
        step = command(game, "step&frames=5")
        after = doc(f"{game.url}/state?after={step}&waitMs=5000")
        assert after["simFrame"] == first["simFrame"] + 5 and after["completedCommandId"] == step
        before = doc(game.url + "/health")["frame"]
        status, headers, body = get(f"{game.url}/screenshot?maxWidth=100&maxHeight=100")
        assert status == 200 and headers["Content-Type"] == "image/png"
        assert int(headers["X-Game-Frame"]) > before and headers["X-Game-Window"] == "400x200"
        assert body[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", body[16:24])
        assert (width, height) == (100, 50)
        idat_len = struct.unpack(">I", body[33:37])[0]
        raw = zlib.decompress(body[41:41 + idat_len])
        assert len(raw) == height * (1 + 3 * width)


def test_lies_and_the_unavailable_screen() -> None:
    with HandmadeGame(hz=200, lies={"simframe-runs-while-paused", "screenshot-truncated"}) as game:
        paused = command(game, "pause")
        start = doc(f"{game.url}/state?after={paused}&waitMs=5000")["simFrame"]
        assert until(lambda: doc(game.url + "/state")["simFrame"] > start + 2)
        body = get(game.url + "/screenshot")[2]
        assert body[:8] == b"\x89PNG\r\n\x1a\n" and b"IEND" not in body
    with HandmadeGame(features={"screenshot"}, unavailable="minimised") as game:
        status, headers, body = get(game.url + "/screenshot")
        assert status == 503 and json.loads(body) == {"ok": False, "error": "minimised"}
        assert doc(game.url + "/health")["features"] == ["screenshot"]
        assert get(game.url + "/events")[0] == 404
    with pytest.raises(ValueError, match="unknown lies"):
        HandmadeGame(lies={"no-such-lie"})


def test_as_a_child_process_it_registers_and_closes(tmp_path: Path) -> None:
    env = {**os.environ, "GAME_BRIDGE_INSTANCES": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, str(HANDMADE), "--features", "results,clock", "--register",
                             "--start-paused"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        port = int(line.split("127.0.0.1:")[1].split()[0])
        entry = json.loads((tmp_path / f"{proc.pid}.json").read_text())
        assert entry["port"] == port and entry["pid"] == proc.pid
        health = doc(f"http://127.0.0.1:{port}/health")
        assert health["features"] == ["results", "clock"]
        assert doc(f"http://127.0.0.1:{port}/state")["paused"] is True
        get(f"http://127.0.0.1:{port}/command?cmd=close")
        assert proc.wait(10) == 0
        assert not (tmp_path / f"{proc.pid}.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        if proc.stderr:
            proc.stderr.close()
