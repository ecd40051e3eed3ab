"""Running one of ``scripts/`` from a test, and proving it reaped what it started.

Every process the script starts inherits a mark in its environment (a fresh token per
run), so afterwards the test can list any marked process still alive: a benchmark that
leaves a game behind fails its test, and the leftovers are killed there, so the suite
itself never leaves one either."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Mapping

import psutil

ROOT = Path(__file__).resolve().parents[2]
MARK = "GB_SCRIPT_RUN_MARK"


def marked(token: str) -> list[psutil.Process]:
    """The live (not zombie) processes carrying ``token`` in their environment."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def run_script(name: str, *args: str, timeout: float = 110,
               env: Mapping[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Run ``scripts/<name> args`` from the checkout; its result, and the command lines of
    the marked processes it left alive (killed before this returns)."""
    token = uuid.uuid4().hex
    environ = {**(os.environ if env is None else env), MARK: token}
    try:
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], capture_output=True,
                              text=True, timeout=timeout, env=environ, cwd=str(ROOT))
    finally:
        leftovers = []
        for proc in marked(token):
            try:
                leftovers.append(proc.cmdline())
                proc.kill()
            except psutil.Error:
                continue
    return done, leftovers
