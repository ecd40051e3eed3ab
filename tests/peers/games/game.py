"""A tiny game for launcher tests: standard library only, speaks the contract on loopback.

Each behaviour a launcher must survive is a flag: a boot delay, a crash on boot, a
grandchild (optionally one that calls setsid), ignoring SIGTERM, ignoring ``close``.
Every process it starts appends ``<pid> <starttime>`` to the file named by
``GB_TEST_PIDS`` (when set), so a test can check that nothing outlived it.

    game.py --port N [--boot-delay S] [--crash CODE] [--child plain|setsid|escape|escape-brief]
            [--ignore-term] [--ignore-close] [--lines N] [--no-tools] [--helpers N]
            [--name N] [--version V] [--say TEXT]
            [--daemon-at-boot] [--daemon-on-term] [--daemon-every S]
    game.py --role child [--setsid] [--ignore-term] [--escape [--brief]]
    game.py --role daemon --pids FILE

``--daemon-*`` start daemons that leave everything the bridge could know them by: a new
session, a double fork, and an empty environment (no launch marker, not even
``GB_TEST_PIDS``: the pid file is passed on the command line). ``/command?cmd=daemon``
starts one and answers once it has recorded its pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def record_pid(path: str | None = None) -> None:
    path = path or os.environ.get("GB_TEST_PIDS")
    if not path:
        return
    try:
        with open(f"/proc/{os.getpid()}/stat") as handle:
            start = handle.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        start = "0"
    with open(path, "a") as handle:
        handle.write(f"{os.getpid()} {start}\n")


def say(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def escape(args: argparse.Namespace) -> None:
    """Double-fork away like a daemon: the middle process exits at once (so this one is
    orphaned), then a new session and an environment without the launch marker, so
    neither the process group, nor descent, nor the marker can find it any more."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    env = {k: v for k, v in os.environ.items() if k != "GAME_BRIDGE_LAUNCH_ID"}
    argv = [sys.executable, os.path.abspath(__file__), "--role", "child", "--escaped"]
    if args.brief:
        argv.append("--brief")
    os.execve(sys.executable, argv, env)


def spawn_daemon() -> int:
    """Start a daemon (see the module docstring) and return its pid once it has recorded it."""
    path = os.environ.get("GB_TEST_PIDS", os.devnull)
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:  # the middle process: a new session, one more fork, then gone
        try:
            os.close(ready_r)
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.dup2(ready_w, 3)
                os.set_inheritable(3, True)
                os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), "--role", "daemon",
                                           "--pids", path, "--ready-fd", "3"], {})
        finally:
            os._exit(0)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        line = ready.readline()
    try:
        os.wait()  # the middle process
    except ChildProcessError:
        pass
    return int(line or b"0")


