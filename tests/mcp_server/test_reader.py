"""ThreadedReader (mcp_server/reader.py): the thread that reads a call runs it while another
thread reads on; the lines it does not take reach the SDK's pipe in order; stdin's end
closes that pipe; with every thread busy a call goes to the SDK."""

from __future__ import annotations

import os
import threading
from typing import Callable

import pytest

from game_bridge_mcp.mcp_server.reader import ThreadedReader

pytestmark = pytest.mark.timeout(30)


class Taker:
    """Takes lines starting with ``call``: each runs until a ``release`` line is read."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.ran_on: list[str] = []
        self.read_on: list[str] = []
        self.refused: list[str] = []

    def take(self, line: str, here: Callable[[], bool]) -> bool | Callable[[], None]:
        self.read_on.append(str(threading.get_ident()) + ":" + line.strip())
        if line.startswith("release"):
            self.released.set()
            return True
        if line.startswith("call"):
            if not here():
                self.refused.append(line.strip())
                return False

            def run() -> None:
                self.ran_on.append(str(threading.get_ident()))
                assert self.released.wait(10)
            return run
        return False


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_a_call_runs_on_its_reader_while_another_thread_reads_on() -> None:
    stdin_r, stdin_w = os.pipe()
    taker = Taker()
    reader = ThreadedReader(stdin_r, taker, max_calls=4)
    reader.start()
    try:
        os.write(stdin_w, b"call 1\n{\"jsonrpc\": \"2.0\", \"method\": \"ping\"}\n")
        os.write(stdin_w, b"release\nother\nlast without newline")
        os.close(stdin_w)
        relayed = read_all(reader.sdk_fd)  # ends when stdin has ended
    finally:
        os.close(stdin_r)
        os.close(reader.sdk_fd)
    assert relayed == b"{\"jsonrpc\": \"2.0\", \"method\": \"ping\"}\nother\nlast without newline"
    assert taker.released.is_set() and len(taker.ran_on) == 1
    # the release was read while the call ran: by another thread than the call's
    readers = {entry.split(":", 1)[1]: entry.split(":", 1)[0] for entry in taker.read_on}
    assert readers["call 1"] == taker.ran_on[0] != readers["release"]


def test_with_every_thread_busy_a_call_goes_to_the_sdk() -> None:
    stdin_r, stdin_w = os.pipe()
    taker = Taker()
    reader = ThreadedReader(stdin_r, taker, max_calls=2)
    reader.start()
    try:
        os.write(stdin_w, b"call 1\ncall 2\ncall 3\nrelease\n")
        os.close(stdin_w)
        relayed = read_all(reader.sdk_fd)
    finally:
        os.close(stdin_r)
        os.close(reader.sdk_fd)
    assert taker.refused == ["call 3"] and relayed == b"call 3\n"
    assert len(taker.ran_on) == 2
