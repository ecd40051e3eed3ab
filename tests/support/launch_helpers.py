"""Shared pieces for the launcher and reaping tests: a guard that fails a test which
leaves a process behind, declarations for the test game (on ports the OS gives:
support/ports.py), and wait-until with a deadline.

The guard gives every process a test starts a unique environment variable
(``GB_TEST_TOKEN``), inherited by everything below it, so at the end it can find every
survivor, whoever its parent is, kill it, and fail the test.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.launch.launcher import Launcher
from game_bridge_mcp.launch.declaration import load_declaration
from ports import free_port as free_port, free_range as free_range  # re-exported: the OS gives the suite its ports

HERE = Path(__file__).resolve().parents[1]
GAME = HERE / "peers" / "games" / "game.py"
DRIVER = HERE / "peers" / "games" / "bridge_driver.py"
VARIANT = HERE / "peers" / "demo_variant.py"
PYTHON = sys.executable
TOKEN_KEY = "GB_TEST_TOKEN"


def wait_until(predicate: Callable[[], Any], timeout_s: float, interval_s: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval_s)


def gone(pid: int) -> bool:
    """True when no process has this pid, or only its zombie is left (it may vanish between two looks)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class ProcessGuard:
    """Tags every process a test starts and checks that none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.token = uuid.uuid4().hex
        self.pidfile = tmp_path / "pids.txt"
        self.env = dict(os.environ)
        self.env[TOKEN_KEY] = self.token
        self.env["GB_TEST_PIDS"] = str(self.pidfile)
        self.env.pop("GAME_BRIDGE_LAUNCH_ID", None)

    def recorded(self) -> list[psutil.Process]:
        """Processes the test games recorded (pid plus start time, so never a stranger)."""
        found = []
        try:
            lines = self.pidfile.read_text().split("\n")
        except OSError:
            return []
        for line in lines:
            if not line.strip():
                continue
            pid, start = line.split()
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    if handle.read().rsplit(")", 1)[1].split()[19] != start:
                        continue
                proc = psutil.Process(int(pid))
            except (OSError, psutil.Error, IndexError):
                continue
            if _alive(proc):
                found.append(proc)
        return found

    def tagged(self) -> list[psutil.Process]:
        """Live processes carrying this test's token, plus the test process's own children."""
        found: dict[int, psutil.Process] = {}
        for proc in psutil.process_iter():
            try:
                if proc.pid != os.getpid() and proc.environ().get(TOKEN_KEY) == self.token and _alive(proc):
                    found[proc.pid] = proc
            except psutil.Error:
                continue
        for proc in psutil.Process().children(recursive=True):
            if _alive(proc):
                found[proc.pid] = proc
        for proc in self.recorded():
            found[proc.pid] = proc
        return list(found.values())

    def check(self) -> None:
        if wait_until(lambda: not self.tagged(), 5.0, 0.05):
            return
        survivors = self.tagged()
        described = []
        for proc in survivors:
            try:
                described.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
                proc.kill()
            except psutil.Error:
                pass
        if survivors:
            pytest.fail("processes outlived the test (killed now): " + "; ".join(described))


def write_declaration(directory: Path, *game_args: str, shell: bool = False, port_range: tuple[int, int] | None = None,
                      timeout_ms: int = 10000, env: dict[str, str] | None = None, name: str | None = "Declared Game",
                      suffix: str = "") -> Path:
    """A gamebridge.json that runs the test game with ``game_args``; with ``shell`` the
    command goes through ``sh -c`` with ``suffix`` after it (so the shell stays)."""
    port_range = port_range or free_range(4)
    argv = [PYTHON, str(GAME), "--port", "{port}", *game_args]
    launch: dict[str, Any] = {"portRange": f"{port_range[0]}-{port_range[1]}", "readyTimeoutMs": timeout_ms}
    if shell:
        import shlex

        launch["command"] = " ".join(shlex.quote(a) if a != "{port}" else a for a in argv) + suffix
    else:
        launch["argv"] = argv
    if env:
        launch["env"] = env
    doc: dict[str, Any] = {"launch": launch}
    if name is not None:
        doc["name"] = name
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "gamebridge.json"
    path.write_text(json.dumps(doc))
    return path


def declaration(directory: Path, *, variant: str = "", seed: int = 7, game: list[str] | None = None) -> Path:
    low, high = free_range(4)
    argv = game or [PYTHON, str(VARIANT), "--port", "{port}", "--seed", str(seed), "--hz", "60"]
    launch: dict[str, Any] = {"argv": argv, "portRange": f"{low}-{high}", "readyTimeoutMs": 20000}
    if variant:
        launch["env"] = {"DEMO_VARIANT": variant}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "gamebridge.json"
    path.write_text(json.dumps({"name": "Fruit Merge", "launch": launch}))
    return path


class LauncherFactory:
    """Launchers sharing one registry home (like bridges of one user), shut down at the end."""

    def __init__(self, tmp_path: Path, guard: ProcessGuard) -> None:
        self.tmp_path = tmp_path
        self.guard = guard
        self.registry_dir = tmp_path / "home" / "instances"
        self.log_dir = tmp_path / "logs"
        self.launchers: list[Launcher] = []

    def __call__(self, declaration: Path | None, **kwargs: Any) -> Launcher:
        config = Config(environ=self.guard.env, registry_dir=self.registry_dir,
                        declaration=load_declaration(declaration) if declaration else None)
        launcher = Launcher(config, log_dir=self.log_dir, **kwargs)
        self.launchers.append(launcher)
        return launcher

    def close(self) -> None:
        for launcher in self.launchers:
            launcher.shutdown(grace_ms=200)
