"""ThreadedReader (mcp_server/stdio/reader.py): the thread that reads a call runs it while another
thread reads on; the lines it does not take reach the SDK's pipe in order; stdin's end
closes that pipe and ends every thread; with every thread busy a call goes to the SDK; a
client that waits for each answer is served by two threads; a regular file is read too."""

from __future__ import annotations

import os
import select
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest

from game_bridge_mcp.mcp_server.stdio.reader import ThreadedReader
from launch_helpers import wait_until

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


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gb-stdin"]


@pytest.fixture(autouse=True)
def readers_end() -> Iterator[None]:
    """Every test ends its reader (stdin closed): its threads are gone before the next test
    counts threads and descriptors."""
    assert wait_until(lambda: not reader_threads(), 10), "a reader's threads outlived its stdin"
    yield
    assert wait_until(lambda: not reader_threads(), 10), "a reader's threads outlived its stdin"


def test_lines_read_with_a_call_go_on_while_it_runs() -> None:
    """A call and the lines after it arrive in one read: the call runs on the thread that
    read it, and another thread goes through the rest meanwhile (they are not left until
    stdin has more)."""
    stdin_r, stdin_w = os.pipe()
    taker = Taker()
    reader = ThreadedReader(stdin_r, taker, max_calls=4)
    reader.start()
    try:
        os.write(stdin_w, b"call 1\nfirst\nsecond\n")
        relayed = b""
        while relayed.count(b"\n") < 2:  # relayed while call 1 still waits for its release
            assert select.select([reader.sdk_fd], [], [], 10)[0], f"only {relayed!r} went on while the call ran"
            relayed += os.read(reader.sdk_fd, 65536)
        assert relayed == b"first\nsecond\n" and not taker.released.is_set()
        os.write(stdin_w, b"release\n")
        os.close(stdin_w)
        assert read_all(reader.sdk_fd) == b""
    finally:
        os.close(stdin_r)
        os.close(reader.sdk_fd)
    assert len(taker.ran_on) == 1


def test_calls_one_after_another_need_no_more_than_two_threads() -> None:
    """A client that waits for each answer: the thread that read a call runs it while one
    other waits for the next line; no thread is started per call."""
    stdin_r, stdin_w = os.pipe()
    done: list[int] = []
    finished = threading.Semaphore(0)

    class Sequential:
        def take(self, line: str, here: Callable[[], bool]) -> bool | Callable[[], None]:
            if not line.startswith("call") or not here():
                return False
            return lambda: (done.append(threading.get_ident()), finished.release())

    reader = ThreadedReader(stdin_r, Sequential(), max_calls=8)
    reader.start()
    try:
        for number in range(50):
            os.write(stdin_w, b"call %d\n" % number)
            assert finished.acquire(timeout=10)
            assert len(reader_threads()) <= 2
        os.close(stdin_w)
        assert read_all(reader.sdk_fd) == b""
    finally:
        os.close(stdin_r)
        os.close(reader.sdk_fd)
    assert len(done) == 50 and len(set(done)) <= 2


def test_stdin_a_regular_file(tmp_path: Path) -> None:
    """A file cannot be waited on: the threads read it in turn, every line once, in order."""
    path = tmp_path / "requests"
    path.write_bytes(b"one\ncall 1\ntwo\nrelease\nthree")
    taker = Taker()
    fd = os.open(path, os.O_RDONLY)
    reader = ThreadedReader(fd, taker, max_calls=4)
    reader.start()
    try:
        relayed = read_all(reader.sdk_fd)
    finally:
        os.close(fd)
        os.close(reader.sdk_fd)
    assert relayed == b"one\ntwo\nthree" and len(taker.ran_on) == 1


def test_the_end_of_stdin_ends_every_thread_and_closes_what_the_reader_opened() -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before_fds = open_fds()
    stdin_r, stdin_w = os.pipe()
    taker = Taker()
    reader = ThreadedReader(stdin_r, taker, max_calls=4)
    reader.start()
    os.write(stdin_w, b"call 1\ncall 2\n")
    assert wait_until(lambda: len(taker.ran_on) == 2, 10)
    os.write(stdin_w, b"release\n")
    os.close(stdin_w)
    assert read_all(reader.sdk_fd) == b""
    os.close(stdin_r)
    os.close(reader.sdk_fd)
    assert wait_until(lambda: not reader_threads(), 10)
    assert wait_until(lambda: open_fds() == before_fds, 10), "the reader left descriptors open"
