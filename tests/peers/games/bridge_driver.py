"""A minimal bridge process for tests and the benchmark: a Launcher, its shutdown on
stdin EOF / SIGINT / SIGTERM / SIGHUP, and nothing else.

    bridge_driver.py --config gamebridge.json --registry-dir DIR [--count N] [--port N]
                     [--go-file PATH] [--watcher-log PATH] [--no-subreaper]
                     [--containment auto|cgroup|keeper|none]

Prints one JSON line per launch (the launch result, or {"error": ...}) and then
{"launched": [...], "watcherPid": N}; then waits for stdin EOF or a signal, shuts down
and exits. With ``--go-file`` it prints {"waiting": true} and waits until that file
exists before launching, so several drivers can launch at the same moment.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from game_bridge_mcp.config import Config  # noqa: E402
from game_bridge_mcp.errors import BridgeError  # noqa: E402
from game_bridge_mcp.launch.launcher import Launcher  # noqa: E402
from game_bridge_mcp.launch.parent import prepare_parent  # noqa: E402
from game_bridge_mcp.launch.declaration import load_declaration  # noqa: E402


def emit(doc: object) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--registry-dir", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--go-file", default=None)
    parser.add_argument("--watcher-log", default=None)
    parser.add_argument("--no-subreaper", action="store_true")
    parser.add_argument("--containment", default="auto")
    args = parser.parse_args()
    if not args.no_subreaper:
        prepare_parent()  # what every entry point does: default SIGCHLD, child subreaper

    config = Config(environ=dict(os.environ), registry_dir=Path(args.registry_dir),
                    declaration=load_declaration(Path(args.config)))
    launcher = Launcher(config, watcher_log=Path(args.watcher_log) if args.watcher_log else None,
                        containment=args.containment)

    def on_signal(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    code = 0
    try:
        if args.go_file:
            emit({"waiting": True})
            while not os.path.exists(args.go_file):
                time.sleep(0.002)
        results = []
        for _ in range(args.count):
            try:
                result = launcher.launch(port=args.port)
            except BridgeError as exc:
                result = {"error": exc.render()}
            results.append(result)
            emit(result)
        emit({"launched": launcher.launched_ports(), "watcherPid": launcher.watcher_pid})
        while sys.stdin.buffer.read1(4096):
            pass
    except SystemExit as stop:
        code = int(stop.code or 0)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        launcher.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
