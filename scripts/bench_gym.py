#!/usr/bin/env python3
"""What the gym wrapper costs an environment, against a bare Python loop, in one run.

* **step**: one ``advance {frames: 1}`` through the bridge (the tool's handler, in this
  process, on a paused ALE Breakout served by ``python -m game_bridge_mcp.game.gym``:
  the command, its confirmation and the digest after), against the floor: one
  ``env.step`` plus ``env.render()`` in a bare loop in this process. Target: within 3x.
* **wire**: the same step by hand on a second instance: ``/command?cmd=step`` and
  ``/state?after=`` written on one socket and read by their length, the least any client of
  the contract pays
  (a one-step ``advance`` on a game the bridge has seen paused is these two requests; the
  answer's ``requests`` says how many each call made).
* **act**: one ``call_tool act {action: NOOP}`` (a step on a paused game: the command and its
  confirmation), against the same floor.
* **1000 steps**: ``advance {frames: 1000}`` through the bridge against 1,000 steps (with
  a render each) of the bare loop. Target: within 1.3x.
* **save / restore**: ``snapshot_save`` and ``snapshot_load`` over the game's own HTTP
  surface (``/command``, then ``/state?after=``), each against one ``noop`` the same way (the
  floor of any confirmed command). Target: each under 5 ms.
* **many**: N instances (default 16) of Breakout launched paused by one bridge from one
  gamebridge.json (``launch_instance``), then stepped round-robin by ``advance {frames: 1}``
  calls and by ``advance {frames: 100}`` calls for a few seconds: steps a second in all, and
  each instance's memory (RSS, and USS: what ending it frees).

Rounds alternate between the bridge and its floor, so the machine's load falls on both;
each figure is the median of its rounds, and the ratio is bridge over floor. The steps are
also timed in CPU (this process's and the game's together, against the bare loop's), which a
busy machine disturbs far less than the wall clock.

    .venv/bin/python scripts/bench_gym.py [--quick] [--json] [--only step|snapshot|many] [--instances N]

Every process is started and reaped here (a scratch home and registry, removed after).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import benchkit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from game_bridge_mcp.config import Config  # noqa: E402
from game_bridge_mcp.core.bridge import Bridge  # noqa: E402
from game_bridge_mcp.core.tools.clock import advance  # noqa: E402

ENV_ID = "ALE/Breakout-v5"


@contextmanager
def wrapped(home: Path, *args: str) -> Iterator[tuple[int, int]]:
    """The wrapper on Breakout, paused; its port and pid."""
    env = dict(os.environ, GAME_BRIDGE_START_PAUSED="1", PYTHONPATH=str(ROOT), GAME_BRIDGE_HOME=str(home),
               GAME_BRIDGE_INSTANCES=str(home / "instances"))
    proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp.game.gym", "--port", "0", "--seed", "1", *args,
                             ENV_ID], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    port: list[int] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            found = re.search(r"serving on http://127\.0\.0\.1:(\d+)", line)
            if found:
                port.append(int(found.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        ready.wait(120)
        if not port:
            raise SystemExit("the gym wrapper did not start (is ale-py installed?)")
        yield port[0], proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class Floor:
    """The bare loop: the environment in this process, stepped and rendered."""

    def __init__(self) -> None:
        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
        self.env = gym.make(ENV_ID, render_mode="rgb_array")
        self.env.reset(seed=1)
        self.step(1)  # fire

    def step(self, action: int = 0) -> None:
        _obs, _r, terminated, truncated, _info = self.env.step(action)
        self.env.render()
        if terminated or truncated:
            self.env.reset()

    def steps(self, n: int) -> tuple[float, float]:
        """Wall and CPU milliseconds for ``n`` steps."""
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            self.step()
        return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000


class Clocks:
    """Wall and CPU time (this process's and the game's) around a stretch of calls."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.game = psutil.Process(pid)

    def _cpu(self) -> float:
        times = self.game.cpu_times()
        return time.process_time() + times.user + times.system

    def __enter__(self) -> "Clocks":
        self.started, self.cpu = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.wall_ms = (time.perf_counter() - self.started) * 1000
        self.cpu_ms = (self._cpu() - self.cpu) * 1000


