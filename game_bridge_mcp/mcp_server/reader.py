"""The protocol's stdin read on threads that run the ``tools/call`` lines they read, passing every
other line on to the SDK in order (docs/design.md, "The stdio server")."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Protocol

log = logging.getLogger("game_bridge_mcp")

READ_SIZE = 65536
#: How often a held-back reader looks again whether it may read on.
HOLD_POLL_S = 0.01


class CallTaker(Protocol):
    def take(self, line: str, here: Callable[[], bool]) -> "bool | Callable[[], None]": ...


class ThreadedReader:
    """Reads ``fd`` on threads (see the module docstring); :attr:`sdk_fd` is what the
    SDK reads instead."""

    def __init__(self, fd: int, taker: CallTaker, *, max_calls: int) -> None:
        self._fd = fd
        self._taker = taker
        self._max_threads = max_calls + 1  # the calls, and one thread reading
        sdk_fd, self._relay = os.pipe()
        self.sdk_fd = sdk_fd
        self._turn = threading.Lock()  # held by the thread reading stdin now
        self._state = threading.Lock()
        self._threads = 0
        self._waiting = 0  # threads waiting for the reading turn
        self._buffer = bytearray()
        self._scanned = 0
        self._eof = False
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
            self._waiting += 1
        threading.Thread(target=self._serve, name="gb-stdin", daemon=True).start()
        return True

    def _serve(self) -> None:
        try:
            while True:
                with self._turn:
                    with self._state:
                        self._waiting -= 1
                    run = self._read_one()
                    if run is None:
                        return  # end of input: the pipe to the SDK is closed
                if callable(run):
                    run()
                with self._state:
                    self._waiting += 1
        except Exception:
            log.exception("reading the protocol's stdin failed")
            self._close_relay()
        finally:
            with self._state:
                self._threads -= 1

    def _hand_on(self) -> bool:
        """Make sure a thread takes the reading turn once this one runs a call."""
        with self._state:
            if self._waiting > 0:
                return True
        return self._spawn()

    # ------------------------------------------------------------------ lines
    def _read_one(self) -> "bool | Callable[[], None] | None":
        """The next line's fate: a call to run here, True (handled), or None at the end.
        A line the taker leaves (False) is relayed to the SDK here, in order."""
        while self.hold is not None and self.hold():
            time.sleep(HOLD_POLL_S)
        line = self._next_line()
        if line is None:
            self._close_relay()
            return None
        run = self._taker.take(line.decode("utf-8", "replace"), self._hand_on)
        if run is False:
            self._relay_line(line)
        return run

    def _next_line(self) -> bytes | None:
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline >= 0:
                line = bytes(self._buffer[:newline + 1])
                del self._buffer[:newline + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            if self._eof:
                if not self._buffer:
                    return None
                line = bytes(self._buffer)
                self._buffer.clear()
                self._scanned = 0
                return line
            chunk = os.read(self._fd, READ_SIZE)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

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
