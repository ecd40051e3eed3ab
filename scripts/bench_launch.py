#!/usr/bin/env python3
"""How much the launcher costs, and how fast a dying bridge takes its games with it.

Two measurements, printed as a table (and as JSON with --json):

1. **Launch overhead**: the test game's own boot time (started by hand, ``/health``
   polled every millisecond until it answers) against ``Launcher.launch()`` in-process
   and ``tools/call launch_instance`` through the real server over stdio, for a game
   that boots at once and one that takes a second.
2. **Reaping**: the time from SIGTERM, SIGHUP, stdin EOF or SIGKILL of the bridge process
   to the last launched process gone, for a cooperative game (honours ``close``) and a
   stubborn one (ignores ``close``, behind a shell, with a grandchild that called
   ``setsid``). The bridge is either a minimal driver around Launcher
   (``tests/peers/games/bridge_driver.py``) or the real server (``python -m game_bridge_mcp``),
   which is sent ``initialize`` and two ``launch_instance`` calls first.

    .venv/bin/python scripts/bench_launch.py [--runs 3] [--json] [--containment auto|cgroup|keeper|none]

``--containment`` holds the driver's and ``launch()``'s trees as docs/launching.md, "Reaping",
describes (the real server takes the strongest the machine allows).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import benchkit
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from game_bridge_mcp.wire.client import GameClient  # noqa: E402
from game_bridge_mcp.config import Config  # noqa: E402
from game_bridge_mcp.errors import BridgeError  # noqa: E402
from game_bridge_mcp.launch.launcher import Launcher  # noqa: E402
from game_bridge_mcp.launch.declaration import load_declaration  # noqa: E402

GAME = ROOT / "tests" / "peers" / "games" / "game.py"
DRIVER = ROOT / "tests" / "peers" / "games" / "bridge_driver.py"
TOKEN = "GB_BENCH_TOKEN"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_range(count: int) -> tuple[int, int]:
    import random

    for _ in range(200):
        low = random.randrange(20000, 32000 - count)
        try:
            for port in range(low, low + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
            return low, low + count - 1
        except OSError:
            continue
    raise RuntimeError("no free range")


def wait_health(port: int, deadline: float) -> float | None:
    client = GameClient(port, timeout_ms=200)
    while time.monotonic() < deadline:
        try:
            client.health(timeout_ms=200)
            return time.monotonic()
        except BridgeError:
            time.sleep(0.001)
    return None


def declaration(directory: Path, game_args: list[str], *, shell: bool = False, suffix: str = "") -> Path:
    low, high = free_range(8)
    argv = [sys.executable, str(GAME), "--port", "{port}", *game_args]
    launch: dict[str, Any] = {"portRange": f"{low}-{high}", "readyTimeoutMs": 20000}
    if shell:
        launch["command"] = " ".join(a if a == "{port}" else shlex.quote(a) for a in argv) + suffix
    else:
        launch["argv"] = argv
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "gamebridge.json"
    path.write_text(json.dumps({"name": "Bench Game", "launch": launch}))
    return path


# --------------------------------------------------------------------------- launch overhead

def by_hand(boot_delay: float, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        port = free_port()
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, str(GAME), "--port", str(port), "--boot-delay", str(boot_delay)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            ready = wait_health(port, started + 20)
            assert ready is not None, "the game did not boot"
            times.append((ready - started) * 1000)
        finally:
            proc.kill()
            proc.wait()
    return times


CONTAINMENT = ["auto"]


def via_launcher(work: Path, boot_delay: float, runs: int) -> list[float]:
    decl = declaration(work / f"launch-{boot_delay}", ["--boot-delay", str(boot_delay)])
    config = Config(environ=dict(os.environ), registry_dir=work / "home" / "instances",
                    declaration=load_declaration(decl))
    launcher = Launcher(config, log_dir=work / "logs", containment=CONTAINMENT[0])
    times = []
    try:
        for _ in range(runs):
            started = time.monotonic()
            result = launcher.launch()
            times.append((time.monotonic() - started) * 1000)
            launcher.stop(result["port"])
    finally:
        launcher.shutdown()
    return times


class StdioServer:
    """The real server as a subprocess, spoken to in JSON-RPC lines."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp"], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0

    def request(self, method: str, params: dict, *, notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        if notify:
            return None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed stdout")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def initialize(self) -> None:
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.request("notifications/initialized", {}, notify=True)

    def launch(self) -> dict:
        reply = self.request("tools/call", {"name": "launch_instance", "arguments": {}})
        result = reply.get("result", {})
        text = result.get("content", [{}])[0].get("text", "")
        if result.get("isError"):
            raise RuntimeError(text)
        return json.loads(text)

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bench_env(work: Path, token: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(ROOT), "GAME_BRIDGE_HOME": str(work / "home"), TOKEN: token})
    env.pop("GAME_BRIDGE_LAUNCH_ID", None)
    return env


def via_server(work: Path, boot_delay: float, runs: int) -> list[float]:
    directory = work / f"server-{boot_delay}"
    declaration(directory, ["--boot-delay", str(boot_delay)])
    times = []
    server = StdioServer(directory, bench_env(work, uuid.uuid4().hex))
    try:
        server.initialize()
        for _ in range(runs):
            started = time.monotonic()
            result = server.launch()
            times.append((time.monotonic() - started) * 1000)
            server.request("tools/call", {"name": "stop_instance", "arguments": {"port": result["port"]}})
    finally:
        server.close()
    return times