class Wire:
    """The least a client of the contract can do: HTTP/1.1 on one socket, requests written
    whole, answers read by their Content-Length (no library in between)."""

    def __init__(self, port: int) -> None:
        import socket

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.host = f"127.0.0.1:{port}"

    def get(self, path: str) -> Any:
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(self.buffer) < length:
            self.buffer += self.sock.recv(65536)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return json.loads(body)

    def step(self) -> None:
        sent = self.get("/command?cmd=step&frames=1")
        state = self.get(f"/state?view=digest&after={sent['commandId']}&waitMs=5000")
        assert state["completedCommandId"] >= sent["commandId"], state


class Raw:
    """One kept-alive connection to the game: a command confirmed with ``after``."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def get(self, path: str) -> Any:
        self.conn.request("GET", path)
        return json.loads(self.conn.getresponse().read())

    def confirmed(self, query: str) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        sent = self.get("/command?" + query)
        state = self.get(f"/state?view=digest&after={sent['commandId']}&waitMs=5000")
        elapsed = (time.perf_counter() - started) * 1000
        outcome = next(r for r in state["commandResults"] if r["id"] == sent["commandId"])
        assert outcome["ok"], outcome
        return elapsed, outcome.get("result") or {}


def measure_steps(home: Path, rounds: int, long_steps: int) -> dict[str, Any]:
    floor = Floor()
    from game_bridge_mcp.core.tools.commands import run_command

    figures: dict[str, list[float]] = {name: [] for name in (
        "oneWall", "oneCpu", "oneFloorWall", "oneFloorCpu", "longWall", "longCpu", "longFloorWall", "longFloorCpu",
        "actWall", "actCpu", "wireWall", "wireCpu", "requests")}
    # A second instance for the wire floor: another client's steps on the bridge's game
    # would make every advance look first (core/clock.py), as it should.
    with wrapped(home) as (port, pid), wrapped(home) as (wire_port, wire_pid):
        bridge = Bridge(Config(port=port, environ={}, scan=False, registry=False))
        advance(bridge, port=port, frames=1)  # the bridge learns the game
        stats = bridge.client(port).stats
        wire = Wire(wire_port)
        calls = 20
        for _ in range(rounds):
            sent = stats["requests"]
            with Clocks(pid) as clocks:
                for _ in range(calls):
                    assert advance(bridge, port=port, frames=1)["framesAdvanced"] == 1
            figures["oneWall"].append(clocks.wall_ms / calls)
            figures["oneCpu"].append(clocks.cpu_ms / calls)
            figures["requests"].append((stats["requests"] - sent) / calls)
            with Clocks(wire_pid) as clocks:
                for _ in range(calls):
                    wire.step()
            figures["wireWall"].append(clocks.wall_ms / calls)
            figures["wireCpu"].append(clocks.cpu_ms / calls)
            with Clocks(pid) as clocks:
                for _ in range(calls):
                    assert run_command(bridge, port, "act", {"action": "NOOP"}, via="manifest")["applied"] is True
            figures["actWall"].append(clocks.wall_ms / calls)
            figures["actCpu"].append(clocks.cpu_ms / calls)
            wall, cpu = floor.steps(calls)
            figures["oneFloorWall"].append(wall / calls)
            figures["oneFloorCpu"].append(cpu / calls)
            with Clocks(pid) as clocks:
                assert advance(bridge, port=port, frames=long_steps)["framesAdvanced"] == long_steps
            figures["longWall"].append(clocks.wall_ms)
            figures["longCpu"].append(clocks.cpu_ms)
            wall, cpu = floor.steps(long_steps)
            figures["longFloorWall"].append(wall)
            figures["longFloorCpu"].append(cpu)
        bridge.shutdown()
    floor.env.close()
    m = {name: benchkit.median(values) for name, values in figures.items()}
    one = {"bridgeMs": m["oneWall"], "floorMs": m["oneFloorWall"], "ratio": m["oneWall"] / m["oneFloorWall"],
           "bridgeCpuMs": m["oneCpu"], "floorCpuMs": m["oneFloorCpu"], "cpuRatio": m["oneCpu"] / m["oneFloorCpu"],
           "requests": m["requests"]}
    by_hand = {"ms": m["wireWall"], "ratio": m["wireWall"] / m["oneFloorWall"], "cpuMs": m["wireCpu"],
            "cpuRatio": m["wireCpu"] / m["oneFloorCpu"]}
    act = {"bridgeMs": m["actWall"], "ratio": m["actWall"] / m["oneFloorWall"], "bridgeCpuMs": m["actCpu"],
           "cpuRatio": m["actCpu"] / m["oneFloorCpu"]}
    many = {"steps": long_steps, "bridgeMs": m["longWall"], "floorMs": m["longFloorWall"],
            "ratio": m["longWall"] / m["longFloorWall"], "bridgeCpuMs": m["longCpu"], "floorCpuMs": m["longFloorCpu"],
            "cpuRatio": m["longCpu"] / m["longFloorCpu"]}
    return {"oneStep": one, "oneAct": act, "oneWire": by_hand, "longAdvance": many}


def measure_snapshots(home: Path, rounds: int) -> dict[str, Any]:
    with wrapped(home) as (port, _pid):
        raw = Raw(port)
        features = raw.get("/health")["features"]
        if "snapshot" not in features:
            return {"skipped": f"the game does not advertise snapshot (features: {', '.join(features)})"}
        raw.confirmed("cmd=act&action=FIRE&frames=30")
        save, load, noop, sizes = [], [], [], []
        for _ in range(rounds):
            ms, result = raw.confirmed("cmd=snapshot_save")
            save.append(ms)
            sizes.append(result.get("bytes", 0))
            raw.confirmed("cmd=act&action=LEFT&frames=5")
            ms, _ = raw.confirmed(f"cmd=snapshot_load&id={result['id']}")
            load.append(ms)
            raw.confirmed(f"cmd=snapshot_drop&id={result['id']}")
            noop.append(raw.confirmed("cmd=noop")[0])
            raw.confirmed("cmd=act&action=RIGHT&frames=3")
    return {"saveMs": benchkit.median(save), "loadMs": benchkit.median(load), "noopMs": benchkit.median(noop),
            "bytes": int(benchkit.median(sizes))}


def measure_many(home: Path, count: int, seconds: float) -> dict[str, Any]:
    import psutil

    from game_bridge_mcp.core.tools.instances import launch_instance
    from game_bridge_mcp.launch.declaration import load_declaration

    project = home / "project"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "game_bridge_mcp", "gym", "--init", "--seed", "1", ENV_ID], cwd=project,
                   check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    path = project / "gamebridge.json"
    doc = json.loads(path.read_text())
    low = free_range(count + 4)
    doc["launch"]["portRange"] = f"{low}-{low + count + 3}"  # free now: not the default range others use
    path.write_text(json.dumps(doc))
    env = dict(os.environ, GAME_BRIDGE_HOME=str(home), PYTHONPATH=str(ROOT))
    bridge = Bridge(Config(environ=env, registry_dir=home / "instances", scan_range=(1,),
                           declaration=load_declaration(path)))
    try:
        started = time.perf_counter()
        launched = [launch_instance(bridge, paused=True, timeout_ms=120000) for _ in range(count)]
        ports = [int(answer["port"]) for answer in launched]
        launch_s = time.perf_counter() - started
        for port in ports:
            advance(bridge, port=port, frames=1)
        rates = {}
        for frames in (1, 100):
            steps, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                for port in ports:
                    steps += advance(bridge, port=port, frames=frames)["framesAdvanced"]
            rates[f"frames{frames}"] = steps / (time.perf_counter() - started)
        rss, uss = [], []
        for answer in launched:
            info = psutil.Process(int(answer["pid"])).memory_full_info()
            rss.append(info.rss / 2 ** 20)
            uss.append(info.uss / 2 ** 20)
    finally:
        bridge.shutdown()
    return {"instances": count, "launchSeconds": launch_s, "stepsPerSecond": rates,
            "rssMiB": benchkit.median(rss) if rss else None, "ussMiB": benchkit.median(uss) if uss else None,
            "measured": len(rss)}


def free_range(count: int) -> int:
    """The first of ``count`` consecutive ports that are free now (from a port the OS gives)."""
    import socket

    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            low = probe.getsockname()[1]
        if low + count > 65535:
            continue
        try:
            for port in range(low, low + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return low
    raise SystemExit(f"no {count} consecutive free ports found")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds and instances (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--only", choices=("step", "snapshot", "many"))
    parser.add_argument("--instances", type=int, default=16)
    args = parser.parse_args(argv)
    rounds, long_steps, count, seconds = (2, 100, 2, 1.0) if args.quick else (7, 1000, args.instances, 5.0)
    home = Path(tempfile.mkdtemp(prefix="gb-gymbench-"))
    report: dict[str, Any] = {"machine": benchkit.machine()}
    try:
        if args.only in (None, "step"):
            report["step"] = measure_steps(home, rounds, long_steps)
        if args.only in (None, "snapshot"):
            report["snapshot"] = measure_snapshots(home, rounds * 3)
        if args.only in (None, "many"):
            report["many"] = measure_many(home, count, seconds)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"machine: load {report['machine'].get('loadAverage')}")
    if "step" in report:
        one, many = report["step"]["oneStep"], report["step"]["longAdvance"]
        print(f"advance {{frames: 1}} through the bridge {one['bridgeMs']:.3f} ms, env.step + render "
              f"{one['floorMs']:.3f} ms: {one['ratio']:.2f}x (target 3x); CPU (both processes) "
              f"{one['bridgeCpuMs']:.3f} ms against {one['floorCpuMs']:.3f}: {one['cpuRatio']:.2f}x; "
              f"{one['requests']:g} requests a call")
        wire = report["step"]["oneWire"]
        print(f"the same step by hand (/command, /state?after= on one socket) {wire['ms']:.3f} ms: "
              f"{wire['ratio']:.2f}x; CPU {wire['cpuMs']:.3f} ms: {wire['cpuRatio']:.2f}x")
        act = report["step"]["oneAct"]
        print(f"call_tool act {{action: NOOP}} (one step) {act['bridgeMs']:.3f} ms: {act['ratio']:.2f}x; CPU "
              f"{act['bridgeCpuMs']:.3f} ms: {act['cpuRatio']:.2f}x")
        print(f"advance {{frames: {many['steps']}}} {many['bridgeMs']:.1f} ms, the bare loop {many['floorMs']:.1f} ms: "
              f"{many['ratio']:.2f}x (target 1.3x); CPU {many['bridgeCpuMs']:.1f} ms against "
              f"{many['floorCpuMs']:.1f}: {many['cpuRatio']:.2f}x")
    if "snapshot" in report:
        snap = report["snapshot"]
        if "skipped" in snap:
            print(f"snapshots: skipped ({snap['skipped']})")
        else:
            print(f"snapshot_save {snap['saveMs']:.2f} ms, snapshot_load {snap['loadMs']:.2f} ms over HTTP "
                  f"(a confirmed noop {snap['noopMs']:.2f} ms; {snap['bytes']} bytes; target 5 ms each)")
    if "many" in report:
        many = report["many"]
        rates = many["stepsPerSecond"]
        print(f"{many['instances']} instances launched paused in {many['launchSeconds']:.1f} s; stepped round-robin: "
              f"{rates['frames1']:.0f} steps/s in all by advance {{frames: 1}}, {rates['frames100']:.0f} by "
              f"{{frames: 100}}; memory an instance: RSS {many['rssMiB']:.0f} MiB, USS {many['ussMiB']:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
