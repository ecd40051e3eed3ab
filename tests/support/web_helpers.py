"""Running the browser wrapper in tests: as a real child process on a page, its port read
from its banner, every process it started (the browser's too) found by the guard's token
and reaped; and the HTTP helpers to talk to it.

The browser tests need Playwright (in the ``test`` extra) and a Chromium (Debian's
``chromium``; ``.ci/run`` installs it): without them they fail, saying what to install,
rather than skip.
"""

from __future__ import annotations

import http.client
import json
import re
import select
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from launch_helpers import PYTHON, ProcessGuard, wait_until

PAGES = Path(__file__).resolve().parents[1] / "peers" / "web"


def require_browser() -> None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("the browser tests need Playwright: pip install -e '.[test]' (or '.[browser]')")
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.fail("the browser tests need Chromium: apt-get install -y chromium (bash .ci/run installs it)")


class Wrapped:
    def __init__(self, proc: subprocess.Popen[str] | None, port: int) -> None:
        self.proc, self.port = proc, port
        self.stderr: list[str] = []

    def get(self, path: str, timeout: float = 20) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def doc(self, path: str) -> Any:
        return json.loads(self.get(path)[2])

    def send(self, query: str) -> int:
        answer = self.doc("/command?" + query)
        assert answer.get("accepted"), answer
        return int(answer["commandId"])

    def outcome(self, command_id: int, wait_ms: int = 15000) -> dict[str, Any]:
        state = self.doc(f"/state?after={command_id}&waitMs={wait_ms}")
        assert state["completedCommandId"] >= command_id, f"command {command_id} did not complete: {state}"
        return next(entry for entry in state["commandResults"] if entry["id"] == command_id)

    def run(self, query: str) -> dict[str, Any]:
        """Send a command, wait for it; the state after it."""
        command_id = self.send(query)
        state = self.doc(f"/state?after={command_id}&waitMs=15000")
        assert state["completedCommandId"] >= command_id, state
        return state

    def events(self) -> list[dict[str, Any]]:
        return list(self.doc("/events?since=0&limit=500")["events"])


@contextmanager
def wrapped(guard: ProcessGuard, *args: str, paused: bool = True, timeout_s: float = 60,
            env: dict[str, str] | None = None) -> Iterator[Wrapped]:
    """``python -m game_bridge_mcp.game.browser --port 0 ARGS`` with the guard's
    environment (so the browser carries its token) and ``env``; ended and reaped at the end."""
    require_browser()
    env = {**guard.env, **(env or {})}
    if paused:
        env["GAME_BRIDGE_START_PAUSED"] = "1"
    proc = subprocess.Popen([PYTHON, "-m", "game_bridge_mcp.game.browser", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + timeout_s
        port = None
        assert proc.stderr is not None
        while port is None and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                line = proc.stderr.readline()
                assert line, "the wrapper ended before serving: " + "".join(lines)
                lines.append(line)
                found = re.search(r"serving on http://127\.0\.0\.1:(\d+)", line)
                if found:
                    port = int(found.group(1))
        assert port is not None, "the wrapper did not start serving: " + "".join(lines)
        game = Wrapped(proc, port)
        game.stderr = lines
        yield game
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def run_wrapper(guard: ProcessGuard, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """The wrapper run to its end (for what fails before serving)."""
    return subprocess.run([PYTHON, "-m", "game_bridge_mcp.game.browser", "--port", "0", *args],
                          capture_output=True, text=True, timeout=timeout_s, env=guard.env)


def frames_until(game: Wrapped, predicate: Any, timeout_s: float = 20) -> Any:
    return wait_until(lambda: predicate(game.doc("/state")), timeout_s, 0.05)
