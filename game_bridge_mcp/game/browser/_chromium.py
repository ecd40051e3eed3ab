"""Which Chromium to run, and running it inside this process's own group, through a
stand-in executable the browsing library starts in its place (docs/design.md, "The
browser wrapper"); the one folder everything of a run is kept in (the stand-in, the
library's profile and artifacts, the browser's config and crash dumps), removed at the end
and, when a wrapper was ended hard, at the next start."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import sys
import stat
import tempfile
import threading
import time
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


#: A run's folder in the temporary folder, and the file in it naming its owner.
SCRATCH_PREFIX = "game-bridge-browser-"
OWNER = "owner"
#: A run's folder without an owner file (being made, or an older wrapper's) is left alone this long.
UNOWNED_GRACE_S = 600.0


def _owner_alive(folder: Path) -> bool:
    """Whether the process that made ``folder`` still runs (its pid and start time)."""
    try:
        pid_text, _sep, started = (folder / OWNER).read_text(encoding="ascii").partition(" ")
        pid, created = int(pid_text), float(started)
    except (OSError, ValueError):
        try:
            return time.time() - folder.lstat().st_mtime < UNOWNED_GRACE_S
        except OSError:
            return False
    try:
        import psutil

        return abs(psutil.Process(pid).create_time() - created) < 1.0
    except ImportError:  # without psutil: alive if the pid is
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    except Exception:  # noqa: BLE001 - no such process
        return False


def prune_scratch(base: Path) -> list[Path]:
    """Remove the folders of runs whose wrapper has gone (ended hard: SIGKILL, a crash),
    this user's only, never through a link; returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(SCRATCH_PREFIX):
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or _owner_alive(entry):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


class Scratch:
    """This run's folder: the stand-in (``s``, the socket), ``tmp`` (the library's
    TMPDIR: its profile and artifacts), ``home`` (the browser's config, cache and crash
    dumps), and ``owner`` (this process: a later run prunes the folder once it has gone)."""

    def __init__(self) -> None:
        base = Path(tempfile.gettempdir())
        self.pruned = prune_scratch(base)
        self.path = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=base))
        try:
            import psutil

            created = psutil.Process().create_time()
        except ImportError:
            created = 0.0
        (self.path / OWNER).write_text(f"{os.getpid()} {created}", encoding="ascii")
        self.tmp = self.path / "tmp"
        self.home = self.path / "home"
        for folder in (self.tmp, self.home):
            folder.mkdir(mode=0o700)

    def environ(self) -> dict[str, str]:
        """The browser's own folders, in this run's folder: nothing left in the user's home."""
        return {"TMPDIR": str(self.tmp), "XDG_CONFIG_HOME": str(self.home / "config"),
                "XDG_CACHE_HOME": str(self.home / "cache")}

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


#: How often the browser's memory is looked at (seconds of real time).
MEMORY_LOOK_S = 1.0


class MemoryCap:
    """The most the browser may hold: looked at every :data:`MEMORY_LOOK_S` of real time
    from the driving thread (``memory()``: bytes, resident, of the browser's processes)."""

    def __init__(self, memory: Callable[[], int], cap_bytes: int) -> None:
        self.memory = memory
        self.cap_bytes = cap_bytes
        self._last = 0.0
        self.peak = 0

    def over(self) -> int | None:
        """The bytes held, when over the cap (None: under it, or not looked at now)."""
        now = time.monotonic()
        if now - self._last < MEMORY_LOOK_S:
            return None
        self._last = now
        held = self.memory()
        self.peak = max(self.peak, held)
        return held if held > self.cap_bytes else None


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

    def __init__(self, executable: str, scratch: Scratch) -> None:
        self.executable = executable
        self.scratch = scratch
        self.directory = scratch.path
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
        crash = f"--crash-dumps-dir={self.scratch.home / 'crashes'}"
        return os.posix_spawn(self.executable, [self.executable, *argv, crash],
                              {**os.environ, **self.scratch.environ()}, file_actions=actions)

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

    def memory(self) -> int:
        """Bytes the browser's processes hold of their own (resident and not shared: what
        ending them frees, near enough, read cheaply), or 0 when it cannot be told."""
        total = 0
        for proc in self.tree():
            try:
                info = proc.memory_info()
                total += max(0, int(info.rss) - int(getattr(info, "shared", 0)))
            except Exception:  # noqa: BLE001 - gone meanwhile
                continue
        return total

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
        """Kill what is left and remove the run's folder."""
        self.kill(grace_s)
        try:
            self._server.close()
        except OSError:
            pass
        self.scratch.remove()


def _running(proc: Any) -> bool:
    try:
        return bool(proc.is_running()) and proc.status() != "zombie"
    except Exception:  # noqa: BLE001 - gone
        return False
