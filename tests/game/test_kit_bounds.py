"""What a peer can make a kit game spend through its socket: connections (each a
thread and a descriptor), header bytes, and time spent half-sending or not reading.

The floods run against the real demo game in a child process, its descriptor limit set
to 1024 as on a usual desktop; the deadlines against an in-process server with short
ones, on raw sockets."""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from typing import Any, Iterator

import psutil
import pytest

from game_bridge_mcp.game.server import http as _http
from game_bridge_mcp.game.server.http import MAX_CONNECTIONS, KitHttpServer
from peers.kitfakes import demo_process
from launch_helpers import wait_until

pytestmark = pytest.mark.timeout(120)


def health(port: int, timeout: float = 10.0) -> int:
    """A normal ``GET /health`` on a fresh connection: its status."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    return int(data.split()[1])


@pytest.fixture
def game() -> Iterator[Any]:
    with demo_process("--no-register", "--hz", "30") as demo:
        psutil.Process(demo.proc.pid).rlimit(psutil.RLIMIT_NOFILE, (1024, 1024))
        yield demo


@pytest.fixture
def many_fds() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 1400, "this test opens 1,100 connections"


@pytest.mark.slow
def test_a_flood_of_half_sent_connections_leaves_health_answering(game: Any, many_fds: None) -> None:
    ps = psutil.Process(game.proc.pid)
    threads_before, fds_before = ps.num_threads(), ps.num_fds()
    flood: list[socket.socket] = []
    try:
        opening_until = time.monotonic() + 30
        for _ in range(1100):  # each sends part of a request, then nothing
            if time.monotonic() > opening_until:  # connects crawl: the game is not accepting
                break
            try:
                sock = socket.create_connection(("127.0.0.1", game.port), timeout=2)
            except OSError:  # the game takes no more connections: what the bounds prevent
                break
            flood.append(sock)
            try:
                sock.send(b"GET /health HTTP/1.1\r\nHost: 127.0")
            except OSError:  # given way already
                pass
        assert health(game.port) == 200
        # Given way and ended: the game holds at most its cap of connections.
        assert wait_until(lambda: ps.num_threads() <= threads_before + MAX_CONNECTIONS + 2, 30), ps.num_threads()
        assert wait_until(lambda: ps.num_fds() <= fds_before + MAX_CONNECTIONS + 2, 30), ps.num_fds()
        assert health(game.port) == 200
    finally:
        for sock in flood:
            sock.close()
    assert game.proc.poll() is None


@pytest.mark.slow
def test_slow_connections_with_huge_headers_do_not_grow_the_game(game: Any) -> None:
    ps = psutil.Process(game.proc.pid)
    rss_before = ps.memory_info().rss
    peak = [rss_before]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            try:
                peak[0] = max(peak[0], ps.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    conns = [socket.create_connection(("127.0.0.1", game.port), timeout=10) for _ in range(40)]
    live = list(conns)
    try:
        for sock in conns:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % game.port)
        pad = b"a" * (64 * 1024 - 16)  # each header line just under 64 KiB, as the stdlib allows
        for index in range(99):  # one header at a time on each, round the 40
            for sock in list(live):
                try:
                    sock.sendall(b"X-Pad-%02d: %s\r\n" % (index, pad))
                except OSError:  # refused and closed: what the game should do
                    live.remove(sock)
        peak_growth = (peak[0] - rss_before) / 2**20
        held_growth = (ps.memory_info().rss - rss_before) / 2**20
    finally:
        sampling.set()
        sampler.join(5)
        for sock in conns:
            sock.close()
    assert peak_growth < 40 and held_growth < 40, (peak_growth, held_growth)
    assert health(game.port) == 200


@pytest.fixture
def quick_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[KitHttpServer, threading.Event, list[str]]]:
    """An in-process kit server with short deadlines and a cap of 4; ``/held`` holds its
    answer until the event is set; the paths routed, in order."""
    monkeypatch.setattr(_http, "HEAD_TIMEOUT_S", 0.5)
    monkeypatch.setattr(_http, "WRITE_TIMEOUT_S", 0.5)
    release = threading.Event()
    seen: list[str] = []

    def route(path: str, query: str) -> tuple[int, bytes]:
        seen.append(path)
        if path == "/held":
            release.wait(20)
        if path == "/big":
            return 200, b'"' + b"a" * (8 * 2**20) + b'"'
        return 200, json.dumps({"ok": True, "path": path}).encode()

    kit = KitHttpServer("127.0.0.1", 0, route, max_connections=4)
    thread = threading.Thread(target=kit.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield kit, release, seen
    release.set()
    kit.shutdown()
    kit.server_close()
    kit.close_connections(0.5)
    thread.join(5)


def request(port: int, path: str) -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (path.encode(), port)


def ended(sock: socket.socket, timeout_s: float) -> bool:
    """The peer closed ``sock`` within ``timeout_s`` (whatever it answered first)."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_a_request_trickled_slower_than_the_head_deadline_is_cut_off(quick_server: Any) -> None:
    kit, _release, seen = quick_server
    port = kit.server_address[1]
    # ~150 bytes at one each 0.05 s: each read is quick, the whole head takes 7 s (deadline 0.5 s)
    text = request(port, "/slow")[:-2] + b"X-Pad: " + b"a" * 100 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        cut = False
        for byte in text:
            try:
                sock.send(bytes([byte]))
            except OSError:
                cut = True
                break
            if kit.connections.expired:
                break
            time.sleep(0.05)
        assert cut or ended(sock, 5)
    assert kit.connections.expired == 1 and "/slow" not in seen


