"""Helpers for the pygame wrapper's tests: the wrapper on one of our small games as a real
child process (its port read from its banner, reaped whatever happens), and its HTTP."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from launch_helpers import PYTHON

GAMES = Path(__file__).resolve().parents[1] / "peers" / "games"
CLOCKED = GAMES / "pygame_clocked.py"


class Wrapped:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.port = proc, port

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def doc(self, path: str) -> Any:
        return json.loads(self.get(path)[2])

    def command(self, query: str, *, wait: bool = True) -> dict[str, Any]:
        answer = self.doc("/command?" + query)
        assert answer.get("accepted"), answer
        if wait:
            self.doc(f"/state?after={answer['commandId']}&waitMs=10000")
        return answer

    def outcome(self, command_id: int) -> dict[str, Any]:
        state = self.doc(f"/state?after={command_id}&waitMs=10000")
        return next(entry for entry in state["commandResults"] if entry["id"] == command_id)


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal delivers it, even when pytest was started with it
    ignored (in the background of a shell), since an ignored SIGINT is inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def wrapped(*args: str, env: dict[str, str] | None = None) -> Iterator[Wrapped]:
    """``python -m game_bridge_mcp.game.pygame --port 0 ARGS``, its port read from the
    wrapper's banner on stderr; reaped whatever happens."""
    proc = subprocess.Popen([PYTHON, "-m", "game_bridge_mcp.game.pygame", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 30
        port = None
        assert proc.stderr is not None
        while port is None and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                line = proc.stderr.readline()
                assert line, "the wrapper ended before serving"
                found = re.search(r"serving on http://127\.0\.0\.1:(\d+)", line)
                if found:
                    port = int(found.group(1))
        assert port is not None, "the wrapper did not start serving"
        yield Wrapped(proc, port)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def game_env(tmp_path: Path, *, paused: bool = False) -> dict[str, str]:
    env = dict(os.environ, GAME_BRIDGE_INSTANCES=str(tmp_path / "instances"))
    if paused:
        env["GAME_BRIDGE_START_PAUSED"] = "1"
    return env
