"""The loopback transport against hostile peers: one whole-request deadline, a body cap,
no redirects, no proxies, and every failure a TransportError of the right kind (never a
raw socket or http.client exception). Also ``decode_json``'s rules."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable

import pytest

from game_bridge_mcp.jsonio import decode_json
from game_bridge_mcp.wire.http11 import _AnswerReader
from game_bridge_mcp.wire.transport import (
    DEFAULT_MAX_BYTES, HttpResponse, TransportError, loopback_opener)
from peers import hostile
from peers.fakegame import FakeGame
from peers.hostile import HostilePeer

pytestmark = pytest.mark.timeout(30)

#: Slow peers get this deadline. ``BOUND_S`` is a hang guard, not a stopwatch: the peers
#: here never stop on their own, and the error's kind and text say what ended the request.
DEADLINE_S = 0.5
BOUND_S = 10.0


def closed_port() -> int:
    """A port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(peer: HostilePeer, path: str = "/health", *, timeout: float = DEADLINE_S,
          max_bytes: int = DEFAULT_MAX_BYTES) -> HttpResponse:
    return loopback_opener(peer.url + path, timeout=timeout, max_bytes=max_bytes)


def fails(kind: str, call: Callable[[], Any]) -> tuple[TransportError, float]:
    started = time.monotonic()
    with pytest.raises(TransportError) as info:
        call()
    elapsed = time.monotonic() - started
    assert info.value.kind == kind, f"expected {kind}, got {info.value.kind}: {info.value.detail}"
    assert info.value.detail
    return info.value, elapsed


# --------------------------------------------------------------------------- good answers

