"""Which Chromium to run, and running it inside this process's own group, through a
stand-in executable the browsing library starts in its place (docs/design.md, "The
browser wrapper")."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

#: Where ``--browser`` can also come from.
BROWSER_ENV = "GAME_BRIDGE_BROWSER"
#: Names looked up on PATH, in order.
PATH_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: The install hint, for the one line said when no browser is found.
NO_BROWSER = ("no Chromium found: pass --browser PATH or set GAME_BRIDGE_BROWSER, install the system's "
              "(apt-get install chromium), or the library's own (python -m playwright install chromium)")

SHIM = """#!{python} -IS
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({socket_path!r})
socket.send_fds(s, [json.dumps(sys.argv[1:]).encode()], [1, 2, 3, 4])
for fd in (1, 2, 3, 4):
    os.close(fd)
code = b""
while True:
    chunk = s.recv(16)
    if not chunk:
        break
    code += chunk
os._exit(int(code) if code.strip().isdigit() else 1)
"""


def find_browser(option: str | None, environ: dict[str, str], bundled: Callable[[], str | None]) -> str:
    """The browser executable: ``--browser``, ``GAME_BRIDGE_BROWSER``, the first of
    :data:`PATH_NAMES` on PATH, or the library's own (``bundled()``); ValueError with
    :data:`NO_BROWSER` (or what is wrong with the one named) otherwise."""
    named = option or environ.get(BROWSER_ENV, "").strip() or None
    if named is not None:
        source = "--browser" if option else BROWSER_ENV
        path = shutil.which(named) or named
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ValueError(f"{source} names {named!r}, which is not an executable file")
        return os.path.abspath(path)
    for name in PATH_NAMES:
        found = shutil.which(name)
        if found:
            return found
    try:
        own = bundled()
    except Exception:  # noqa: BLE001 - the library could not say: treat as absent
        own = None
    if own and os.path.isfile(own) and os.access(own, os.X_OK):
        return own
    raise ValueError(NO_BROWSER)


class GroupedBrowser:
    """The stand-in executable and the real browser it stands for (one at a time)."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self.directory = Path(tempfile.mkdtemp(prefix="game-bridge-browser-"))
        self._socket_path = str(self.directory / "s")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self._socket_path)
        os.chmod(self._socket_path, 0o600)
        self._server.listen(4)
        self.shim = self.directory / "chromium"
        self.shim.write_text(SHIM.format(python=sys.executable, socket_path=self._socket_path), encoding="utf-8")
        os.chmod(self.shim, 0o700)
        #: The real browser's pid once started (our child, in our process group).
        self.pid: int | None = None
        self.exit_code: int | None = None
        self._exited = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="game-bridge-browser-spawn", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self._server.accept()
        except OSError:
            return  # closed before the library started the stand-in
        with conn:
            try:
                message, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 4)
                argv = json.loads(message.decode("utf-8"))
                if len(fds) != 4 or not isinstance(argv, list):
                    raise ValueError(f"the stand-in sent {len(fds)} descriptors and {type(argv).__name__}")
                self.pid = self._spawn([str(a) for a in argv], fds)
            except (OSError, ValueError) as exc:
                log.error("game-bridge browser: could not start %s: %s", self.executable, exc)
                conn.sendall(b"1")
                return
            finally:
                for fd in locals().get("fds", []):
                    os.close(fd)
            threading.Thread(target=self._kill_when_stand_in_goes, args=(conn,), daemon=True,
                             name="game-bridge-browser-stand-in").start()
            _pid, status = os.waitpid(self.pid, 0)
            self.exit_code = os.waitstatus_to_exitcode(status)
            self._exited.set()
            try:
                conn.sendall(str(max(0, self.exit_code) & 255).encode())
                conn.shutdown(socket.SHUT_RDWR)  # wakes the other thread's recv; the stand-in reads EOF
            except OSError:
                pass

    def _spawn(self, argv: list[str], fds: list[int]) -> int:
        out, err, pipe_in, pipe_out = fds
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2),
                   (os.POSIX_SPAWN_DUP2, pipe_in, 3), (os.POSIX_SPAWN_DUP2, pipe_out, 4)]
        return os.posix_spawn(self.executable, [self.executable, *argv], dict(os.environ), file_actions=actions)

    def _kill_when_stand_in_goes(self, conn: socket.socket) -> None:
        try:
            while conn.recv(16):
                pass
        except OSError:
            pass
        if not self._exited.is_set():
            self.kill()  # the library killed the stand-in: the browser goes with it

    @property
    def running(self) -> bool:
        return self.pid is not None and not self._exited.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Whether the browser has exited within ``timeout_s`` (True if never started)."""
        return self.pid is None or self._exited.wait(timeout_s)

    def tree(self) -> list[Any]:
        """The browser and every process below it, as psutil processes (which check,
        before each signal, that the pid still names the process found), browser first."""
        if self.pid is None or self._exited.is_set():
            return []
        try:
            import psutil

            parent = psutil.Process(self.pid)
            return [parent, *parent.children(recursive=True)]
        except ImportError:
            return []
        except Exception:  # noqa: BLE001 - the browser went meanwhile
            return []

    def kill(self, grace_s: float = 2.0) -> None:
        """End the browser and what it started: SIGTERM, then SIGKILL after ``grace_s``."""
        procs = self.tree()
        if not procs and self.running and self.pid is not None:
            try:  # without psutil: the browser alone (our child, not yet reaped)
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait(5.0)
            return
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            for proc in procs:
                try:
                    proc.send_signal(sig)
                except Exception:  # noqa: BLE001 - gone, or its pid now names another process
                    pass
            self.wait(wait_s)
            procs = [proc for proc in procs if _running(proc)]
            if not procs:
                return

    def close(self, grace_s: float = 2.0) -> None:
        """Kill what is left and remove the stand-in's directory."""
        self.kill(grace_s)
        try:
            self._server.close()
        except OSError:
            pass
        shutil.rmtree(self.directory, ignore_errors=True)


def _running(proc: Any) -> bool:
    try:
        return bool(proc.is_running()) and proc.status() != "zombie"
    except Exception:  # noqa: BLE001 - gone
        return False
