"""The kit's HTTP server reads requests itself: what it accepts, what it refuses, and
that a kept-alive connection carries requests one after another (pipelined too).

Spoken to on raw sockets, so nothing here depends on a client library's leniency."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, Iterator

import pytest

from game_bridge_mcp.game.server.http import MAX_HEADERS, KitHttpServer

pytestmark = pytest.mark.timeout(30)


RELEASE = threading.Event()


@pytest.fixture
def server() -> Iterator[tuple[KitHttpServer, list[str]]]:
    seen: list[str] = []
    RELEASE.clear()

    def route(path: str, query: str) -> tuple[int, bytes]:
        seen.append(path + ("?" + query if query else ""))
        if path == "/held":
            RELEASE.wait(5)  # as a held after request waits for its command
        return 200, json.dumps({"ok": True, "path": path, "query": query}).encode()

    kit = KitHttpServer("127.0.0.1", 0, route)
    thread = threading.Thread(target=kit.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield kit, seen
    kit.shutdown()
    kit.server_close()
    kit.close_connections(0.5)
    thread.join(5)


def connect(kit: KitHttpServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", kit.server_address[1]), timeout=5)
    return sock


def answers(sock: socket.socket, count: int) -> list[tuple[int, dict[str, str], bytes]]:
    """Read ``count`` whole answers (or fewer, if the server closes first)."""
    data = b""
    out: list[tuple[int, dict[str, str], bytes]] = []
    while len(out) < count:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers["content-length"])
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            rest += chunk
        out.append((int(lines[0].split()[1]), headers, rest[:length]))
        data = rest[length:]
    return out


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def host(kit: KitHttpServer) -> bytes:
    return f"Host: 127.0.0.1:{kit.server_address[1]}\r\n".encode()


def test_pipelined_requests_are_answered_in_order_on_one_connection(server: Any) -> None:
    kit, seen = server
    with connect(kit) as sock:
        sock.sendall(b"".join(b"GET /p%d?i=%d HTTP/1.1\r\n" % (n, n) + host(kit) + b"\r\n" for n in range(5)))
        got = answers(sock, 5)
        assert [json.loads(body)["path"] for _, _, body in got] == [f"/p{n}" for n in range(5)]
        assert all(status == 200 and "connection" not in headers for status, headers, _ in got)
        sock.sendall(b"\r\nGET /after-a-blank-line HTTP/1.1\r\n" + host(kit) + b"\r\n")
        assert json.loads(answers(sock, 1)[0][2])["path"] == "/after-a-blank-line"
    assert seen[:5] == [f"/p{n}?i={n}" for n in range(5)]


def test_headers_are_case_insensitive_and_folded_lines_are_joined(server: Any) -> None:
    kit, _seen = server
    with connect(kit) as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\nhOsT: 127.0.0.1:%d\r\nX-Long: a\r\n b\r\n\r\n" % kit.server_address[1])
        assert answers(sock, 1)[0][0] == 200


@pytest.mark.parametrize("request_bytes, status", [
    (b"NONSENSE\r\n\r\n", 400),
    (b"GET /x\r\n\r\n", 400),
    (b"GET /x HTTP/2.0\r\n\r\n", 505),
    (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /x HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431),
    (b"GET /x HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(MAX_HEADERS + 1)) + b"\r\n", 431),
    (b"GET /x HTTP/1.1\r\n continued\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nNo colon here\r\n\r\n", 400),
])
def test_malformed_requests_get_a_json_error_and_the_connection_closes(server: Any, request_bytes: bytes,
                                                                       status: int) -> None:
    kit, seen = server
    with connect(kit) as sock:
        sock.sendall(request_bytes)
        (got_status, headers, body), = answers(sock, 1)
        assert got_status == status and headers["connection"] == "close"
        assert json.loads(body)["ok"] is False and json.loads(body)["error"]
        assert closed(sock)
    assert seen == []


def test_other_methods_and_bodies_are_refused_and_close(server: Any) -> None:
    kit, seen = server
    with connect(kit) as sock:
        sock.sendall(b"POST /command?cmd=x HTTP/1.1\r\n" + host(kit) + b"Content-Length: 3\r\n\r\nabc")
        (status, headers, body), = answers(sock, 1)
        assert status == 405 and "GET" in json.loads(body)["error"] and headers["connection"] == "close"
        assert closed(sock)
    with connect(kit) as sock:  # a GET with a body is answered, then the connection ends
        sock.sendall(b"GET /x HTTP/1.1\r\n" + host(kit) + b"Content-Length: 3\r\n\r\nabc")
        (status, headers, _body), = answers(sock, 1)
        assert status == 200 and headers["connection"] == "close"
        assert closed(sock)
    assert seen == ["/x"]


SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize("framing, status", [
    (b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(SMUGGLED), 400),  # the first used to win
    (b"Content-Length: %d\r\nContent-Length: 0\r\n" % len(SMUGGLED), 400),
    (b"Transfer-Encoding: \r\n", 400),  # empty: used to count as absent
    (b"Transfer-Encoding: chunked\r\n", 400),
    (b"Transfer-Encoding: identity\r\nContent-Length: 0\r\n", 400),
    (b"Content-Length: +0\r\n", 400),
    (b"Content-Length: 0, 0\r\n", 400),
    (b"Content-Length: \xd9\xa0\r\n", 400),  # an Arabic-Indic zero: isdigit, not a number here
    (b"Content Length: 0\r\n", 400),  # not a token
    (b"X-A: 1\rX-B: 2\r\n", 400),  # a bare CR inside a header line
])
def test_a_request_whose_end_is_in_doubt_is_refused_and_nothing_after_it_runs(server: Any, framing: bytes,
                                                                            status: int) -> None:
    kit, seen = server
    with connect(kit) as sock:
        body = b"0\r\n\r\n" + SMUGGLED if b"chunked" in framing or framing.startswith(b"Transfer") else SMUGGLED
        sock.sendall(b"GET /x HTTP/1.1\r\n" + host(kit) + framing + b"\r\n" + body)
        got = answers(sock, 2)
        assert [answer[0] for answer in got] == [status], got
        assert got[0][1]["connection"] == "close" and json.loads(got[0][2])["ok"] is False
        assert closed(sock)
    assert seen == []


@pytest.mark.parametrize("version, status", [
    (b"HTTP/1.9", 505), (b"HTTP/1.10", 505), (b"HTTP/0.9", 505), (b"HTTP/1.1 ", 400), (b"http/1.1", 400),
])
def test_only_http_1_0_and_1_1_are_served(server: Any, version: bytes, status: int) -> None:
    kit, seen = server
    with connect(kit) as sock:
        sock.sendall(b"GET /x " + version + b"\r\n" + host(kit) + b"\r\n")
        (got, headers, _body), = answers(sock, 1)
        assert got == status and headers["connection"] == "close"
    assert seen == []


@pytest.mark.parametrize("line", [b"GET  /x HTTP/1.1", b"GET\t/x HTTP/1.1", b"GET /x  HTTP/1.1"])
def test_a_request_line_is_three_parts_split_by_single_spaces(server: Any, line: bytes) -> None:
    kit, seen = server
    with connect(kit) as sock:
        sock.sendall(line + b"\r\n" + host(kit) + b"\r\n")
        assert answers(sock, 1)[0][0] == 400
    assert seen == []


@pytest.mark.parametrize("request_head, keeps", [
    (b"GET /x HTTP/1.1\r\n", True),
    (b"GET /x HTTP/1.1\r\nConnection: close\r\n", False),
    (b"GET /x HTTP/1.0\r\n", False),
    (b"GET /x HTTP/1.0\r\nConnection: keep-alive\r\n", True),
])
def test_keep_alive_follows_the_version_and_connection_header(server: Any, request_head: bytes, keeps: bool) -> None:
    kit, _seen = server
    with connect(kit) as sock:
        sock.sendall(request_head + host(kit) + b"\r\n")
        (status, headers, _body), = answers(sock, 1)
        assert status == 200 and ("connection" not in headers) == keeps
        if not keeps:
            assert closed(sock)
        else:
            sock.sendall(request_head + host(kit) + b"\r\n")
            assert answers(sock, 1)[0][0] == 200


def test_a_foreign_host_is_refused_before_routing(server: Any) -> None:
    kit, seen = server
    with connect(kit) as sock:
        sock.sendall(b"GET /command?cmd=x HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        (status, headers, body), = answers(sock, 1)
        assert status == 403 and json.loads(body)["accepted"] is False and headers["connection"] == "close"
    assert seen == []


def test_a_held_answer_on_one_connection_does_not_hold_up_another(server: Any) -> None:
    kit, seen = server
    with connect(kit) as held, connect(kit) as quick:
        held.sendall(b"GET /held HTTP/1.1\r\n" + host(kit) + b"\r\n")
        deadline = time.monotonic() + 5
        while "/held" not in seen:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        quick.sendall(b"GET /quick HTTP/1.1\r\n" + host(kit) + b"\r\n")
        assert json.loads(answers(quick, 1)[0][2])["path"] == "/quick"  # while /held is still held
        assert not RELEASE.is_set()
        RELEASE.set()
        assert json.loads(answers(held, 1)[0][2])["path"] == "/held"