def run_daemon(args: argparse.Namespace) -> None:
    for sig in (signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    record_pid(args.pids)
    if args.ready_fd is not None:
        os.write(args.ready_fd, f"{os.getpid()}\n".encode())
        os.close(args.ready_fd)
    while True:
        time.sleep(3600)


def run_child(args: argparse.Namespace) -> None:
    if args.escape and not args.escaped:
        escape(args)
    if args.brief:  # an escaped helper that ends on its own (its zombie is someone's to reap)
        record_pid()
        time.sleep(0.3)
        return
    if args.setsid:
        os.setsid()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    record_pid()
    say(f"grandchild {os.getpid()} running (setsid={args.setsid})")
    while True:
        time.sleep(3600)


class Game:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.frame = 0
        self.next_id = 0
        self.closing = threading.Event()

    def tick(self) -> None:
        while True:
            self.frame += 1
            time.sleep(0.01)


def make_handler(game: Game) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *_args: object) -> None:
            pass

        def send_json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            head = (f"HTTP/1.0 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
            self.wfile.write(head + data)  # one send: no Nagle stalls

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/health":
                self.send_json(200, {"ok": True, "frame": game.frame})
            elif url.path == "/state":
                self.send_json(200, {"frame": game.frame, "completedCommandId": game.next_id})
            elif url.path == "/tools" and not game.args.no_tools:
                self.send_json(200, {"game": {"name": game.args.name, "version": game.args.version, "protocol": 1},
                                     "toolsets": []})
            elif url.path == "/command":
                query = parse_qs(url.query)
                cmd = query.get("cmd", [""])[0]
                game.next_id += 1
                if cmd == "daemon":
                    say(f"daemon {spawn_daemon()}")
                self.send_json(200, {"accepted": True, "commandId": game.next_id, "frame": game.frame})
                say(f"command {cmd}")
                if cmd == "close" and not game.args.ignore_close:
                    game.closing.set()
            else:
                self.send_json(404, {"error": "not found"})

    return Handler


def spawn_helpers(count: int) -> None:
    """Start ``count`` short-lived helper processes one after another (each exits on its
    own within 50 ms), as a game shelling out to tools does."""
    for _ in range(count):
        subprocess.run(["sleep", "0.05"], check=False)


def run_game(args: argparse.Namespace) -> None:
    record_pid()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    say(f"game {os.getpid()} starting on port {args.port}")
    for index in range(args.lines):
        say(f"line {index}")
    if args.say:
        say(args.say)
        say(args.say, err=True)
    if args.child:
        extra = {"setsid": ["--setsid"], "escape": ["--escape"], "escape-brief": ["--escape", "--brief"]}.get(args.child, [])
        if args.ignore_term:
            extra.append("--ignore-term")
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "--role", "child", *extra])
    if args.daemon_on_term:
        def on_term(_signum: int, _frame: object) -> None:
            spawn_daemon()
            os._exit(0)

        signal.signal(signal.SIGTERM, on_term)
    if args.daemon_at_boot:
        say(f"daemon {spawn_daemon()}")
    if args.daemon_every:
        def spawner() -> None:
            while True:
                spawn_daemon()
                time.sleep(args.daemon_every)

        threading.Thread(target=spawner, daemon=True).start()
    if args.helpers:
        threading.Thread(target=spawn_helpers, args=(args.helpers,), daemon=True).start()
    if args.crash is not None:
        say("loading assets", err=True)
        say("Error: the test game crashed on purpose", err=True)
        sys.exit(args.crash)
    deadline = time.monotonic() + args.boot_delay
    step = 0
    while time.monotonic() < deadline:
        step += 1
        say(f"booting step {step}")
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    game = Game(args)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(game))
    server.daemon_threads = True
    threading.Thread(target=game.tick, daemon=True).start()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    say(f"listening on 127.0.0.1:{args.port}")
    game.closing.wait()
    time.sleep(0.02)  # let the close answer leave
    server.server_close()
    say("closed cleanly")
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", default="game", choices=["game", "child", "daemon"])
    parser.add_argument("--pids", default=None)
    parser.add_argument("--ready-fd", type=int, default=None)
    parser.add_argument("--daemon-at-boot", action="store_true")
    parser.add_argument("--daemon-on-term", action="store_true")
    parser.add_argument("--daemon-every", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--boot-delay", type=float, default=0.0)
    parser.add_argument("--crash", type=int, default=None)
    parser.add_argument("--child", choices=["plain", "setsid", "escape", "escape-brief"], default=None)
    parser.add_argument("--setsid", action="store_true")
    parser.add_argument("--escape", action="store_true")
    parser.add_argument("--escaped", action="store_true")
    parser.add_argument("--brief", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--ignore-close", action="store_true")
    parser.add_argument("--lines", type=int, default=0)
    parser.add_argument("--helpers", type=int, default=0)
    parser.add_argument("--no-tools", action="store_true")
    parser.add_argument("--name", default="Test Game")
    parser.add_argument("--say", default=None, help="a line to print on stdout and stderr at start")
    parser.add_argument("--version", default="0.0.1")
    args = parser.parse_args()
    if args.role == "child":
        run_child(args)
    elif args.role == "daemon":
        run_daemon(args)
    else:
        run_game(args)


if __name__ == "__main__":
    main()