# --------------------------------------------------------------------------- reaping

def launched_by(token: str) -> list[psutil.Process]:
    """Live processes a bridge launched in this trial (they carry both the trial's token
    and the launcher's marker; the bridge and its watcher carry only the token)."""
    found = []
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
            if env.get(TOKEN) == token and "GAME_BRIDGE_LAUNCH_ID" in env and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


SCENARIOS = {
    "cooperative": dict(game_args=[], shell=False, suffix=""),
    "stubborn": dict(game_args=["--ignore-close", "--child", "setsid"], shell=True, suffix="; echo after"),
}


def reap_trial(work: Path, bridge: str, scenario: str, how: str) -> dict[str, Any]:
    token = uuid.uuid4().hex
    directory = work / f"reap-{uuid.uuid4().hex[:8]}"
    spec = SCENARIOS[scenario]
    decl = declaration(directory, list(spec["game_args"]), shell=bool(spec["shell"]), suffix=str(spec["suffix"]))
    env = bench_env(work, token)
    if bridge == "driver":
        proc = subprocess.Popen([sys.executable, str(DRIVER), "--config", str(decl), "--registry-dir",
                                 str(work / "home" / "instances"), "--count", "2",
                                 "--containment", CONTAINMENT[0]], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            if not line or "launched" in json.loads(line):
                break
        server = None
    else:
        server = StdioServer(directory, env)
        server.initialize()
        server.launch()
        server.launch()
        proc = server.proc
    deadline = time.monotonic() + 5
    expected = 2 if scenario == "cooperative" else 6
    while len(launched_by(token)) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    count = len(launched_by(token))
    started = time.monotonic()
    if how == "stdin EOF":
        assert proc.stdin is not None
        proc.stdin.close()
    else:
        proc.send_signal(getattr(signal, how))
    gone_at = None
    bridge_exit_at = None
    deadline = started + 15
    while time.monotonic() < deadline:
        if bridge_exit_at is None and proc.poll() is not None:
            bridge_exit_at = time.monotonic()
        if not launched_by(token):
            gone_at = time.monotonic()
            break
        time.sleep(0.005)
    survivors = launched_by(token)
    for leftover in survivors:  # only processes of this trial (they carry its token)
        leftover.kill()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if bridge_exit_at is None:
        bridge_exit_at = time.monotonic()
    if server is not None:
        server.close()
    return {"bridge": bridge, "scenario": scenario, "how": how, "processes": count,
            "goneMs": None if gone_at is None else round((gone_at - started) * 1000),
            "bridgeExitMs": round((bridge_exit_at - started) * 1000), "survivors": len(survivors)}


def summary(values: list[float]) -> str:
    return benchkit.text(values, digits=0) if values else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each measurement")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--no-server", action="store_true", help="skip the real server (driver only)")
    parser.add_argument("--containment", default="auto", choices=["auto", "cgroup", "keeper", "none"],
                        help="how the driver's and launch()'s trees are held")
    args = parser.parse_args()
    CONTAINMENT[0] = args.containment
    bridges = ["driver"] if args.no_server else ["driver", "server"]
    report: dict[str, Any] = {"launch": [], "reap": []}
    with tempfile.TemporaryDirectory(prefix="bench-launch-") as tmp:
        work = Path(tmp)
        for delay in (0.0, 1.0):
            row = {"bootDelayS": delay, "byHandMs": by_hand(delay, args.runs),
                   "launcherMs": via_launcher(work, delay, args.runs)}
            if not args.no_server:
                row["serverMs"] = via_server(work, delay, args.runs)
            report["launch"].append(row)
        for bridge in bridges:
            for scenario in SCENARIOS:
                for how in ("SIGTERM", "SIGHUP", "stdin EOF", "SIGKILL"):
                    for _ in range(args.runs):
                        report["reap"].append(reap_trial(work, bridge, scenario, how))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs each; times in ms, median (min, max)\n")
    print("Launch: first /health answer")
    for row in report["launch"]:
        hand = benchkit.median(row["byHandMs"])
        print(f"  game boot {row['bootDelayS']:.0f}s  by hand        {summary(row['byHandMs'])}")
        print(f"                launch()       {summary(row['launcherMs'])}  overhead {benchkit.median(row['launcherMs']) - hand:+.0f}")
        if "serverMs" in row:
            print(f"                launch_instance{summary(row['serverMs'])}  overhead {benchkit.median(row['serverMs']) - hand:+.0f}"
                  "  (stdio round trip)")
    print("\nReaping: bridge signal -> last launched process gone (2 instances per trial)")
    print(f"  {'bridge':7} {'scenario':12} {'how':10} {'procs':>5}  {'gone ms':>28}  {'bridge exit ms':>28}  survivors")
    keys = sorted({(r["bridge"], r["scenario"], r["how"]) for r in report["reap"]},
                  key=lambda k: (bridges.index(k[0]), list(SCENARIOS).index(k[1]), k[2]))
    for key in keys:
        rows = [r for r in report["reap"] if (r["bridge"], r["scenario"], r["how"]) == key]
        gone = [r["goneMs"] for r in rows if r["goneMs"] is not None]
        print(f"  {key[0]:7} {key[1]:12} {key[2]:10} {rows[0]['processes']:>5}  {summary(gone):>28}  "
              f"{summary([r['bridgeExitMs'] for r in rows]):>28}  {sum(r['survivors'] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
