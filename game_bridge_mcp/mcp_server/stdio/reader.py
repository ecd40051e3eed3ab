"""The protocol's stdin read on threads that run the ``tools/call`` lines they read, passing every
other line on to the SDK in order (docs/design.md, "The stdio server")."""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from typing import Callable, Protocol

log = logging.getLogger("game_bridge_mcp")

READ_SIZE = 65536
#: How often a held-back reader looks again whether it may read on.
HOLD_POLL_S = 0.01

_ONESHOT = getattr(select, "EPOLLIN", 0) | getattr(select, "EPOLLONESHOT", 0)


class CallTaker(Protocol):
    def take(self, line: str, here: Callable[[], bool]) -> "bool | Callable[[], None]": ...


class _Parking:
    """Where idle reader threads wait for stdin to have something to read: one epoll set for
    all of them, stdin armed once (``EPOLLONESHOT``), so one arrival wakes exactly one thread
    and the others sleep on in the kernel. A thread that starts a call therefore hands
    nothing over: the next line wakes a thread that was already waiting, and no thread is
    woken to wait in its place. :meth:`nudge` wakes one thread for lines already read."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._poller = select.epoll()
        self._nudge_r, self._nudge_w = os.pipe()
        os.set_blocking(self._nudge_w, False)  # a full pipe already wakes every thread it can
        try:
            self._poller.register(fd, _ONESHOT)  # EPERM for a regular file: see ThreadedReader
            self._poller.register(self._nudge_r, _ONESHOT)
        except OSError:
            self.close()
            raise

    def wait(self) -> bool:
        """Sleep until stdin or a nudge wakes this thread; True when stdin is readable
        (it is then disarmed until :meth:`rearm`: only this thread may read it once)."""
        readable = False
        for fd, _events in self._poller.poll():
            if fd == self._fd:
                readable = True
            else:
                os.read(self._nudge_r, 1)
                self._poller.modify(self._nudge_r, _ONESHOT)
        return readable

    def rearm(self) -> None:
        self._poller.modify(self._fd, _ONESHOT)

    def nudge(self) -> None:
        try:
            os.write(self._nudge_w, b"n")
        except BlockingIOError:
            pass

    def close(self) -> None:
        self._poller.close()
        for fd in (self._nudge_r, self._nudge_w):
            try:
                os.close(fd)
            except OSError:
                pass


class ThreadedReader:
    """Reads ``fd`` on threads (see the module docstring); :attr:`sdk_fd` is what the
    SDK reads instead.

    One thread at a time holds the input (``_input``): it reads stdin once it is readable
    and goes through the lines read, relaying to the SDK what the taker leaves. A call the
    taker runs here is run by that thread once it has let go of the input; another thread
    then takes the input, woken by the next arrival on stdin (or nudged, when lines are
    already read). Where stdin cannot be waited for (a regular file), the threads queue on
    the input's lock instead and the one holding it blocks in ``read``."""

    def __init__(self, fd: int, taker: CallTaker, *, max_calls: int) -> None:
        self._fd = fd
        self._taker = taker
        self._max_threads = max_calls + 1  # the calls, and one thread reading
        sdk_fd, self._relay = os.pipe()
        self.sdk_fd = sdk_fd
        self._input = threading.Lock()  # held by the thread going through stdin's lines now
        self._state = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads waiting to take the input
        self._buffer = bytearray()
        self._scanned = 0
        self._eof = False
        self._parking: _Parking | None = None
        if hasattr(select, "epoll"):
            try:
                self._parking = _Parking(fd)
            except OSError:
                self._parking = None  # a regular file is always readable: reads never wait
        self.hold: Callable[[], bool] | None = None

    @property
    def fd(self) -> int:
        return self._fd

    def start(self) -> None:
        self._spawn()

    # ------------------------------------------------------------------ threads
    def _spawn(self) -> bool:
        with self._state:
            if self._threads >= self._max_threads:
                return False
            self._threads += 1
            self._idle += 1
        threading.Thread(target=self._serve, name="gb-stdin", daemon=True).start()
        return True

    def _serve(self) -> None:
        try:
            while True:
                readable = self._park()
                with self._input:
                    with self._state:
                        self._idle -= 1
                    run = self._go_through(readable)
                if run is None:
                    return  # end of input: the pipe to the SDK is closed
                if callable(run):
                    run()
                with self._state:
                    self._idle += 1
        except Exception:
            log.exception("reading the protocol's stdin failed")
            self._eof = True
            self._close_relay()
        finally:
            self._leave()

    def _park(self) -> bool:
        """Wait until there may be input to go through; True when stdin is readable."""
        parking = self._parking
        if parking is None or self._eof:
            return False
        return parking.wait()

    def _leave(self) -> None:
        with self._state:  # held while nudging: the last thread out closes the parking
            self._threads -= 1
            parking = self._parking
            if parking is not None and self._eof:
                if self._threads == 0:
                    parking.close()
                else:
                    parking.nudge()  # the next idle thread sees the end too, and leaves

    def _hand_on(self) -> bool:
        """Make sure a thread takes the input once this one runs a call."""
        with self._state:
            handed = self._idle > 0
        if not handed:
            handed = self._spawn()
        if handed and self._parking is not None and (self._buffer or self._eof):
            self._parking.nudge()  # lines already read: an idle thread must not wait for stdin
        return handed

    # ------------------------------------------------------------------ lines
    def _go_through(self, readable: bool) -> "bool | Callable[[], None] | None":
        """Go through the input: a call to run on this thread, True when nothing more can
        be done until stdin has more, or None at the end. A line the taker leaves (False)
        is relayed to the SDK here, in order."""
        while True:
            while self.hold is not None and self.hold():
                time.sleep(HOLD_POLL_S)
            if readable:  # once: stdin is armed again after it
                self._read()
                readable = False
            line = self._next_line()
            if line is None:
                if self._eof:
                    self._close_relay()
                    return None
                if self._parking is not None:
                    return True  # wait for stdin without holding the input
                self._read()  # a regular file: read on
                continue
            run = self._taker.take(line.decode("utf-8", "replace"), self._hand_on)
            if run is False:
                self._relay_line(line)
            elif callable(run):
                return run

    def _read(self) -> None:
        """One read (stdin is readable, or a regular file), then stdin armed again."""
        chunk = os.read(self._fd, READ_SIZE)
        if chunk:
            self._buffer += chunk
            if self._parking is not None:
                self._parking.rearm()
        else:
            self._eof = True

    def _next_line(self) -> bytes | None:
        """The next whole line read, the last part at the end of input, or None."""
        newline = self._buffer.find(b"\n", self._scanned)
        if newline >= 0:
            line = bytes(self._buffer[:newline + 1])
            del self._buffer[:newline + 1]
            self._scanned = 0
            return line
        self._scanned = len(self._buffer)
        if self._eof and self._buffer:
            line = bytes(self._buffer)
            self._buffer.clear()
            self._scanned = 0
            return line
        return None

    def _relay_line(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            try:
                written = os.write(self._relay, view)
            except OSError:
                return  # the SDK has stopped reading: the server is ending
            view = view[written:]

    def _close_relay(self) -> None:
        with self._state:
            relay, self._relay = self._relay, -1
        if relay >= 0:
            os.close(relay)
