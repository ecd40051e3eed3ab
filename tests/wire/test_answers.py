"""The transport's own answer reader, beyond the hostile cases of test_transport.py:
interim answers, bodiless statuses, folded headers, chunk extensions and trailers,
broken chunks, an answer that ends inside its headers, and when a connection may be
kept (HTTP/1.0 keep-alive, an answer read to the close). Real sockets, port 0."""

from __future__ import annotations

import socket
from typing import Any, Callable, Iterator

import pytest

from game_bridge_mcp.wire.transport import KeepAliveSession, TransportError, loopback_opener
from peers.hostile import HostilePeer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def serve() -> Iterator[Callable[[bytes], HostilePeer]]:
    """A peer that answers every request on a connection with ``raw`` (then waits)."""
    peers: list[HostilePeer] = []

    def start(raw: bytes, *, close: bool = True) -> HostilePeer:
        def behaviour(conn: socket.socket, peer: HostilePeer) -> None:
            while not peer.stopping.is_set():
                if not peer.read_request(conn).endswith(b"\r\n\r\n"):
                    return
                conn.sendall(raw)
                if close:
                    return

        peer = HostilePeer(behaviour).__enter__()
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        peer.close()


def get(peer: HostilePeer, *, max_bytes: int = 10_000) -> Any:
    return loopback_opener(f"{peer.url}/state", timeout=2, max_bytes=max_bytes)


def fails(kind: str, call: Callable[[], Any]) -> TransportError:
    with pytest.raises(TransportError) as info:
        call()
    assert info.value.kind == kind, info.value.detail
    return info.value


def test_interim_answers_are_skipped(serve: Any) -> None:
    peer = serve(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                 b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    answer = get(peer)
    assert answer.status == 200 and answer.body == b"{}" and "link" not in answer.headers


def test_no_content_has_no_body(serve: Any) -> None:
    answer = get(serve(b"HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n"))
    assert answer.status == 204 and answer.body == b""


def test_headers_are_case_insensitive_trimmed_and_unfolded(serve: Any) -> None:
    answer = get(serve(b"HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh:  2 \r\nX-Long: a\r\n  b\r\nno colon here\r\n"
                       b"X-Empty:\r\n\r\n{}"))
    assert answer.body == b"{}"
    assert answer.headers["x-long"] == "a b" and answer.headers["x-empty"] == ""


def test_bare_newlines_are_accepted(serve: Any) -> None:
    assert get(serve(b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}")).body == b"{}"


HEAD_LINES = [b"HTTP/1.1 200 OK", b"Content-Length: 2", b"X-Tabbed:\t a value \t", b"no colon here",
              b": no name", b"X-Url: http://host:1/path", b"x-twice: first", b"X-Twice: second",
              b"Spaced-Name  : v", b"X-Empty:"]


@pytest.mark.parametrize("ending", [b"\r\n", b"\n"], ids=["CRLF", "LF"])
def test_headers_read_alike_whatever_the_line_ending(serve: Any, ending: bytes) -> None:
    """Lines without a name or a colon are skipped, values trimmed of spaces and tabs, a
    colon inside a value kept, names lower-cased and trimmed, a repeated name keeps its last."""
    answer = get(serve(ending.join(HEAD_LINES) + ending + ending + b"{}"))
    assert answer.body == b"{}"
    assert dict(answer.headers) == {"content-length": "2", "x-tabbed": "a value", "x-url": "http://host:1/path",
                                    "x-twice": "second", "spaced-name": "v", "x-empty": ""}


def test_chunk_extensions_and_trailers(serve: Any) -> None:
    answer = get(serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"2;name=value\r\n{\"\r\nA\r\na\": 12345}\r\n0\r\nX-Trailer: yes\r\n\r\n"))
    assert answer.body == b'{"a": 12345}'


@pytest.mark.parametrize("body,reason", [
    (b"zz\r\n{}\r\n0\r\n\r\n", "chunk size"),
    (b"2\r\n{}XX0\r\n\r\n", "does not end"),
    (b"-2\r\n{}\r\n0\r\n\r\n", "chunk size"),
], ids=["not-hex", "chunk-overruns", "negative"])
def test_broken_chunks_are_malformed(serve: Any, body: bytes, reason: str) -> None:
    error = fails("malformed", lambda: get(serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)))
    assert "not a valid HTTP answer" in error.detail and reason in error.detail


def test_a_chunked_body_cut_short_is_malformed(serve: Any) -> None:
    error = fails("malformed", lambda: get(serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                                 b"10\r\n{\"a\": 1")))
    assert "shorter" in error.detail


def test_a_chunked_body_over_the_cap_stops_before_reading_the_chunk(serve: Any) -> None:
    error = fails("too-large", lambda: get(serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                                 b"FFFFFFFF\r\n"), max_bytes=1000))
    assert "1000-byte cap" in error.detail


@pytest.mark.parametrize("raw", [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", b"HTTP/1.1 200 OK\r\n",
                                 b"HTTP/2 200\r\n\r\n", b"HTTP/1.1 2000 OK\r\n\r\n", b"HTTP/1.1\r\n\r\n",
                                 b"\r\n"],
                         ids=["ends-in-headers", "ends-after-status", "http2", "status-4-digits",
                              "no-status", "blank"])
def test_broken_heads_are_malformed(serve: Any, raw: bytes) -> None:
    error = fails("malformed", lambda: get(serve(raw)))
    assert "not a valid HTTP answer" in error.detail


def test_an_http_1_0_answer_that_asks_for_keep_alive_is_kept(serve: Any) -> None:
    peer = serve(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}", close=False)
    with KeepAliveSession() as session:
        for _ in range(3):
            assert session(f"{peer.url}/health", timeout=2, max_bytes=100).body == b"{}"
    assert peer.accepted == 1 and session.reused == 2


def test_an_answer_read_to_the_close_is_never_kept(serve: Any) -> None:
    peer = serve(b"HTTP/1.1 200 OK\r\n\r\n{}")
    with KeepAliveSession() as session:
        for _ in range(2):
            assert session(f"{peer.url}/health", timeout=2, max_bytes=100).body == b"{}"
    assert peer.accepted == 2 and session.reused == 0


def test_a_chunked_answer_is_kept(serve: Any) -> None:
    peer = serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", close=False)
    with KeepAliveSession() as session:
        for _ in range(3):
            assert session(f"{peer.url}/health", timeout=2, max_bytes=100).body == b"{}"
    assert peer.accepted == 1
