"""GameClient: every hostile answer becomes the right bridge error (never a raw
exception), the command-then-confirm cycle against a real game-loop thread, close, the
injected opener and the loopback-only rule."""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Iterator

import pytest

from game_bridge_mcp.wire import client as client_module
from game_bridge_mcp.wire import polls as polls_module
from game_bridge_mcp.wire.client import GameClient
from game_bridge_mcp.errors import (
    BridgeError, BridgeUsageError, CommandRejected, CommandTimeout, GameOffline, NotAGameSurface)
from game_bridge_mcp.wire.transport import HttpResponse, TransportError
from peers import hostile
from peers.fakegame import FakeGame, wait_until

pytestmark = pytest.mark.timeout(30)

TIMEOUT_MS = 500
#: A hang guard, not a stopwatch: the peers here never stop on their own (or the client's
#: own deadline is 60 s), and the error says what ended the call.
BOUND_S = 10.0


@pytest.fixture
def game() -> Iterator[FakeGame]:
    with FakeGame() as fake:
        yield fake


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def raises(error_type: type[BridgeError], call: Callable[[], Any]) -> tuple[BridgeError, float]:
    """``call`` raises exactly ``error_type`` (not a subclass, never a raw exception)."""
    started = time.monotonic()
    try:
        call()
    except BridgeError as exc:
        elapsed = time.monotonic() - started
        assert type(exc) is error_type, f"expected {error_type.__name__}, got {exc.render()}"
        assert exc.render().startswith(exc.name + ": ")
        return exc, elapsed
    raise AssertionError(f"{error_type.__name__} was not raised")


# --------------------------------------------------------------------------- hostile /health

OFFLINE_PEERS = {
    "never-answers": (hostile.silent, ["accepted the connection", "did not complete within 500ms"]),
    "trickled-headers": (hostile.trickle_headers, ["accepted the connection", "did not complete within 500ms"]),
    "trickled-body": (hostile.trickle_body, ["accepted the connection", "did not complete within 500ms"]),
    "rst-before-headers": (hostile.reset_before_headers, ["connection to port", "broke", "reset"]),
    "rst-after-headers": (hostile.reset_after_headers, ["connection to port", "broke", "reset"]),
    "closed-without-answer": (hostile.close_without_answer, ["connection to port", "broke"]),
}


@pytest.mark.parametrize("name", OFFLINE_PEERS)
@pytest.mark.parametrize("endpoint", ["/health", "/state", "/command"])
def test_peers_that_do_not_answer_are_offline(serve: Any, name: str, endpoint: str) -> None:
    behaviour, fragments = OFFLINE_PEERS[name]
    peer = serve(behaviour())
    client = GameClient(peer.port, timeout_ms=TIMEOUT_MS)
    call = {"/health": client.health, "/state": client.state,
            "/command": lambda: client.command("noop")}[endpoint]
    error, elapsed = raises(GameOffline, call)
    assert elapsed < BOUND_S
    assert endpoint in error.message
    assert str(peer.port) in error.message
    for fragment in fragments:
        assert fragment in error.message
    assert error.fields["port"] == peer.port


def test_nothing_listening_is_offline_with_the_launch_hint() -> None:
    port = closed_port()
    error, _ = raises(GameOffline, GameClient(port, launch_hint="make run PORT={port}").health)
    assert error.message.startswith(f"No game is answering on http://127.0.0.1:{port}.")
    assert f"make run PORT={port}" in error.message


def test_a_timed_out_health_check_uses_its_own_timeout(serve: Any) -> None:
    peer = serve(hostile.silent())
    error, elapsed = raises(GameOffline, lambda: GameClient(peer.port, timeout_ms=60_000).health(timeout_ms=200))
    assert elapsed < BOUND_S
    assert "within 200ms" in error.message


