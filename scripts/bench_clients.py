"""The ways scripts/bench.py calls a game, and the processes it starts.

* :class:`FloorClient`: the honest floor, the best a client can do on this machine in
  Python: ONE kept-alive raw socket (``TCP_NODELAY``), requests written as one buffer,
  answers read with ``recv_into`` straight into one buffer, the head scanned for
  ``Content-Length`` only, JSON decoded with the cyclic collector paused. ``poll``:
  ``/command``, then ``/state`` back to back until ``completedCommandId`` reaches the
  command. ``after``: ``/command``, then ONE ``/state?after=<id>&waitMs=<ms>``.
* :class:`CFloor`: the same two floors as a small C program (compiled here with the
  system's ``cc`` when there is one), driven over a pipe: one line in, the time and
  the request count back. The bench uses whichever floor is faster, per figure.
* :class:`InProcess`: ``Bridge(config).run_tool("call_tool", ...)`` in this process.
* :class:`StdioServer`: the real server (``python -m game_bridge_mcp``) spoken to in
  JSON-RPC lines.
"""

from __future__ import annotations

import gc
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

TOOL = "step"  # the benchmark game's one command: a manifest tool, applied on the next frame


class Procs:
    """Every process the benchmark starts, reaped on the way out whatever happens."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def add(self, proc: subprocess.Popen) -> subprocess.Popen:
        self.procs.append(proc)
        return proc

    def reap(self, proc: subprocess.Popen) -> None:
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def reap_all(self) -> None:
        for proc in list(self.procs):
            self.reap(proc)


# =========================================================================== the floor, in Python

class FloorClient:
    """One kept-alive connection to one game (see the module docstring)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.prefix = b"GET "
        self.suffix = f" HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        self.requests = 0

    def close(self) -> None:
        self.sock.close()

    def get(self, path: str) -> bytes | bytearray:
        self.sock.sendall(self.prefix + path.encode() + self.suffix)
        self.requests += 1
        buf = self.buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the game closed the connection")
            buf += chunk
        head = bytes(buf[:end]).lower()
        at = head.find(b"content-length:")
        length = int(head[at + 15:head.find(b"\r\n", at) if head.find(b"\r\n", at) >= 0 else None])
        start = end + 4
        have = len(buf) - start
        if have >= length:
            body = bytes(buf[start:start + length])
            del buf[:start + length]
            return body
        out = bytearray(length)
        view = memoryview(out)
        view[:have] = buf[start:]
        buf.clear()
        while have < length:
            count = self.sock.recv_into(view[have:])
            if not count:
                raise ConnectionError("the game closed the connection mid-answer")
            have += count
        return out

    def json(self, path: str) -> Any:
        body = self.get(path)
        if len(body) < 65536:
            return json.loads(body)
        gc.disable()
        try:
            return json.loads(body)
        finally:
            gc.enable()

    def command(self) -> int:
        return int(self.json(f"/command?cmd={TOOL}")["commandId"])

    def poll(self) -> dict[str, Any]:
        """``/command``, then ``/state`` back to back until the command is done."""
        command_id = self.command()
        while True:
            state = self.json("/state")
            if state["completedCommandId"] >= command_id:
                return state

    def after(self) -> dict[str, Any]:
        """``/command``, then one held ``/state?after=``."""
        command_id = self.command()
        while True:
            state = self.json(f"/state?after={command_id}&waitMs=5000")
            if state["completedCommandId"] >= command_id:
                return state


class PyFloor:
    """The Python floor for several games: one kept-alive connection each."""

    name = "python"

    def __init__(self) -> None:
        self.clients: dict[int, FloorClient] = {}

    def client(self, port: int) -> FloorClient:
        client = self.clients.get(port)
        if client is None:
            client = self.clients[port] = FloorClient(port)
        return client

    def poll(self, port: int) -> None:
        self.client(port).poll()

    def after(self, port: int) -> None:
        self.client(port).after()

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


# =========================================================================== the floor, in C

