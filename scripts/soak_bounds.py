"""The soak's probes of the bridge's own bounds (``scripts/soak.py`` runs them once):

* three concurrent ``get_screenshot`` calls to a game whose PNG is 0.4 MB on the wire and
  declares 16384 x 10900 pixels: each refused from its header, the server's memory flat;
* a client that floods ``tools/call`` requests and never reads an answer, then closes
  stdin: the server must stop taking requests (back-pressure) and then exit by itself;
* a crafted 30 MB trace, its first line a 4.3 MB answer, replayed with ``--report``: the
  replay's peak memory and its time bounded.

Each returns its figures and the bounds it broke (``broken``).
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil

#: What the probes allow: the server's growth while three huge screenshots are refused,
#: requests taken in without answers being read, a process's resident memory, seconds.
SCREENSHOT_GROWTH_MIB = 100
FLOOD_TAKEN = 20_000
PEAK_MIB = 300
EXIT_S = 15.0
REPLAY_S = 60.0


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def bomb_png(width: int = 16384, height: int = 10900) -> bytes:
    """A whole, valid 1-bit grey PNG: a few hundred KB that decode to gigabytes."""
    row = b"\x00" * (1 + (width + 7) // 8)
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row * 256) for _ in range(height // 256))
    idat += packer.compress(row * (height % 256)) + packer.flush()
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + _chunk(b"IDAT", idat) + _chunk(b"IEND", b""))


class PictureGame:
    """A game-like server on port 0 whose screenshot is :func:`bomb_png`."""

    def __init__(self) -> None:
        picture = bomb_png()
        bodies = {"/health": (b'{"ok": true, "frame": 1, "features": ["screenshot"]}', "application/json"),
                  "/tools": (b'{"game": {"name": "Pictures", "version": "1"}, "toolsets": []}', "application/json"),
                  "/screenshot": (picture, "image/png")}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                body, mime = bodies.get(self.path.split("?", 1)[0], (b'{"ok": false, "error": "no"}', "application/json"))
                self.send_response(200 if self.path.split("?", 1)[0] in bodies else 404)
                self.send_header("Content-Type", mime)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _wait_with_cpu(proc: subprocess.Popen[bytes], limit_s: float) -> tuple[int | None, float | None]:
    """Reap ``proc`` (killed after ``limit_s`` of wall time: then no code) and say the CPU
    seconds it used, user and system, from its own resource usage."""
    deadline = time.monotonic() + limit_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            return None, None
        time.sleep(0.05)  # polling a child with a deadline


def _peak_rss(ps: psutil.Process, stop: threading.Event, into: list[float]) -> None:
    while not stop.is_set():
        try:
            into.append(ps.memory_info().rss / 2**20)
        except psutil.Error:
            return
        stop.wait(0.02)


def screenshots(server: Any, port: int) -> dict[str, Any]:
    """Three concurrent get_screenshot calls through ``server`` (soak.Server) to ``port``."""
    before = server.sample()["rssMiB"]
    seen: list[float] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_peak_rss, args=(server.ps, stop, seen), daemon=True)
    watcher.start()
    started = time.monotonic()
    idents = [server.start("tools/call", {"name": "call_tool", "arguments": {"name": "get_screenshot", "port": port}})
              for _ in range(3)]
    texts = [json.dumps(server.wait(ident, 60)) for ident in idents]
    seconds = round(time.monotonic() - started, 2)
    stop.set()
    watcher.join()
    peak = max(seen or [before])
    broken = []
    if not all("million pixels" in text and "InternalError" not in text for text in texts):
        broken.append(f"a huge screenshot was not refused from its header: {texts[0][:200]}")
    if peak - before > SCREENSHOT_GROWTH_MIB:
        broken.append(f"three huge screenshots grew the server {before:.0f} -> {peak:.0f} MiB")
    return {"seconds": seconds, "rssMiB": [before, round(peak, 1)], "broken": broken}


def flood_unread(work: Path, env: dict[str, str], port: int) -> dict[str, Any]:
    """A client that sends requests and never reads: how many the server takes in, what
    that costs it, and how long it takes to exit once stdin is closed."""
    proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp", "--no-scan", "--port", str(port)], cwd=work,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    broken: list[str] = []
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                         b'"capabilities":{},"clientInfo":{"name":"soak","version":"0"}}}\n')
        proc.stdin.flush()
        proc.stdout.readline()
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.flush()
        fd = proc.stdin.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        sent, pending, blocked = 0, b"", None
        deadline = time.monotonic() + 30
        while sent < 10 * FLOOD_TAKEN and time.monotonic() < deadline:
            if not pending:
                pending = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"call_tool",'
                                   b'"arguments":{"name":"get_health"}}}\n' % n for n in range(sent + 1, sent + 101))
            try:
                written = os.write(fd, pending)
            except BlockingIOError:
                blocked = blocked or time.monotonic()
                if time.monotonic() - blocked > 2.0:
                    break
                time.sleep(0.01)
                continue
            blocked = None
            sent += pending[:written].count(b"\n")
            pending = pending[written:]
        rss = psutil.Process(proc.pid).memory_info().rss / 2**20
        closed = time.monotonic()
        proc.stdin.close()
        try:
            proc.wait(EXIT_S + 5)
            exit_s: float | None = round(time.monotonic() - closed, 2)
        except subprocess.TimeoutExpired:
            exit_s = None
        if sent >= FLOOD_TAKEN:
            broken.append(f"the server took in {sent} requests without its answers being read")
        if rss > PEAK_MIB:
            broken.append(f"the flooded server reached {rss:.0f} MiB")
        if exit_s is None or exit_s > EXIT_S:
            broken.append(f"the server had not exited {EXIT_S:.0f} s after stdin closed")
        return {"taken": sent, "rssMiB": round(rss, 1), "exitSeconds": exit_s, "broken": broken}
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def crafted_trace(work: Path, env: dict[str, str], port: int) -> dict[str, Any]:
    """Replay a 30 MB crafted trace with a report: its peak memory and time."""
    path = work / "crafted.trace"
    wide = {"rows": [{"id": i, "name": f"entity {i}", "pos": [i, i + 1]} for i in range(110_000)]}
    entity = {"id": 1, "kind": "crate", "pos": [1.5, 2.5], "tags": ["a", "b"]}
    answer = {"game": {"entities": [dict(entity, id=i) for i in range(100)]}}
    with path.open("w") as handle:
        handle.write('{"format": "game-bridge-trace", "version": 1}\n')
        handle.write(json.dumps({"type": "call", "tool": "call_tool", "name": "noop", "port": port,
                                 "arguments": {}, "answer": wide}) + "\n")
        for n in range(4500):
            handle.write(json.dumps({"type": "call", "tool": "call_tool", "name": "noop", "port": port,
                                     "arguments": {"n": n}, "answer": answer}) + "\n")
    size_mb = round(path.stat().st_size / 1e6, 1)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "game_bridge_mcp", "replay", str(path), "--port", str(port),
                             "--force", "--report", str(work / "crafted.html")], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[float] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_peak_rss, args=(psutil.Process(proc.pid), stop, seen), daemon=True)
    watcher.start()
    code, cpu = _wait_with_cpu(proc, REPLAY_S * 3)
    seconds = round(time.monotonic() - started, 2)
    stop.set()
    watcher.join()
    peak = max(seen or [0.0])
    report = work / "crafted.html"
    broken = []
    if code not in (0, 1) or not report.exists():
        broken.append(f"the crafted trace's replay ended with {code} and {'a' if report.exists() else 'no'} report")
    if peak > PEAK_MIB:
        broken.append(f"replaying a {size_mb} MB trace peaked at {peak:.0f} MiB")
    if cpu is not None and cpu > REPLAY_S:  # its own CPU time: a loaded machine stretches the wall's
        broken.append(f"replaying a {size_mb} MB trace took {cpu:.1f} s of CPU ({seconds} s of wall time)")
    path.unlink(missing_ok=True)
    return {"traceMB": size_mb, "seconds": seconds, "cpuSeconds": None if cpu is None else round(cpu, 2),
            "peakMiB": round(peak, 1),
            "reportMB": round(report.stat().st_size / 1e6, 1) if report.exists() else None, "broken": broken}


def bridge_bounds(server: Any, work: Path, env: dict[str, str]) -> dict[str, Any]:
    """All three probes, against one picture game."""
    game = PictureGame()
    try:
        found = {"screenshots": screenshots(server, game.port), "flood": flood_unread(work, env, game.port),
                 "trace": crafted_trace(work, env, game.port)}
    finally:
        game.close()
    found["broken"] = [item for probe in found.values() for item in probe["broken"]]
    return found
