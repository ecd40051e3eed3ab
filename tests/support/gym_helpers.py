"""Helpers for the gym wrapper's tests: the wrapper as a real child process (its port read
from its banner, its stderr kept, reaped whatever happens), and the environments' packages
the tests need, whose absence fails the test loudly (they are in the test extra)."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
from typing import Iterator

import pytest

from launch_helpers import PYTHON
from pygame_helpers import Wrapped

PEERS = Path(__file__).resolve().parents[1] / "peers"


def require(*modules: str) -> None:
    """Import the environments' packages, or fail saying how to install them: they are in
    the test extra, so a missing one is a broken set-up, never a reason to skip."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            pytest.fail(f"{module} cannot be imported ({exc}): the gym tests need the test extra's "
                        "gymnasium, ale-py, minigrid, nle, crafter and vizdoom (pip install -e '.[test]')")


class Gym(Wrapped):
    def __init__(self, proc: subprocess.Popen[str], port: int, lines: list[str]) -> None:
        super().__init__(proc, port)
        self.lines = lines

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


def gym_env(tmp_path: Path, *, paused: bool = True) -> dict[str, str]:
    env = dict(os.environ, GAME_BRIDGE_INSTANCES=str(tmp_path / "instances"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(PEERS), os.environ.get("PYTHONPATH", "")])))
    if paused:
        env["GAME_BRIDGE_START_PAUSED"] = "1"
    else:
        env.pop("GAME_BRIDGE_START_PAUSED", None)
    return env


@contextmanager
def served(*args: str, env: dict[str, str], cwd: Path | None = None) -> Iterator[Gym]:
    """``python -m game_bridge_mcp.game.gym --port 0 ARGS`` (in ``cwd``: where an environment
    writes its own files, ViZDoom its _vizdoom.ini), reaped whatever happens."""
    proc = subprocess.Popen([PYTHON, "-m", "game_bridge_mcp.game.gym", "--port", "0", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    found = threading.Event()
    port: list[int] = []

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            match = re.search(r"serving on http://127\.0\.0\.1:(\d+)", line)
            if match:
                port.append(int(match.group(1)))
                found.set()
        found.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not found.is_set() and time.monotonic() < deadline:
            found.wait(0.5)
        assert port, f"the wrapper did not start serving: {''.join(lines)[-2000:]}"
        yield Gym(proc, port[0], lines)
    finally:
        try:  # what the wrapper started (ViZDoom's engine is a process of its own), ended with it
            started = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            started = []
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for child in started:
            with contextlib.suppress(psutil.Error):
                child.kill()
        reader.join(5)


def run_wrapper(*args: str, env: dict[str, str], cwd: Path | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The wrapper run to its end (a usage error, --init, a failure to start)."""
    return subprocess.run([PYTHON, "-m", "game_bridge_mcp.game.gym", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)
