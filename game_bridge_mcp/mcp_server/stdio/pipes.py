"""The MCP protocol's stdin and stdout, read and written on the event loop as the descriptors are
ready, with no thread per line (docs/design.md, "The stdio server")."""

from __future__ import annotations

import os
import select
import stat
import threading
import time
from typing import Any, Callable

import anyio

#: The largest write a pipe takes whole once it is writable.
CHUNK = getattr(select, "PIPE_BUF", 512)
READ_SIZE = 65536
#: How often the loop looks again while a worker thread is writing a line.
LOCK_WAIT_S = 0.0002


def _pollable(fd: int) -> bool:
    """Pipes, sockets and terminals can be waited on; regular files cannot (epoll)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _ready(fd: int, event: int) -> bool:
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(0))


#: How often a held-back reader looks again whether it may go on.
HOLD_POLL_S = 0.01


class LineReader:
    """``async for line in LineReader(fd)``: UTF-8 lines (invalid bytes replaced), the
    last one possibly without its newline; ends at EOF. ``intercept``, when set, sees
    every line first, on the event loop; a line it returns True for is not yielded
    (``fastpath.py`` answers it). ``hold``, when set, is asked before each line: while it
    returns True no line is taken (nor anything more read), so a client that sends
    faster than its requests are answered, or stops reading the answers, meets
    back-pressure on its own pipe instead of filling the server's memory."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._scanned = 0
        self._eof = False
        self.intercept: Callable[[str], bool] | None = None
        self.hold: Callable[[], bool] | None = None

    def fileno(self) -> int:
        return self._fd

    def __aiter__(self) -> "LineReader":
        return self

    @property
    def at_eof(self) -> bool:
        return self._eof

    async def __anext__(self) -> str:
        while True:
            while self.hold is not None and self.hold():
                await anyio.sleep(HOLD_POLL_S)
            line = await self._next_line()
            if self.intercept is None or not self.intercept(line):
                return line

    async def _next_line(self) -> str:
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline >= 0:
                line = bytes(self._buffer[:newline + 1])
                del self._buffer[:newline + 1]
                self._scanned = 0
                return line.decode("utf-8", "replace")
            self._scanned = len(self._buffer)
            if self._eof:
                if not self._buffer:
                    raise StopAsyncIteration
                line = bytes(self._buffer)
                self._buffer.clear()
                self._scanned = 0
                return line.decode("utf-8", "replace")
            if not _ready(self._fd, select.POLLIN):
                await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, READ_SIZE)  # readable: returns what is there, or b"" at EOF
            except BlockingIOError:
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


#: Pieces of a line up to this size are joined and written at once (a copy is cheaper
#: than a second system call); larger ones go out together with ``writev``.
JOIN_BYTES = 256 * 1024
_WRITEV = hasattr(os, "writev")
_IOV_MAX = 512


#: The most one system call writes of a worker's line, so a slow reader's progress is seen.
WRITE_MAX = 1 << 20


def _batch(views: list[memoryview]) -> list[memoryview]:
    """The first views, at most ``_IOV_MAX`` of them and ``WRITE_MAX`` bytes in all."""
    batch: list[memoryview] = []
    room = WRITE_MAX
    for view in views[:_IOV_MAX]:
        if len(view) >= room:
            batch.append(view[:room])
            break
        batch.append(view)
        room -= len(view)
    return batch


def hung_up(fd: int) -> bool:
    """Whether the other end of ``fd`` has closed (a pipe's writer, or a socket shut for
    writing), even while unread data is still in it."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | _POLLRDHUP)
    return any(events & (select.POLLHUP | select.POLLERR | select.POLLNVAL | _POLLRDHUP)
               for _fd, events in poller.poll(0))


_POLLRDHUP = getattr(select, "POLLRDHUP", 0x2000)


class Writer:
    """``await write(text)`` writes it all; ``flush`` has nothing to do.

    Worker threads write whole lines too (:meth:`write_line`, the fast path's answers):
    every message is written under :attr:`lock`, so lines never interleave. The loop
    never blocks on the lock (it waits its turn asynchronously); a worker holds it only
    while its own line goes out. ``observe``, when set, sees every message the SDK
    writes (the fast path learns the session's protocol version from it)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.lock = threading.Lock()
        self.observe: Callable[[str], None] | None = None
        self._counts = threading.Lock()
        self._pending = 0  # messages being written or waiting their turn
        self._progress = time.monotonic()  # when a byte last went out (or writing began)

    def _begin(self) -> None:
        with self._counts:
            if self._pending == 0:
                self._progress = time.monotonic()
            self._pending += 1

    def _moved(self) -> None:
        self._progress = time.monotonic()

    def _end(self) -> None:
        with self._counts:
            self._pending -= 1

    def stalled_for(self) -> float:
        """How long messages have been waiting to go out without a byte moving (0 when
        nothing waits): a client that stopped reading its answers."""
        if not self._pending:  # asked before every line read: the usual answer needs no lock
            return 0.0
        with self._counts:
            return time.monotonic() - self._progress if self._pending else 0.0

    async def write(self, text: str) -> None:
        if self.observe is not None:
            self.observe(text)
        data = memoryview(text.encode("utf-8"))
        self._begin()
        try:
            while not self.lock.acquire(blocking=False):
                await anyio.sleep(LOCK_WAIT_S)  # a worker's line is going out
            try:
                while data:
                    if not _ready(self._fd, select.POLLOUT):
                        await anyio.wait_writable(self._fd)
                    try:
                        written = os.write(self._fd, data[:CHUNK])
                    except BlockingIOError:
                        continue
                    data = data[written:]
                    self._moved()
            finally:
                self.lock.release()
        finally:
            self._end()

    def write_line(self, data: bytes | list[bytes]) -> None:
        """Write one whole line (given whole or in pieces) from a worker thread, blocking
        until it is out. Pieces go out in one system call (``writev``; joined first when
        small): a client woken by the first of several writes would find half a line and
        sleep again, a wake-up and a read more per answer."""
        pieces = [data] if isinstance(data, bytes) else data
        if len(pieces) > 1 and sum(map(len, pieces)) <= JOIN_BYTES:
            pieces[:] = [b"".join(pieces)]
        views = [memoryview(piece) for piece in pieces]
        pieces.clear()  # from here each piece lives only until it is written
        self._begin()
        try:
            with self.lock:
                while views:
                    try:
                        written = os.writev(self._fd, _batch(views)) if _WRITEV else os.write(self._fd, views[0][:WRITE_MAX])
                    except BlockingIOError:  # a descriptor someone made non-blocking
                        select.select([], [self._fd], [], 1.0)
                        continue
                    self._moved()
                    while written and views:
                        if written >= len(views[0]):
                            written -= len(views.pop(0))
                        else:
                            views[0], written = views[0][written:], 0
        finally:
            self._end()

    async def flush(self) -> None:
        return None


def loop_streams(in_fd: int, out_fd: int) -> tuple[Any, Any] | None:
    """The pair for ``stdio_server(stdin=..., stdout=...)``, or None when the descriptors
    or the installed anyio do not allow waiting on them from the event loop."""
    if not (hasattr(anyio, "wait_readable") and hasattr(anyio, "wait_writable")):
        return None
    if not (_pollable(in_fd) and _pollable(out_fd)):
        return None
    return LineReader(in_fd), Writer(out_fd)