C_FLOOR = r'''
/* The floor as a C client: reads "poll PORT" or "after PORT" lines on stdin, runs one
   confirmed command on a kept-alive connection per port, and answers "MICROSECONDS
   REQUESTS". JSON is not parsed: completedCommandId is found by scanning for its key
   (the kit writes it at the top level). Exit on EOF. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXPORTS 64
static int ports[MAXPORTS], socks[MAXPORTS], nports = 0;
static char *buf = NULL; static size_t cap = 0, used = 0;
static long requests = 0;

static int conn(int port) {
    for (int i = 0; i < nports; i++) if (ports[i] == port) return socks[i];
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_port = htons(port); a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); exit(2); }
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ports[nports] = port; socks[nports] = s; nports++;
    return s;
}

static void need(size_t n) {
    if (n <= cap) return;
    while (cap < n) cap = cap ? cap * 2 : 1 << 20;
    buf = realloc(buf, cap);
}

/* One GET; returns the body (NUL-terminated, in buf) and its length. */
static char *get(int port, const char *path, size_t *len) {
    int s = conn(port);
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", path, port);
    if (send(s, req, n, 0) != n) { perror("send"); exit(2); }
    requests++;
    used = 0;
    char *end = NULL;
    for (;;) {
        need(used + 65537);
        ssize_t got = recv(s, buf + used, cap - used - 1, 0);
        if (got <= 0) { fprintf(stderr, "closed\n"); exit(2); }
        used += got; buf[used] = 0;
        if ((end = strstr(buf, "\r\n\r\n")) != NULL) break;
    }
    char *cl = strcasestr(buf, "content-length:");
    size_t length = cl ? strtoul(cl + 15, NULL, 10) : 0;
    size_t start = (end - buf) + 4;
    need(start + length + 1);
    while (used < start + length) {
        ssize_t got = recv(s, buf + used, start + length - used, 0);
        if (got <= 0) { fprintf(stderr, "closed\n"); exit(2); }
        used += got;
    }
    buf[start + length] = 0;
    *len = length;
    return buf + start;
}

static long field(const char *body, const char *key) {
    const char *at = strstr(body, key);
    if (!at) { fprintf(stderr, "no %s\n", key); exit(2); }
    return strtol(at + strlen(key), NULL, 10);
}

static double now_us(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(void) {
    char line[128], mode[16], path[128];
    int port;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%15s %d", mode, &port) != 2) continue;
        long before = requests;
        double t0 = now_us();
        size_t len;
        long id = field(get(port, "/command?cmd=step", &len), "\"commandId\":");
        int after = strcmp(mode, "after") == 0;
        for (;;) {
            if (after) snprintf(path, sizeof path, "/state?after=%ld&waitMs=5000", id);
            else snprintf(path, sizeof path, "/state");
            if (field(get(port, path, &len), "\"completedCommandId\":") >= id) break;
        }
        printf("%.1f %ld\n", now_us() - t0, requests - before);
    }
    return 0;
}
'''


