"""The server's event-loop stdio streams: lines however the bytes arrive, writes larger
than a pipe holds, EOF, descriptors left as they were, and the fallback where the loop
cannot wait on a descriptor. Real pipes, run on anyio."""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from typing import Any

import anyio
import pytest

from game_bridge_mcp.mcp_server.stdio.pipes import LineReader, Writer, loop_streams

pytestmark = pytest.mark.timeout(30)


def feed(fd: int, pieces: list[bytes], pause: float = 0.01) -> threading.Thread:
    """Write ``pieces`` to ``fd`` from a thread, pausing between them, then close it."""
    def run() -> None:
        import time
        for piece in pieces:
            os.write(fd, piece)
            time.sleep(pause)
        os.close(fd)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def read_all(fd: int) -> list[str]:
    async def main() -> list[str]:
        return [line async for line in LineReader(fd)]

    return anyio.run(main)


def test_lines_are_reassembled_however_the_bytes_arrive() -> None:
    read_fd, write_fd = os.pipe()
    thread = feed(write_fd, [b'{"a"', b': 1}\n{"b": 2}\n{"c"', b": 3}\n", b'{"tail": true}'])
    try:
        lines = read_all(read_fd)
    finally:
        thread.join(5)
        os.close(read_fd)
    assert lines == ['{"a": 1}\n', '{"b": 2}\n', '{"c": 3}\n', '{"tail": true}']


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    read_fd, write_fd = os.pipe()
    thread = feed(write_fd, ["\u00e9t\u00e9\n".encode()[:2] + b"\xff\n"], pause=0)
    try:
        lines = read_all(read_fd)
    finally:
        thread.join(5)
        os.close(read_fd)
    assert lines == ["\u00e9\ufffd\n"]


def test_a_long_line_in_many_reads() -> None:
    read_fd, write_fd = os.pipe()
    text = ("x" * 300_000 + "\n").encode()
    thread = feed(write_fd, [text[i:i + 70_000] for i in range(0, len(text), 70_000)], pause=0)
    try:
        lines = read_all(read_fd)
    finally:
        thread.join(5)
        os.close(read_fd)
    assert lines == [text.decode()]


def test_a_write_larger_than_the_pipe_waits_for_the_reader_without_blocking_the_loop() -> None:
    read_fd, write_fd = os.pipe()
    payload = "y" * 1_000_000 + "\n"
    received = bytearray()

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.001)
                ticks += 1

        def drain() -> None:
            import time
            time.sleep(0.05)  # let the pipe fill first
            while True:
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    return
                received.extend(chunk)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ticker)
            reader = threading.Thread(target=drain)
            reader.start()
            writer = Writer(write_fd)
            await writer.write(payload)
            await writer.flush()
            os.close(write_fd)
            await anyio.to_thread.run_sync(reader.join)
            tasks.cancel_scope.cancel()
        return ticks

    ticks = anyio.run(main)
    os.close(read_fd)
    assert bytes(received) == payload.encode()
    assert ticks > 0  # the loop kept running while the pipe was full


def test_descriptor_flags_are_left_alone() -> None:
    read_fd, write_fd = os.pipe()
    before = (fcntl.fcntl(read_fd, fcntl.F_GETFL), fcntl.fcntl(write_fd, fcntl.F_GETFL))

    async def main() -> list[str]:
        await Writer(write_fd).write("one\n")
        os.close(write_fd)
        return [line async for line in LineReader(read_fd)]

    try:
        assert anyio.run(main) == ["one\n"]
        assert fcntl.fcntl(read_fd, fcntl.F_GETFL) == before[0]
    finally:
        os.close(read_fd)


def test_streams_only_for_descriptors_the_loop_can_wait_on() -> None:
    read_fd, write_fd = os.pipe()
    try:
        streams: Any = loop_streams(read_fd, write_fd)
        assert streams is not None
        assert isinstance(streams[0], LineReader) and isinstance(streams[1], Writer)
        with tempfile.TemporaryFile() as regular:
            assert loop_streams(regular.fileno(), write_fd) is None  # epoll refuses regular files
            assert loop_streams(read_fd, regular.fileno()) is None
    finally:
        os.close(read_fd)
        os.close(write_fd)


def drain(fd: int, into: bytearray) -> threading.Thread:
    """Read ``fd`` to EOF in small reads from a thread (a pipe fills up and waits for it)."""
    def run() -> None:
        while chunk := os.read(fd, 4096):
            into.extend(chunk)
        os.close(fd)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_line_in_pieces_goes_out_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client woken by the first of several writes finds half a line: small pieces are
    joined and written with one system call."""
    import game_bridge_mcp.mcp_server.stdio.pipes as pipes

    calls: list[int] = []
    real_write, real_writev = os.write, getattr(os, "writev", None)

    def write(fd: int, data: Any) -> int:
        calls.append(len(data))
        return real_write(fd, data)

    def writev(fd: int, buffers: Any) -> int:
        calls.append(sum(len(b) for b in buffers))
        assert real_writev is not None
        return real_writev(fd, buffers)

    monkeypatch.setattr(pipes.os, "write", write)
    monkeypatch.setattr(pipes.os, "writev", writev)
    read_end, write_end = os.pipe()
    try:
        pieces = [b'{"id":1,', b'"result":', b'"' + b"x" * 1000 + b'"', b"}\n"]
        Writer(write_end).write_line(list(pieces))
        assert calls == [sum(map(len, pieces))]
        assert os.read(read_end, 4096) == b"".join(pieces)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_line_larger_than_the_pipe_in_pieces_arrives_whole_and_in_order() -> None:
    """Pieces past the join size go out together (``writev``), however little of them
    each system call takes."""
    import game_bridge_mcp.mcp_server.stdio.pipes as pipes

    pieces = [bytes([65 + i % 26]) * size for i, size in enumerate([10, 300_000, 7, 500_000, 1])] + [b"\n"]
    expected = b"".join(pieces)
    assert len(expected) > pipes.JOIN_BYTES
    read_end, write_end = os.pipe()
    got = bytearray()
    reader = drain(read_end, got)
    try:
        Writer(write_end).write_line(list(pieces))
    finally:
        os.close(write_end)
        reader.join(timeout=20)
    assert not reader.is_alive()
    assert bytes(got) == expected