def test_a_plain_answer_and_the_request_it_sent(serve: Any) -> None:
    peer = serve(hostile.answer(200, b'{"ok": true, "frame": 7}', headers=(("X-Thing", "Yes"),)))
    response = fetch(peer, "/state?x=1")
    assert response == HttpResponse(200, b'{"ok": true, "frame": 7}', response.headers)
    assert response.headers["x-thing"] == "Yes"
    request = peer.requests[0]
    assert request.startswith(b"GET /state?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{peer.port}\r\n".encode() in request
    assert b"Connection: close\r\n" in request


def test_a_body_without_length_is_read_to_the_close(serve: Any) -> None:
    peer = serve(hostile.answer(200, b'{"a": 1}', length=None))
    assert fetch(peer).body == b'{"a": 1}'


def test_a_chunked_body_is_decoded(serve: Any) -> None:
    def chunked(conn: socket.socket, p: HostilePeer) -> None:
        p.read_request(conn)
        conn.sendall(hostile.head(200, (("Transfer-Encoding", "chunked"),))
                     + b"3\r\n{\"a\r\n4\r\n\": 1\r\n1\r\n}\r\n0\r\n\r\n")
    assert fetch(serve(chunked)).body == b'{"a": 1}'


def test_a_body_of_exactly_the_cap_passes_and_one_more_byte_does_not(serve: Any) -> None:
    assert fetch(serve(hostile.answer(200, b"x" * 100)), max_bytes=100).body == b"x" * 100
    fails("too-large", lambda: fetch(serve(hostile.answer(200, b"x" * 101)), max_bytes=100))
    fails("too-large", lambda: fetch(serve(hostile.answer(200, b"x" * 101, length=None)), max_bytes=100))


def test_against_the_fake_game() -> None:
    with FakeGame() as game:
        response = loopback_opener(f"http://127.0.0.1:{game.port}/health", timeout=2, max_bytes=1000)
    assert response.status == 200
    assert decode_json(response.body)["ok"] is True


# --------------------------------------------------------------------------- nothing answering

def test_a_request_larger_than_the_send_buffer_waits_for_room_and_all_of_it_is_sent() -> None:
    """The socket never blocks: a request the send buffer cannot take at once waits for
    room (poll, to the deadline) and goes on where it stopped."""
    request = b"GET /" + b"x" * 2_000_000 + b" HTTP/1.1\r\n\r\n"
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.settimeout(0.0)
    got = bytearray()

    def drain() -> None:
        while len(got) < len(request):
            chunk = theirs.recv(65536)
            if not chunk:
                return
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        _AnswerReader(ours, time.monotonic() + BOUND_S).send(request)
        reader.join(BOUND_S)
        assert bytes(got) == request
    finally:
        ours.close()
        theirs.close()
        reader.join(BOUND_S)


def test_a_peer_that_never_reads_the_request_ends_it_at_the_deadline() -> None:
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.settimeout(0.0)
    started = time.monotonic()
    try:
        with pytest.raises(socket.timeout):
            _AnswerReader(ours, started + 0.2).send(b"x" * 2_000_000)
        assert time.monotonic() - started < BOUND_S
    finally:
        ours.close()
        theirs.close()


def test_nothing_is_sent_once_the_deadline_has_passed() -> None:
    """A request whose deadline passed before it went out (its thread descheduled) is not
    sent: a command would be applied by the game and reported as timed out."""
    ours, theirs = socket.socketpair()
    ours.settimeout(0.0)
    try:
        with pytest.raises(socket.timeout):
            _AnswerReader(ours, time.monotonic() - 0.001).send(b"GET /command?cmd=jump HTTP/1.1\r\n\r\n")
        theirs.settimeout(0.0)
        with pytest.raises(BlockingIOError):
            theirs.recv(100)  # nothing arrived
    finally:
        ours.close()
        theirs.close()


def test_a_request_to_a_peer_that_never_reads_is_a_timeout_error(serve: Any) -> None:
    """Through the opener: the request is too large for the peer's buffers, the peer reads
    nothing, and the deadline ends it as a TransportError, not a raw socket error."""
    def never_reads(conn: socket.socket, peer: HostilePeer) -> None:
        peer.wait_for_client_close(conn)

    peer = serve(never_reads)
    error, elapsed = fails("timeout", lambda: fetch(peer, "/health?pad=" + "x" * 8_000_000))
    assert elapsed < BOUND_S


def test_refused() -> None:
    error, _ = fails("refused", lambda: loopback_opener(f"http://127.0.0.1:{closed_port()}/health",
                                                        timeout=1, max_bytes=100))
    assert "refused" in error.detail


@pytest.mark.parametrize("behaviour", [hostile.silent, hostile.trickle_headers, hostile.trickle_body],
                         ids=["never-answers", "trickled-headers", "trickled-body"])
def test_slow_peers_end_at_the_whole_request_deadline(serve: Any, behaviour: Any) -> None:
    peer = serve(behaviour())
    error, elapsed = fails("timeout", lambda: fetch(peer))
    assert elapsed < BOUND_S
    assert "500ms" in error.detail


def test_trickled_headers_did_send_bytes_before_the_deadline(serve: Any) -> None:
    """The trickle case is only meaningful if the peer was sending while we waited:
    a per-read timeout of 0.5 s would never have fired against 1 byte / 0.2 s."""
    received: list[bytes] = []

    def raw() -> None:
        with socket.create_connection(("127.0.0.1", peer.port), timeout=2) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
            sock.settimeout(0.5)
            received.append(sock.recv(100))
            received.append(sock.recv(100))

    peer = serve(hostile.trickle_headers())
    raw()
    assert received == [b"H", b"T"]


# --------------------------------------------------------------------------- unusable answers

@pytest.mark.parametrize("chunked", [False, True], ids=["until-close", "chunked"])
def test_an_endless_body_stops_at_the_cap(serve: Any, chunked: bool) -> None:
    error, elapsed = fails("too-large", lambda: fetch(serve(hostile.endless_body(chunked=chunked)),
                                                       max_bytes=100_000, timeout=5))
    assert "100000-byte cap" in error.detail
    assert elapsed < BOUND_S


def test_an_endless_body_stops_at_the_default_cap(serve: Any) -> None:
    error, elapsed = fails("too-large", lambda: fetch(serve(hostile.endless_body()), timeout=10))
    assert f"{DEFAULT_MAX_BYTES}-byte cap" in error.detail
    assert elapsed < 10


def test_a_content_length_over_the_cap_is_refused_before_reading(serve: Any) -> None:
    error, _ = fails("too-large", lambda: fetch(serve(hostile.answer(200, b"", length=10**12)), max_bytes=1000))
    assert "Content-Length 1000000000000" in error.detail


@pytest.mark.parametrize("behaviour", [hostile.reset_before_headers, hostile.reset_after_headers,
                                       hostile.close_without_answer],
                         ids=["rst-before-headers", "rst-after-headers", "fin-without-answer"])
def test_a_peer_that_goes_away_is_a_reset(serve: Any, behaviour: Any) -> None:
    _, elapsed = fails("reset", lambda: fetch(serve(behaviour())))
    assert elapsed < BOUND_S


def test_a_body_shorter_than_its_content_length_is_malformed(serve: Any) -> None:
    """Even when the part that did arrive is valid JSON."""
    error, _ = fails("malformed", lambda: fetch(serve(hostile.short_body(b'{"ok": true, "frame": 1}', 200))))
    assert "shorter" in error.detail


@pytest.mark.parametrize("behaviour", [hostile.many_headers, hostile.long_header_line, hostile.garbage],
                         ids=["150-headers", "64KiB-header-line", "not-http"])
def test_broken_http_is_malformed(serve: Any, behaviour: Any) -> None:
    error, elapsed = fails("malformed", lambda: fetch(serve(behaviour())))
    assert "not a valid HTTP answer" in error.detail
    assert elapsed < BOUND_S


def test_an_endless_header_line_is_malformed_not_a_hang(serve: Any) -> None:
    def endless_status(conn: socket.socket, p: HostilePeer) -> None:
        p.read_request(conn)
        while not p.stopping.is_set():
            conn.sendall(b"H" * 65536)
    _, elapsed = fails("malformed", lambda: fetch(serve(endless_status), timeout=5))
    assert elapsed < BOUND_S


def test_endless_interim_answers_end_at_the_deadline(serve: Any) -> None:
    def continues(conn: socket.socket, p: HostilePeer) -> None:
        p.read_request(conn)
        while p.pause(0.01):
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    _, elapsed = fails("timeout", lambda: fetch(serve(continues)))
    assert elapsed < BOUND_S


# --------------------------------------------------------------------------- redirects, proxies, URLs

def test_a_redirect_is_returned_not_followed(serve: Any) -> None:
    target = serve(hostile.answer(200, b'{"ok": true, "frame": 1}'))
    peer = serve(hostile.redirect(f"{target.url}/health"))
    response = fetch(peer)
    assert response.status == 302
    assert response.headers["location"] == f"{target.url}/health"
    assert target.accepted == 0
    # The target does record a connection when one is made (so the check above can fail).
    fetch(target)
    assert target.accepted == 1


PROXY_VARS = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY")


def test_proxy_variables_are_ignored(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = serve(hostile.silent())
    for name in PROXY_VARS:
        monkeypatch.setenv(name, proxy.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    game = serve(hostile.answer(200, b'{"ok": true, "frame": 3}'))
    assert fetch(game).body == b'{"ok": true, "frame": 3}'
    assert proxy.accepted == 0
    assert game.accepted == 1


@pytest.mark.parametrize("url", ["https://127.0.0.1:1/health", "http://127.0.0.1/health",
                                 "http://127.0.0.1:x/health", "http://127.0.0.1:70000/health",
                                 "http://127.0.0.1:0/health", "ftp://x"])
def test_unusable_urls_are_malformed(url: str) -> None:
    fails("malformed", lambda: loopback_opener(url, timeout=0.5, max_bytes=10))


def test_ipv6_loopback() -> None:
    try:
        listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        listener.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with listener:
        listener.listen(1)
        port = listener.getsockname()[1]
        fails("timeout", lambda: loopback_opener(f"http://[::1]:{port}/health", timeout=0.2, max_bytes=10))
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", 0))
        free = sock.getsockname()[1]
    fails("refused", lambda: loopback_opener(f"http://[::1]:{free}/health", timeout=0.5, max_bytes=10))


# --------------------------------------------------------------------------- decode_json

def test_decode_json_turns_non_json_numbers_into_none() -> None:
    assert decode_json(b'{"a": NaN, "b": Infinity, "c": -Infinity, "d": [NaN], "e": 1.5}') == {
        "a": None, "b": None, "c": None, "d": [None], "e": 1.5}


def test_decode_json_skips_one_byte_order_mark() -> None:
    assert decode_json(b'\xef\xbb\xbf{"a": "\xc3\xa9"}') == {"a": "\u00e9"}
    with pytest.raises(ValueError):
        decode_json(b"\xef\xbb\xbf\xef\xbb\xbf{}")  # a second one is not JSON


@pytest.mark.parametrize("body,reason", [
    (b"[" * 100_000, "nested too deeply"),
    (b'{"a": ' * 100_000, "nested too deeply"),
    (b'{"ok": tru', "not valid JSON"),
    (b"", "not valid JSON"),
    (b"\xff\xfe\xfa", "UTF-8"),
    (b'{"a": 1} trailing', "not valid JSON"),
])
def test_decode_json_reasons(body: bytes, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        decode_json(body)
    assert reason in str(info.value)
    assert type(info.value) is ValueError