class CFloor:
    """The C floor (see :data:`C_FLOOR`), or None from :meth:`build` without a compiler."""

    name = "c"

    def __init__(self, procs: Procs, binary: Path) -> None:
        self.proc = procs.add(subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        self.last_us = 0.0

    @classmethod
    def build(cls, procs: Procs, scratch: str) -> "CFloor | None":
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            return None
        source = Path(scratch) / "floor.c"
        source.write_text(C_FLOOR)
        binary = Path(scratch) / "floor"
        done = subprocess.run([compiler, "-O2", "-o", str(binary), str(source)], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"(no C floor: {done.stderr[:300]})", file=sys.stderr)
            return None
        return cls(procs, binary)

    def _run(self, mode: str, port: int) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{mode} {port}\n".encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().decode().split()
        if len(line) != 2:
            raise RuntimeError("the C floor stopped")
        self.last_us = float(line[0])
        return self.last_us / 1000  # its own time (ms): the pipe to it is not the floor's

    def poll(self, port: int) -> float:
        return self._run("poll", port)

    def after(self, port: int) -> float:
        return self._run("after", port)


# =========================================================================== the floor, in Node.js

NODE_FLOOR = r"""
// The floor as a Node.js client: the same lines as the C floor ("poll PORT" or
// "after PORT" in, "MICROSECONDS REQUESTS" out), one kept-alive connection per port,
// every answer parsed with JSON.parse (what a client in the game's own language pays).
const net = require("net");
const conns = new Map();
let requests = 0;
function connection(port) {
  let c = conns.get(port);
  if (c) return c;
  const sock = net.connect({ port, host: "127.0.0.1" });
  sock.setNoDelay(true);
  c = { sock, chunks: [], size: 0, waiting: null };
  sock.on("data", (d) => { c.chunks.push(d); c.size += d.length; if (c.waiting) c.waiting(); });
  sock.on("error", (e) => { console.error(String(e)); process.exit(2); });
  conns.set(port, c);
  return c;
}
function get(port, path) {
  const c = connection(port);
  requests++;
  c.sock.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  return new Promise((resolve) => {
    let need = -1, start = 0;  // the whole answer's size once its head is read
    const check = () => {
      if (need < 0) {
        const head = c.chunks.length === 1 ? c.chunks[0] : Buffer.concat(c.chunks);
        c.chunks = [head];
        const end = head.indexOf("\r\n\r\n");
        if (end < 0) return;
        const m = /content-length:\s*(\d+)/.exec(head.subarray(0, end).toString("latin1").toLowerCase());
        start = end + 4;
        need = start + (m ? Number(m[1]) : 0);
      }
      if (c.size < need) return;  // copied once, when all of it is here
      const all = c.chunks.length === 1 ? c.chunks[0] : Buffer.concat(c.chunks, c.size);
      const rest = all.subarray(need);
      c.chunks = rest.length ? [rest] : [];
      c.size = rest.length;
      c.waiting = null;
      resolve(JSON.parse(all.subarray(start, need).toString("utf8")));
    };
    c.waiting = check;
    check();
  });
}
async function run(mode, port) {
  const before = requests;
  const t0 = process.hrtime.bigint();
  const id = (await get(port, "/command?cmd=step")).commandId;
  for (;;) {
    const path = mode === "after" ? `/state?after=${id}&waitMs=5000` : "/state";
    if ((await get(port, path)).completedCommandId >= id) break;
  }
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  process.stdout.write(`${us.toFixed(1)} ${requests - before}\n`);
}
let pending = "";
let chain = Promise.resolve();
process.stdin.on("data", (d) => {
  pending += d;
  let nl;
  while ((nl = pending.indexOf("\n")) >= 0) {
    const [mode, port] = pending.slice(0, nl).trim().split(/\s+/);
    pending = pending.slice(nl + 1);
    chain = chain.then(() => run(mode, Number(port)));
  }
});
process.stdin.on("end", () => chain.then(() => process.exit(0)));
"""


class NodeFloor(CFloor):
    """The floor in Node.js (see :data:`NODE_FLOOR`): JSON parsed as a game's own web
    client would; None from :meth:`build` without ``node``."""

    name = "node"

    @classmethod
    def build(cls, procs: Procs, scratch: str) -> "NodeFloor | None":  # type: ignore[override]
        node = shutil.which("node")
        if node is None:
            return None
        script = Path(scratch) / "floor.js"
        script.write_text(NODE_FLOOR)
        floor = cls.__new__(cls)
        floor.proc = procs.add(subprocess.Popen([node, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        floor.last_us = 0.0
        return floor


# =========================================================================== the bridge

class InProcess:
    """``Bridge(config).run_tool("call_tool", ...)`` in this process."""

    def __init__(self, ports: Sequence[int], env: dict[str, str]) -> None:
        from game_bridge_mcp.config import Config
        from game_bridge_mcp.core.bridge import Bridge

        self.bridge = Bridge(Config(port=ports[0], scan=False, registry=False, environ=env))

    def call(self, port: int) -> dict[str, Any]:
        result = self.bridge.run_tool("call_tool", {"port": port, "name": TOOL, "arguments": {}})
        if result.get("confirmation") != "completedCommandId":
            raise RuntimeError(f"unexpected confirmation: {result}")
        return result

    def stats(self, port: int) -> dict[str, int]:
        return dict(self.bridge.client(port).stats)


class StdioServer:
    """The real server as a child process, spoken to in JSON-RPC lines (pipelined)."""

    def __init__(self, procs: Procs, port: int, python: str, *, cwd: str, env: dict[str, str],
                 argv: Sequence[str] | None = None) -> None:
        self.started = time.perf_counter()
        command = list(argv) if argv is not None else [
            python, "-m", "game_bridge_mcp", "--port", str(port), "--no-scan", "--no-registry"]
        self.proc = procs.add(subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any], *, notify: bool = False) -> int | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        ident = None
        if not notify:
            self.next_id += 1
            ident = message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        return ident

    def wait(self, idents: set[int]) -> dict[int, Any]:
        assert self.proc.stdout is not None
        replies: dict[int, Any] = {}
        while len(replies) < len(idents):
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed stdout")
            reply = json.loads(line)
            if reply.get("id") in idents:
                replies[reply["id"]] = reply
        return replies

    def request(self, method: str, params: dict[str, Any]) -> Any:
        ident = self.send(method, params)
        assert ident is not None
        return self.wait({ident})[ident]

    def initialize(self) -> float:
        """Send ``initialize``; the time from process start to its answer (ms)."""
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        elapsed = (time.perf_counter() - self.started) * 1000
        self.send("notifications/initialized", {}, notify=True)
        return elapsed

    @staticmethod
    def check(reply: Any) -> dict[str, Any]:
        result = reply.get("result") or {}
        text = (result.get("content") or [{}])[0].get("text", "")
        if result.get("isError") or "error" in reply:
            raise RuntimeError(f"tool call failed: {text or reply.get('error')}")
        return json.loads(text)

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.check(self.request("tools/call", {"name": name, "arguments": arguments}))

    def call(self, port: int) -> None:
        self.tool("call_tool", {"port": port, "name": TOOL, "arguments": {}})

    def timed_call(self, port: int) -> float:
        """One confirmed call, timed as the C floor times itself: from the request to the
        answer's line in hand (ms); the answer is decoded and checked after the clock
        stops, as the C floor leaves its JSON unparsed (every client's clock stops when
        the answer that completes the call has arrived)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        ident = self.next_id
        request = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "id": ident,
                              "params": {"name": "call_tool", "arguments": {"port": port, "name": TOOL,
                                                                           "arguments": {}}}}).encode() + b"\n"
        marker = b'"id":%d,' % ident
        started = time.perf_counter()
        self.proc.stdin.write(request)
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed stdout")
            lines.append(line)
            if marker in line[:40] or json.loads(line).get("id") == ident:  # both paths lead with the id
                break
        elapsed = (time.perf_counter() - started) * 1000
        replies = [json.loads(line) for line in lines]
        answer = next((r for r in replies if r.get("id") == ident), None)
        if answer is None:
            raise RuntimeError(f"no answer to request {ident} in {lines!r:.300}")
        self.check(answer)
        return elapsed

    def call_many(self, ports: Sequence[int]) -> None:
        idents = {self.send("tools/call", {"name": "call_tool", "arguments": {"port": p, "name": TOOL}})
                  for p in ports}
        for reply in self.wait({i for i in idents if i is not None}).values():
            self.check(reply)

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / (1024 * 1024)

    def peak_rss_mb(self) -> float:
        """The process's peak resident set so far (Linux ``VmHWM``), or -1 elsewhere."""
        return peak_rss_mb(self.proc.pid)


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return -1.0


def reset_peak_rss(pid: int) -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux 4.0+: write 5 to clear_refs)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


__all__ = ["CFloor", "FloorClient", "InProcess", "NodeFloor", "Procs", "PyFloor", "StdioServer", "TOOL",
           "peak_rss_mb", "reset_peak_rss"]
