#!/usr/bin/env python3
"""What saving, restoring and forking a game cost, against the floors a client could reach,
as ratios in one run (docs/states.md, the issue's targets in brackets):

* **save / restore** on the demo, through the bridge's handlers (``save_state``,
  ``restore_state`` of that state: the game's own snapshot, its live copy loaded back),
  against a plain ``get_state`` in the same rounds [each under 5 ms; restore within 2x of
  get_state];
* **fork** of the demo (``fork_instance {state}``: a paused launch, the bytes posted and
  loaded) against a paused ``launch_instance`` alone, alternating [within 1.3x];
* **re-execution**: ``restore_state`` of a game re-executed ``FRAMES`` frames in (a paused
  launch on its port and its journal replayed: ``FRAMES`` single-frame steps), against
  launching it paused and stepping it the same by hand on one kept-alive connection
  (``/command?cmd=step`` then ``/state?after=``), alternating [within 1.5x for a web game].
  Games: the demo with ``--no-snapshot`` (always), a web page through the browser wrapper
  (when Chromium is here), a pygame game through the pygame wrapper (when pygame is).

    .venv/bin/python scripts/bench_states.py [--quick] [--json] [--frames 600]

Every process is started by the bridge's launcher and reaped by it. No figure is a
pass/fail target; on a loaded machine compare the ratios, which each round pairs.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchkit import in_ms, machine, median  # noqa: E402
from game_bridge_mcp.config import Config  # noqa: E402
from game_bridge_mcp.core.bridge import Bridge  # noqa: E402
from game_bridge_mcp.launch.declaration import load_declaration  # noqa: E402

WEB_PAGE = ROOT / "tests" / "peers" / "web" / "index.html"
PYGAME_GAME = ROOT / "tests" / "peers" / "games" / "pygame_clocked.py"


def free_range(count: int = 16) -> tuple[int, int]:
    """Ports the OS hands out now (bound at once, so none is the shared default range)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            low = probe.getsockname()[1]
        try:
            for port in range(low, low + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
            return low, low + count - 1
        except OSError:
            continue
    raise RuntimeError("no free range of ports")


def bridge_for(work: Path, name: str, argv: list[str]) -> Bridge:
    folder = work / name
    folder.mkdir(parents=True)
    path = folder / "gamebridge.json"
    low, high = free_range()
    path.write_text(json.dumps({"name": name, "launch": {"argv": argv, "cwd": str(ROOT), "readyTimeoutMs": 60000,
                                                         "portRange": f"{low}-{high}",
                                                         "env": {"PYTHONPATH": str(ROOT)}}}))
    env = dict(os.environ, GAME_BRIDGE_HOME=str(folder / "home"))
    config = Config(environ=env, registry_dir=folder / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(path))
    return Bridge(config)


def call(bridge: Bridge, name: str, port: int | None = None, **arguments: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"name": name, "arguments": arguments}
    if port is not None:
        args["port"] = port
    return bridge.run_tool("call_tool", args)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


# --------------------------------------------------------------------------- save and restore
def save_restore(work: Path, rounds: int) -> dict[str, Any]:
    bridge = bridge_for(work, "demo", [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}",
                                       "--start", "--no-register", "--seed", "3"])
    bridge.states.max_states = 10 * rounds
    try:
        port = int(bridge.run_tool("launch_instance", {"paused": True})["port"])
        for x in (-3, 0, 3):
            call(bridge, "drop", port, x=x)
        call(bridge, "advance", port, frames=60)
        state, save, restore = [], [], []
        exact = True
        for _ in range(rounds):
            state.append(timed(lambda: call(bridge, "get_state", port))[0])
            took, saved = timed(lambda: call(bridge, "save_state", port))
            save.append(took)
            took, restored = timed(lambda: call(bridge, "restore_state", port, state=saved["state"]))
            restore.append(took)
            exact = exact and saved["exact"] and restored["exact"] and restored["how"] == "snapshot"
        return {"get_state": in_ms(state), "save_state": in_ms(save), "restore_state": in_ms(restore),
                "restore/get_state": round(median(restore) / median(state), 2), "exact": exact}
    finally:
        bridge.shutdown()