NOT_A_GAME = {
    "invalid-json": (hostile.answer(200, b'{"ok": tru'), "not valid JSON"),
    "deep-nesting": (hostile.deep_nesting(60_000), "nested too deeply"),
    "deep-nesting-100k": (hostile.deep_nesting(100_000), "cap"),  # over /health's 64 KiB cap
    "endless-body": (hostile.endless_body(), "65536-byte cap"),
    "short-body": (hostile.short_body(), "shorter than promised"),
    "150-headers": (hostile.many_headers(), "not a valid HTTP answer"),
    "64KiB-header-line": (hostile.long_header_line(), "not a valid HTTP answer"),
    "not-http": (hostile.garbage(), "not a valid HTTP answer"),
    "http-404": (hostile.answer(404, b"<h1>Not Found</h1>"), "HTTP 404"),
    "http-500": (hostile.answer(500, b'{"ok": true}'), "HTTP 500"),
    "ok-false": (hostile.answer(200, b'{"ok": false, "frame": 3}'), '"ok": true'),
    "ok-string": (hostile.answer(200, b'{"ok": "true"}'), '"ok": true'),
    "json-array": (hostile.answer(200, b'[{"ok": true}]'), '"ok": true'),
    "json-string": (hostile.answer(200, b'"ok"'), '"ok": true'),
    "not-utf8": (hostile.answer(200, b'{"ok": true, "n": "\xff\xfe"}'), "UTF-8"),
    "redirect": (hostile.redirect("http://127.0.0.1:1/health"), "redirect"),
}


@pytest.mark.parametrize("name", NOT_A_GAME)
def test_unusable_health_answers_are_not_a_game_surface(serve: Any, name: str) -> None:
    behaviour, reason = NOT_A_GAME[name]
    peer = serve(behaviour)
    error, elapsed = raises(NotAGameSurface, GameClient(peer.port, timeout_ms=2000).health)
    assert elapsed < BOUND_S
    assert f"http://127.0.0.1:{peer.port}" in error.message
    assert "GET /health" in error.message.split("\n")[0], error.message
    assert reason in error.message
    assert error.fields["path"] == "/health"


def test_health_nested_just_under_the_parser_limit_is_a_clear_error(serve: Any) -> None:
    """Parsed but absurd: whatever depth parses, reporting it must not recurse out."""
    for depth in (500, 900, 990):
        body = b"[" * depth + b"]" * depth
        peer = serve(hostile.answer(200, body))
        raises(NotAGameSurface, GameClient(peer.port).health)


def test_non_json_numbers_reach_the_caller_as_none(serve: Any) -> None:
    body = b'{"ok": true, "frame": 4, "x": NaN, "y": Infinity, "z": -Infinity, "l": [NaN]}'
    assert GameClient(serve(hostile.answer(200, body)).port).health() == {
        "ok": True, "frame": 4, "x": None, "y": None, "z": None, "l": [None]}
    assert GameClient(serve(hostile.answer(200, body)).port).state()["y"] is None


# --------------------------------------------------------------------------- hostile /state, /command, /tools

STATE_BROKEN = {
    "invalid-json": (hostile.answer(200, b'{"frame": '), "not valid JSON"),
    "deep-nesting-100k": (hostile.deep_nesting(100_000), "nested too deeply"),
    "json-array": (hostile.answer(200, b"[1, 2]"), "JSON list, not an object"),
    "http-500": (hostile.answer(500, b"{}"), "HTTP 500"),
    "short-body": (hostile.short_body(b'{"frame": 1}', 50), "shorter than promised"),
    "not-http": (hostile.garbage(), "not a valid HTTP answer"),
    "redirect": (hostile.redirect("http://127.0.0.1:1/state"), "redirect"),
}


@pytest.mark.parametrize("name", STATE_BROKEN)
def test_unusable_state_answers(serve: Any, name: str) -> None:
    behaviour, reason = STATE_BROKEN[name]
    peer = serve(behaviour)
    error, _ = raises(NotAGameSurface, GameClient(peer.port).state)
    assert f"http://127.0.0.1:{peer.port}" in error.message
    assert "GET /state" in error.message
    assert reason in error.message
    assert error.fields["path"] == "/state"


def test_state_size_cap(serve: Any) -> None:
    peer = serve(hostile.endless_body())
    error, elapsed = raises(NotAGameSurface, lambda: GameClient(peer.port).state(max_bytes=10_000))
    assert "10000-byte cap" in error.message and "GET /state" in error.message
    assert elapsed < BOUND_S


