"""A launched tree's keeper, where no cgroup can be had (Linux): the launched command's parent
and a child subreaper, so every process the game starts stays below it, whatever it does
to hide (``setsid``, a double fork, an empty environment: an orphan is re-parented to the
nearest living subreaper ancestor, which is this). It holds a pipe from the bridge on its
stdin; when that closes (the bridge exited or was killed, however), it ends everything below
it: SIGTERM, then SIGKILL until nothing is left. Otherwise it waits, collecting exited
children, and exits once the command has exited and nothing but spared processes is left
below it, with the command's own status (exit code, or the same signal), so the bridge sees
it as it would the command (docs/launching.md, "Reaping").

    python -I -S keeper.py [--status-fd N]   (stdin: the order, see :func:`encode_order`)

With ``--status-fd``, the command's own wait status is written there, one line, the moment
it exits, so the bridge knows it even while processes it left behind keep the keeper alive
(a start script that exits, its game still running).

What to run comes in on the pipe, not the command line, so that the keeper's own command
line never matches what the game's or a spared process's would (``pgrep -f``, ``spare``).
It runs the command with stdin from /dev/null and its own stdout and stderr; SIGTERM,
SIGINT and SIGHUP (a group signal meant for the game) are caught and ignored, and the
command starts with their default handling. Standard library only; never signals anything
but its own descendants, each through a pidfd once it is proved to be below it.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import sys
import time

#: prctl option (linux/prctl.h).
_PR_SET_CHILD_SUBREAPER = 36
#: After SIGTERM, how long the tree gets before SIGKILL.
TERM_S = 1.0
#: How often, while the command has exited but others below run, it looks again.
LOOK_S = 0.5
#: Rounds of SIGKILL before giving up on a process stuck in the kernel.
KILL_ROUNDS = 50


#: A group signal that came before the command was started (it was meant for the command).
_early: list[int] = []


def _ignore(signum: int, _frame: object) -> None:
    """Caught, so the command (whose handlers exec resets) starts with the default; one
    that comes before the command runs is passed on to it (or ends the keeper first)."""
    if signum != signal.SIGCHLD:
        _early.append(signum)


def _become_subreaper() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (from /proc)."""
    found: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            if fields[0] != b"Z":
                found[int(name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    return found


def _below(me: int, parents: dict[int, int], pid: int) -> bool:
    seen = 0
    while pid > 1 and seen < 4096:
        pid = parents.get(pid, 0)
        if pid == me:
            return True
        seen += 1
    return False


def descendants() -> list[int]:
    """Every live process below this one."""
    me = os.getpid()
    parents = _parents()
    return [pid for pid in parents if pid != me and _below(me, parents, pid)]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def spared(pid: int, spare: list[str]) -> bool:
    return bool(spare) and any(text in _cmdline(pid) for text in spare)


def _send(pid: int, sig: int) -> bool:
    """Signal ``pid`` only if it is (still) below this process: through a pidfd opened
    first, so a pid freed and reused after the check is never hit."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    try:
        if pid not in descendants_of_me_now(pid):
            return False
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def descendants_of_me_now(pid: int) -> set[int]:
    """``{pid}`` when ``pid`` is below this process now, else empty."""
    return {pid} if _below(os.getpid(), _parents(), pid) else set()


class Keeper:
    """One launched command and everything below it."""

    def __init__(self, command: list[str] | str, shell: bool, spare: list[str], report: int | None = None) -> None:
        self.spare = spare
        self.report = report  # where the command's own exit is said, the moment it is known
        self.control = 0  # stdin: the bridge's pipe
        self.leader: int | None = None
        self.status: int | None = None  # the command's wait status once it has exited
        self.children = 0
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        self.wake = wake_r
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, _ignore)
        argv: list[str] = ["/bin/sh", "-c", str(command)] if shell else [str(word) for word in command]
        # (Not subprocess: importing it costs more than the rest of the keeper.) The handled
        # signals go back to their default at exec by themselves; those Python ignores too.
        self.leader = os.posix_spawnp(
            argv[0], argv, os.environ,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)],
            setsigdef=[sig for sig in (signal.SIGPIPE, getattr(signal, "SIGXFSZ", None)) if sig is not None])

    def collect(self) -> bool:
        """Collect every exited child (the command's status kept); False when none is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.leader:
                self.status = status
                if self.report is not None:
                    try:
                        os.write(self.report, f"{status}\n".encode())
                    except OSError:
                        pass
                    os.close(self.report)
                    self.report = None

    def only_spared_left(self) -> bool:
        return all(spared(pid, self.spare) for pid in descendants())

    def run(self) -> int:
        """Keep the tree until the command and all but spared processes are gone, or the
        bridge's pipe closes; return the wait status to mirror."""
        while True:
            alive = self.collect()
            if self.status is not None and (not alive or (self.spare and self.only_spared_left())):
                return self.status
            timeout = LOOK_S if self.status is not None and alive else None
            try:
                ready, _, _ = select.select([self.control, self.wake], [], [], timeout)
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
            if self.wake in ready:
                try:
                    while os.read(self.wake, 512):
                        pass
                except OSError:
                    pass
            if self.control in ready:
                try:
                    data = os.read(self.control, 512)
                except OSError:
                    data = b""
                if not data:
                    self.end_all()
                    self.collect()
                    return self.status if self.status is not None else (signal.SIGKILL & 0x7F)

    def end_all(self) -> None:
        """SIGTERM everything below (spared processes excepted), then SIGKILL until none is left."""
        for pid in descendants():
            if not spared(pid, self.spare):
                _send(pid, signal.SIGTERM)
                _send(pid, signal.SIGCONT)
        deadline = time.monotonic() + TERM_S
        while time.monotonic() < deadline:
            self.collect()
            if not [pid for pid in descendants() if not spared(pid, self.spare)]:
                return
            time.sleep(0.02)
        for _ in range(KILL_ROUNDS):
            left = [pid for pid in descendants() if not spared(pid, self.spare)]
            if not left:
                return
            for pid in left:
                _send(pid, signal.SIGKILL)
            time.sleep(0.02)
            self.collect()


def mirror(status: int) -> None:
    """Exit as the command did: its exit code, or killed by the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def encode_order(command: list[str] | str, shell: bool, spare: list[str]) -> bytes:
    """What the bridge writes on the keeper's stdin: the byte length of what follows, a
    newline, then NUL-separated ``argv`` or ``shell``, the number of spare texts, the spare
    texts and the command's words (no NUL can be in any of them: exec would refuse it)."""
    words: list[str] = [command] if isinstance(command, str) else list(command)
    payload = "\0".join(["shell" if shell else "argv", str(len(spare)), *spare, *words]).encode()
    return str(len(payload)).encode() + b"\n" + payload


def read_order(fd: int) -> tuple[list[str] | str, bool, list[str]]:
    """``(command, shell, spare)`` from ``fd`` (exits 125 without a whole order: the
    bridge went before saying what to run, so nothing runs)."""
    data = b""
    want: int | None = None
    while want is None or len(data) < want:
        if want is None and b"\n" in data:
            head, data = data.split(b"\n", 1)
            want = int(head) if head.isdigit() else -1
            if want < 0:
                break
            continue
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if not chunk:
            os._exit(125)
        data += chunk
    fields = data[:max(want or 0, 0)].decode("utf-8", "surrogateescape").split("\0")
    try:
        kind, count = fields[0], int(fields[1])
        spare, words = fields[2:2 + count], fields[2 + count:]
        if kind in ("argv", "shell") and words and (kind == "argv" or len(words) == 1):
            return (words[0] if kind == "shell" else words), kind == "shell", spare
    except (IndexError, ValueError):
        pass
    sys.stderr.write("game-bridge keeper: the bridge's order could not be read\n")
    os._exit(125)


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore)
    report = None
    if len(sys.argv) == 3 and sys.argv[1] == "--status-fd" and sys.argv[2].isdigit():
        report = int(sys.argv[2])
        os.set_inheritable(report, False)  # the command is not to hold it open
    command, shell, spare = read_order(0)
    if _early:  # stopped before anything ran: run nothing, and end as the command would have
        mirror(_early[0] & 0x7F)
    if not _become_subreaper():
        sys.stderr.write("game-bridge keeper: could not become a child subreaper; running the command anyway\n")
    try:
        keeper = Keeper(command, shell, spare, report)
    except OSError as exc:
        sys.stderr.write(f"game-bridge keeper: the command could not be started: {exc}\n")
        os._exit(127)
    if _early and keeper.leader is not None:  # it came while the command was being started
        _send(keeper.leader, _early[0])
    _early.clear()
    signal.signal(signal.SIGTERM, _quiet)
    signal.signal(signal.SIGINT, _quiet)
    signal.signal(signal.SIGHUP, _quiet)
    mirror(keeper.run())


def _quiet(_signum: int, _frame: object) -> None:
    """Once the command runs, a group signal is the command's business."""


if __name__ == "__main__":
    main()