# --------------------------------------------------------------------------- fork
def fork(work: Path, rounds: int) -> dict[str, Any]:
    bridge = bridge_for(work, "fork", [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}",
                                       "--start", "--no-register", "--seed", "3"])
    try:
        port = int(bridge.run_tool("launch_instance", {"paused": True})["port"])
        call(bridge, "drop", port, x=1)
        call(bridge, "advance", port, frames=40)
        saved = call(bridge, "save_state", port)
        launches, forks = [], []
        exact = True
        for _ in range(rounds):
            took, launched = timed(lambda: bridge.run_tool("launch_instance", {"paused": True}))
            launches.append(took)
            bridge.run_tool("stop_instance", {"port": launched["port"]})
            took, forked = timed(lambda: call(bridge, "fork_instance", state=saved["state"]))
            forks.append(took)
            exact = exact and forked["exact"] and forked["how"] == "snapshot"
            bridge.run_tool("stop_instance", {"port": forked["port"]})
        return {"launch_instance paused": in_ms(launches), "fork_instance": in_ms(forks),
                "fork/launch": round(median(forks) / median(launches), 2), "exact": exact}
    finally:
        bridge.shutdown()


# --------------------------------------------------------------------------- re-execution
class Raw:
    """Stepping by hand on one kept-alive connection: the floor."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(self, path: str) -> Any:
        self.conn.request("GET", path)
        return json.loads(self.conn.getresponse().read())

    def step(self) -> None:
        command_id = self.get("/command?cmd=step&frames=1")["commandId"]
        self.get(f"/state?after={command_id}&waitMs=10000")


def reexecution(work: Path, name: str, argv: list[str], frames: int, rounds: int) -> dict[str, Any]:
    bridge = bridge_for(work, name, argv)
    try:
        port = int(bridge.run_tool("launch_instance", {"paused": True})["port"])
        for _ in range(frames):  # the session: frame by frame, as advance {until} steps
            call(bridge, "advance", port, frames=1)
        saved = call(bridge, "save_state", port)
        call(bridge, "advance", port, frames=5)
        restores, by_hand = [], []
        differed: list[str] = []
        exact = True
        for _ in range(rounds):
            took, restored = timed(lambda: call(bridge, "restore_state", port, state=saved["state"]))
            restores.append(took)
            exact = exact and restored["exact"] and restored["how"] == "re-execution"
            if not restored["exact"]:
                differed.extend(restored.get("differed") or [])

            def manual() -> None:
                launched = bridge.run_tool("launch_instance", {"paused": True})
                raw = Raw(int(launched["port"]))
                for _ in range(frames):
                    raw.step()
                raw.conn.close()
                manual_ports.append(int(launched["port"]))

            manual_ports: list[int] = []
            by_hand.append(timed(manual)[0])
            for other in manual_ports:
                bridge.run_tool("stop_instance", {"port": other})
        return {"frames": frames, "restore_state (re-executed)": in_ms(restores),
                "launch + steps by hand": in_ms(by_hand),
                "restore/by hand": round(median(restores) / median(by_hand), 2), "exact": exact,
                **({"differed": sorted(set(differed))} if differed else {})}
    finally:
        bridge.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds and frames (a check that it runs)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--frames", type=int, default=600, help="frames a re-executed game is restored at")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 30
    frames = 30 if args.quick else args.frames
    work = Path(tempfile.mkdtemp(prefix="bench-states-"))
    report: dict[str, Any] = {"machine": machine()}
    try:
        report["save and restore (demo)"] = save_restore(work, rounds)
        report["fork (demo)"] = fork(work, 2 if args.quick else 8)
        slow_rounds = 2 if args.quick else 5
        games = {"demo --no-snapshot": [sys.executable, "-m", "game_bridge_mcp.game.demo", "--port", "{port}",
                                        "--start", "--no-register", "--no-snapshot"]}
        if shutil.which("chromium") or shutil.which("chromium-browser"):
            games["web page (browser wrapper)"] = [sys.executable, "-m", "game_bridge_mcp.game.browser", "--port",
                                                  "{port}", str(WEB_PAGE)]
        if importlib.util.find_spec("pygame") is not None:  # (not imported: it prints a banner on stdout)
            games["pygame game (pygame wrapper)"] = [sys.executable, "-m", "game_bridge_mcp.game.pygame", "--port",
                                                    "{port}", str(PYGAME_GAME)]
        for index, (name, game) in enumerate(games.items()):
            report[f"re-execution: {name}"] = reexecution(work, f"reexec{index}", game, frames, slow_rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key}: {json.dumps(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