@pytest.mark.slow
def test_a_connection_that_sends_nothing_is_closed_and_a_kept_alive_one_may_idle(quick_server: Any) -> None:
    kit, _release, _seen = quick_server
    port = kit.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as silent, \
            socket.create_connection(("127.0.0.1", port), timeout=5) as kept:
        kept.sendall(request(port, "/one"))
        assert kept.recv(65536).startswith(b"HTTP/1.1 200")
        assert ended(silent, 3)
        assert wait_until(lambda: kit.connections.expired >= 1, 3)
        kept.sendall(request(port, "/two"))  # idle longer than the head deadline: still open
        assert kept.recv(65536).startswith(b"HTTP/1.1 200")


@pytest.mark.slow
def test_an_answer_nobody_reads_is_given_up_after_the_write_deadline(quick_server: Any) -> None:
    kit, _release, _seen = quick_server
    port = kit.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(request(port, "/big"))
        assert wait_until(lambda: kit.connections.expired >= 1, 5)
        assert len(kit.connections) == 0


def test_past_the_cap_the_oldest_half_sent_connection_gives_way(quick_server: Any) -> None:
    kit, _release, _seen = quick_server
    port = kit.server_address[1]
    half = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
    try:
        for sock in half:
            sock.sendall(b"GET /half HTTP/1.1\r\n")
        assert wait_until(lambda: len(kit.connections) == 4, 5)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as fresh:
            fresh.sendall(request(port, "/fresh"))
            assert fresh.recv(65536).startswith(b"HTTP/1.1 200")
        assert ended(half[0], 2)
        assert kit.connections.evicted >= 1 and len(kit.connections) <= 4
    finally:
        for sock in half:
            sock.close()


def test_when_every_connection_is_answering_a_new_one_gets_503(quick_server: Any) -> None:
    kit, release, seen = quick_server
    port = kit.server_address[1]
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
    try:
        for sock in held:
            sock.sendall(request(port, "/held"))
        assert wait_until(lambda: seen.count("/held") == 4, 5)  # all four routing
        with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
            extra.sendall(request(port, "/extra"))
            answer = extra.recv(65536)
            assert ended(extra, 2)
        assert answer.startswith(b"HTTP/1.1 503") and b"Connection: close" in answer, answer[:200]
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["ok"] is False
        assert "/extra" not in seen and kit.connections.refused == 1
        release.set()
        for sock in held:
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        for sock in held:
            sock.close()