def test_the_size_cap_through_an_opener() -> None:
    """A small cap passed down by the opener path gives the same clear error."""
    seen: list[int] = []

    def opener(url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        seen.append(max_bytes)
        raise TransportError("too-large", f"the body passed the {max_bytes}-byte cap")

    error, _ = raises(NotAGameSurface, GameClient(7777, opener=opener).health)
    assert seen == [client_module.HEALTH_MAX_BYTES]
    assert f"{client_module.HEALTH_MAX_BYTES}-byte cap" in error.message


@pytest.mark.parametrize("behaviour,reason", [
    (hostile.answer(200, b"queued!"), "not valid JSON"),
    (hostile.answer(404, b"<h1>Not Found</h1>"), "HTTP 404"),
    (hostile.answer(200, b"[true]"), "JSON list, not an object"),
    (hostile.garbage(), "not a valid HTTP answer"),
], ids=["not-json", "http-404", "json-array", "not-http"])
def test_unusable_command_answers(serve: Any, behaviour: Any, reason: str) -> None:
    peer = serve(behaviour)
    error, _ = raises(NotAGameSurface, lambda: GameClient(peer.port).command("noop"))
    assert "GET /command" in error.message and reason in error.message
    assert error.fields["path"] == "/command"


def test_tools_404_is_none_and_other_failures_are_errors(serve: Any) -> None:
    assert GameClient(serve(hostile.answer(404, b"nope")).port).tools() is None
    error, _ = raises(NotAGameSurface, GameClient(serve(hostile.answer(500, b"{}")).port).tools)
    assert "GET /tools returned HTTP 500" in error.message
    error, _ = raises(NotAGameSurface, GameClient(serve(hostile.answer(200, b"{")).port).tools)
    assert "GET /tools" in error.message and "not valid JSON" in error.message


# --------------------------------------------------------------------------- redirects and proxies

def test_a_redirect_is_never_followed(serve: Any) -> None:
    target = serve(hostile.answer(200, b'{"ok": true, "frame": 1}'))
    peer = serve(hostile.redirect(f"http://127.0.0.1:{target.port}/health"))
    client = GameClient(peer.port)
    error, _ = raises(NotAGameSurface, client.health)
    assert "302" in error.message and str(target.port) in error.message
    raises(NotAGameSurface, client.state)
    assert target.accepted == 0
    assert GameClient(target.port).health()["ok"] is True  # it would have noticed a visit
    assert target.accepted == 1


def test_proxy_environment_is_never_used(serve: Any, game: FakeGame, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = serve(hostile.silent())
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    client = GameClient(game.port, timeout_ms=2000)
    assert client.health()["ok"] is True
    assert client.command_and_sync("add_score", {"n": 2})["state"]["game"]["score"] == 2
    assert proxy.accepted == 0
    assert "/health" in game.requests


# --------------------------------------------------------------------------- against the fake game

def test_health_state_and_tools(game: FakeGame) -> None:
    client = GameClient(game.port)
    health = client.health()
    assert health["ok"] is True and isinstance(health["frame"], int)
    assert client.known.health_has_completed_id is False
    state = client.state()
    assert state["game"]["score"] == 0 and state["ui"]["screen"] == "GameScreen"
    tools = client.tools()
    assert tools is not None and tools["game"]["name"] == "Fake Game"
    assert client.stats["stateFetches"] == 1 and client.stats["requests"] == 3


def test_tools_404_is_none_against_the_fake() -> None:
    with FakeGame(manifest=None) as fake:
        assert GameClient(fake.port).tools() is None


def test_command_sends_cmd_and_arguments_as_query_parameters(game: FakeGame) -> None:
    client = GameClient(game.port)
    answer = client.command("spawn_thing", {"type": "cherry", "name": "drop"})
    assert answer["accepted"] is True and isinstance(answer["commandId"], int)
    applied = wait_until(lambda: [a for a in game.applied if a[0] == "spawn_thing"])
    assert applied[0][1] == {"type": "cherry", "name": "drop"}
    assert applied[0][2].startswith("fakegame-")  # applied on the game thread
    assert "spawn:cherry:drop" in [e["m"] for e in game.snapshot()["events"]]


def test_argument_formatting(game: FakeGame) -> None:
    client = GameClient(game.port)
    client.command_and_sync("noop", {"on": True, "off": False, "n": 3, "x": -1.5, "big": 1e20,
                                     "d": {"a": [1, "b"]}, "none": None, "s": "a b&c=d", "e": ""})
    applied = [a for a in game.applied if a[0] == "noop"]
    assert applied[0][1] == {"on": "true", "off": "false", "n": "3", "x": "-1.5", "big": "1e+20",
                             "d": '{"a":[1,"b"]}', "none": "null", "s": "a b&c=d", "e": ""}


def test_command_formatting_on_the_wire() -> None:
    urls: list[str] = []

    def opener(url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        urls.append(url)
        return HttpResponse(200, b'{"accepted": true, "commandId": 1, "frame": 1}')

    GameClient(7777, opener=opener).command("spawn_thing", {"name": "x y", "flag": True})
    parts = urllib.parse.urlsplit(urls[0])
    assert parts.path == "/command"
    assert urllib.parse.parse_qsl(parts.query) == [("cmd", "spawn_thing"), ("name", "x y"), ("flag", "true")]


def test_an_argument_called_cmd_is_refused(game: FakeGame) -> None:
    error, _ = raises(BridgeUsageError, lambda: GameClient(game.port).command("noop", {"cmd": "close"}))
    assert "'cmd'" in error.message
    assert "/command" not in game.requests
    raises(BridgeUsageError, lambda: GameClient(game.port).command(""))


def test_a_rejected_command(game: FakeGame) -> None:
    error, _ = raises(CommandRejected, lambda: GameClient(game.port).command("warp", {"to": 3}))
    assert error.render().startswith("BridgeUsageError: ")  # its own type, rendered as before
    assert "rejected command 'warp'" in error.message and "unknown command: warp" in error.message
    assert error.fields["rejected"] is True
    assert error.fields["command"] == "warp"
    assert error.fields["answer"]["accepted"] is False
    assert "add_score" in error.fields["answer"]["commands"]


def test_command_and_sync_confirms_with_completed_command_id(game: FakeGame) -> None:
    client = GameClient(game.port)
    result = client.command_and_sync("add_score", {"n": 7})
    assert result["confirmation"] == "completedCommandId"
    assert result["state"]["completedCommandId"] >= result["commandId"]
    assert result["state"]["game"]["score"] == 7
    assert result["answer"]["accepted"] is True
    again = client.command_and_sync("add_score", {"n": 1})
    assert again["commandId"] == result["commandId"] + 1
    assert again["state"]["game"]["score"] == 8


def test_confirmation_waits_out_a_delayed_apply() -> None:
    with FakeGame(apply_delay_frames=30) as fake:
        result = GameClient(fake.port).command_and_sync("add_score", {"n": 5}, timeout_ms=5000)
    assert result["confirmation"] == "completedCommandId"
    assert result["state"]["frame"] >= result["answer"]["frame"] + 31
    assert result["state"]["game"]["score"] == 5


def test_frames_advanced_without_completed_command_id() -> None:
    with FakeGame(publish_completed_id=False) as fake:
        result = GameClient(fake.port).command_and_sync("add_score", {"n": 3})
    assert result["confirmation"] == "frames-advanced"
    assert "completedCommandId" not in result["state"]
    assert result["state"]["frame"] >= result["answer"]["frame"] + 2
    assert result["state"]["game"]["score"] == 3


def test_health_completed_id_fetches_state_once_per_call() -> None:
    # A /state that costs more than a /health (here 2 MB): /health is polled, /state fetched once.
    with FakeGame(health_completed_id=True, hz=200, padding_bytes=2_000_000) as fake:
        client = GameClient(fake.port)
        for n in range(1, 4):
            before = client.stats["stateFetches"]
            result = client.command_and_sync("add_score", {"n": 1})
            assert client.stats["stateFetches"] - before == 1
            assert result["confirmation"] == "completedCommandId"
            assert result["state"]["game"]["score"] == n
        assert client.known.health_has_completed_id is True


def test_sync_false_returns_at_once() -> None:
    with FakeGame(apply=False) as fake:
        client = GameClient(fake.port)
        result = client.command_and_sync("screenshot", sync=False, timeout_ms=100)
        assert result["confirmation"] == "not-waited"
        assert result["state"] is None and result["commandId"] == 1
        assert client.stats["stateFetches"] == 0


def test_a_game_that_never_applies_times_out() -> None:
    with FakeGame(apply=False) as fake:
        client = GameClient(fake.port)
        started = time.monotonic()
        error, _ = raises(CommandTimeout, lambda: client.command_and_sync("add_score", {"n": 1}, timeout_ms=300))
        assert time.monotonic() - started < BOUND_S
    assert "'add_score'" in error.message and "300ms" in error.message
    assert error.fields["commandId"] == 1
    assert error.fields["lastCompletedCommandId"] == 0
    assert isinstance(error.fields["lastFrame"], int)
    assert error.fields["timeoutMs"] == 300


def test_a_tight_deadline_is_a_command_timeout_not_offline() -> None:
    """The last poll gets only what is left of the deadline; running out there is the
    command's timeout, not a frozen game."""
    with FakeGame(apply=False) as fake:
        client = GameClient(fake.port)
        timeouts = 0
        for _ in range(40):
            try:
                client.command_and_sync("noop", timeout_ms=15)
            except GameOffline as exc:
                # A machine too busy to answer the /command itself within 15 ms is a game
                # that did not answer: that is not the case under test, the polls are.
                assert exc.endpoint == "/command", exc.render()
                continue
            except CommandTimeout:
                timeouts += 1
                continue
            raise AssertionError("a command the game never applies was confirmed")
        assert timeouts >= 1


@pytest.mark.parametrize("health_completed_id", [False, True], ids=["state-polling", "health-polling"])
def test_a_restart_while_pending_is_reported(health_completed_id: bool) -> None:
    with FakeGame(apply=False, start_frame=100_000, health_completed_id=health_completed_id) as fake:
        restarted: list[bool] = []

        def sleep(seconds: float) -> None:
            if not restarted:
                fake.restart_frames()
                restarted.append(True)
            time.sleep(seconds)

        client = GameClient(fake.port, sleep=sleep)
        client.health()
        error, elapsed = raises(CommandTimeout, lambda: client.command_and_sync("add_score", timeout_ms=2000))
    assert restarted
    assert elapsed < BOUND_S
    assert "restarted" in error.message and "'add_score'" in error.message
    assert error.fields["lastFrame"] < 100_000


def test_close_and_wait_returns_when_the_port_goes_quiet() -> None:
    fake = FakeGame().start()
    try:
        client = GameClient(fake.port)
        assert client.port_is_quiet() is False
        assert client.close_and_wait(3000) is True
        assert fake.closed.is_set()
        assert client.port_is_quiet() is True
        raises(GameOffline, client.health)
    finally:
        fake.stop()


def test_close_on_a_game_that_ignores_it_returns_false_after_grace() -> None:
    with FakeGame(apply=False) as fake:
        client = GameClient(fake.port)
        started = time.monotonic()
        assert client.close_and_wait(300) is False
        elapsed = time.monotonic() - started
        assert 0.25 < elapsed < BOUND_S
        assert client.health()["ok"] is True


def test_close_on_a_frozen_game_returns_false(serve: Any) -> None:
    peer = serve(hostile.silent())
    started = time.monotonic()
    assert GameClient(peer.port, timeout_ms=200).close_and_wait(300) is False
    assert time.monotonic() - started < BOUND_S


# --------------------------------------------------------------------------- an injected opener

class ScriptedGame:
    """A game that exists only as an opener function: no socket anywhere."""

    def __init__(self) -> None:
        self.frame = 10
        self.completed = 0
        self.next_id = 0
        self.score = 0
        self.pending: list[tuple[int, int]] = []
        self.urls: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        import json
        self.urls.append(url)
        parts = urllib.parse.urlsplit(url)
        assert parts.netloc == "127.0.0.1:7777" and timeout > 0 and max_bytes > 0
        with self.lock:
            self.frame += 1  # every request is a frame, so a command lands two polls later
            for cid, n in [p for p in self.pending if p[0] <= self.completed + 1]:
                self.score += n
                self.completed = cid
            self.pending = [p for p in self.pending if p[0] > self.completed]
            if parts.path == "/health":
                doc: Any = {"ok": True, "frame": self.frame}
            elif parts.path == "/state":
                doc = {"frame": self.frame, "completedCommandId": self.completed, "game": {"score": self.score}}
            elif parts.path == "/command":
                query = dict(urllib.parse.parse_qsl(parts.query))
                self.next_id += 1
                self.pending.append((self.next_id, int(query.get("n", "1"))))
                doc = {"accepted": True, "commandId": self.next_id, "frame": self.frame}
            else:
                return HttpResponse(404, b"{}")
        return HttpResponse(200, json.dumps(doc).encode(), {"content-type": "application/json"})


def test_a_client_driven_by_an_opener_alone() -> None:
    scripted = ScriptedGame()
    client = GameClient(7777, opener=scripted)
    assert client.health()["ok"] is True
    assert client.state()["game"]["score"] == 0
    result = client.command_and_sync("add_score", {"n": 4})
    assert result["confirmation"] == "completedCommandId"
    assert result["state"]["game"]["score"] == 4
    assert client.tools() is None
    assert all(url.startswith("http://127.0.0.1:7777/") for url in scripted.urls)


@pytest.mark.parametrize("exc", [OSError("no route"), ConnectionResetError(104, "reset"), TimeoutError("slow")])
def test_an_opener_raising_oserror_is_offline(exc: OSError) -> None:
    def opener(url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        raise exc

    client = GameClient(7777, opener=opener)
    for call in (client.health, client.state, lambda: client.command("noop")):
        error, _ = raises(GameOffline, call)
        assert "GET /" in error.message


@pytest.mark.parametrize("kind,expected", [("refused", GameOffline), ("timeout", GameOffline),
                                           ("reset", GameOffline), ("too-large", NotAGameSurface),
                                           ("malformed", NotAGameSurface)])
def test_each_transport_kind_maps_to_one_error(kind: str, expected: type[BridgeError]) -> None:
    def opener(url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        raise TransportError(kind, "detail text")

    raises(expected, GameClient(7777, opener=opener).health)


def test_a_game_that_freezes_while_a_command_is_pending_is_a_command_timeout() -> None:
    """Each poll is given all that is left of the command's deadline, so a poll that
    times out has reached it: the answer is CommandTimeout, not GameOffline (a clock
    with sub-millisecond steps makes the rounding of that remainder matter)."""
    now = [0.0]
    state_polls = [0]

    def opener(url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        path = urllib.parse.urlsplit(url).path
        if path == "/state":
            state_polls[0] += 1
            if state_polls[0] > 1:
                now[0] += timeout  # frozen: the request uses up its whole timeout, no more
                raise TransportError("timeout", "the answer was not complete")
        now[0] += 0.0003
        if path == "/command":
            return HttpResponse(200, b'{"accepted": true, "commandId": 1, "frame": 1}')
        if path == "/health":
            return HttpResponse(200, b'{"ok": true, "frame": 1}')
        return HttpResponse(200, b'{"frame": 1, "completedCommandId": 0}')

    def sleep(seconds: float) -> None:
        now[0] += seconds

    client = GameClient(7777, opener=opener, clock=lambda: now[0], sleep=sleep)
    error, _ = raises(CommandTimeout, lambda: client.command_and_sync("noop", timeout_ms=1000))
    assert state_polls[0] == 2
    assert error.fields["lastCompletedCommandId"] == 0 and error.fields["lastFrame"] == 1


def test_health_polling_is_not_slowed_by_an_expensive_state() -> None:
    """With completedCommandId in /health, waits between /health polls stay short even
    when /state is slow (its cost only spaces /state fetches)."""
    now = [0.0]
    sleeps: list[float] = []
    applied_at = [None]  # type: list[float | None]

    def opener(url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        path = urllib.parse.urlsplit(url).path
        if path == "/state":
            now[0] += 0.05  # a 50 ms /state
        done = applied_at[0] is not None and now[0] >= applied_at[0]
        completed = 1 if done else 0
        if path == "/command":
            applied_at[0] = now[0] + 0.2
            return HttpResponse(200, b'{"accepted": true, "commandId": 1, "frame": 1}')
        body = {"/health": f'{{"ok": true, "frame": 2, "completedCommandId": {completed}}}',
                "/state": f'{{"frame": 2, "completedCommandId": {completed}}}'}[path]
        return HttpResponse(200, body.encode())

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    client = GameClient(7777, opener=opener, clock=lambda: now[0], sleep=sleep)
    client.state()
    client.health()
    assert client.known.state_cost_s >= 0.05
    result = client.command_and_sync("noop", timeout_ms=5000)
    assert result["confirmation"] == "completedCommandId"
    assert max(sleeps) <= polls_module.MAX_CHEAP_INTERVAL_S
    assert now[0] - applied_at[0] <= 0.05 + 2 * polls_module.MAX_CHEAP_INTERVAL_S


# --------------------------------------------------------------------------- loopback only

@pytest.mark.parametrize("host", ["10.0.0.1", "localhost", "example.com", "0.0.0.0", "2130706433", ""])
def test_only_loopback_addresses(host: str) -> None:
    def opener(url: str, *, timeout: float, max_bytes: int) -> HttpResponse:
        raise AssertionError(f"a connection was attempted to {url}")

    error, _ = raises(BridgeUsageError, lambda: GameClient(7777, host=host, opener=opener))
    assert "loopback" in error.message


def test_loopback_literals_are_accepted() -> None:
    assert GameClient(7777, host="127.0.0.1").base_url == "http://127.0.0.1:7777"
    assert GameClient(7777, host="127.1.2.3").base_url == "http://127.1.2.3:7777"
    assert GameClient(7777, host="::1").base_url == "http://[::1]:7777"


@pytest.mark.parametrize("port", [0, -1, 65536, 70000])
def test_ports_outside_the_range_are_refused(port: int) -> None:
    error, _ = raises(BridgeUsageError, lambda: GameClient(port))
    assert str(port) in error.message and "1-65535" in error.message
