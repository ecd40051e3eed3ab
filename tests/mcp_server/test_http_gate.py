"""The HTTP server's gate on its own, in-process (a deadline and a cap that the subprocess
tests would need seconds or hundreds of requests to reach): a body that does not arrive
in time, the cap on requests in flight, names from --allow-host, Origin forms."""

from __future__ import annotations

from typing import Any

import anyio

from game_bridge_mcp.mcp_server.http.gate import Gate

TOKEN = "t" * 32


def scope(method: str = "POST", **headers: str) -> dict[str, Any]:
    sent = {"host": "127.0.0.1:8765", "authorization": f"Bearer {TOKEN}", **headers}
    return {"type": "http", "method": method, "path": "/mcp",
            "headers": [(k.encode(), v.encode()) for k, v in sent.items()]}


class Answer:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[bytes, bytes] = {}

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = dict(message["headers"])


def gate(app: Any = None, **kwargs: Any) -> Gate:
    async def ok(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})
    return Gate(app or ok, token=TOKEN, hosts={"127.0.0.1:8765", "localhost:8765"}, **kwargs)


def test_a_body_that_does_not_arrive_in_time_is_408() -> None:
    async def trickle() -> dict[str, Any]:
        await anyio.sleep(0.05)
        return {"type": "http.request", "body": b"x", "more_body": True}

    async def main() -> int | None:
        answer = Answer()
        await gate(body_deadline_s=0.3)(scope(), trickle, answer)
        return answer.status
    assert anyio.run(main) == 408


def test_requests_past_the_cap_are_503_with_retry_after() -> None:
    release = anyio.Event()

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def body() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def main() -> list[int | None]:
        door = gate(slow, max_in_flight=2)
        answers = [Answer() for _ in range(3)]
        async with anyio.create_task_group() as tasks:
            for answer in answers[:2]:
                tasks.start_soon(door, scope(), body, answer)
            await anyio.sleep(0.05)
            await door(scope(), body, answers[2])
            assert answers[2].headers[b"retry-after"] == b"1"
            stream = Answer()  # the notification stream (GET) is not counted
            release.set()
            await door(scope("GET"), body, stream)
        return [a.status for a in answers]
    assert anyio.run(main) == [200, 200, 503]


def test_allowed_names_match_any_port_and_origins_need_a_known_host() -> None:
    door = gate(names=["host.docker.internal"])
    assert door.known_host("host.docker.internal:9999") and door.known_host("host.docker.internal")
    assert door.known_host("localhost:8765") and not door.known_host("localhost:8766")
    assert not door.known_host("evil.example:8765") and not door.known_host("")
    assert door.known_origin("http://localhost:8765") and door.known_origin("https://host.docker.internal")
    assert not door.known_origin("http://evil.example") and not door.known_origin("null")
    assert not door.known_origin("file://localhost:8765") and not door.known_origin("http://localhost:8765/x")
