"""The game kit under a real game-loop thread: commands, state, manifest, hardening,
one-send answers, close and the registry entry."""

from __future__ import annotations

import http.client
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator

import pytest

from peers.fakegame import wait_until
from game_bridge_mcp.wire.client import GameClient
from game_bridge_mcp.game import GameBridge, RawJson, debug_port_from_argv, encode_state
from game_bridge_mcp.game.server.http import is_loopback_host_header
from game_bridge_mcp.registry import read_registry
from game_bridge_mcp.wire.transport import loopback_opener

pytestmark = pytest.mark.timeout(30)


class World:
    """A tiny game whose commands record the thread they ran on."""

    def __init__(self) -> None:
        self.score = 0
        self.threads: list[str] = []
        self.closed_on: str | None = None
        self.ticks = 0

    def update(self) -> None:
        self.ticks += 1


def make_bridge(world: World, **kwargs: Any) -> GameBridge:
    kwargs.setdefault("register", False)
    bridge = GameBridge("Kit Test", "2.0", state=lambda: {"game": {"score": world.score, "ticks": world.ticks}},
                        on_close=lambda: setattr(world, "closed_on", threading.current_thread().name),
                        toolsets={"play": "Play the test game."}, **kwargs)

    @bridge.command(toolset="play")
    def add(n: int, note: Annotated[str, "a note"] = "", double: bool = False) -> None:
        """Add n points.

        Args:
            n: How many points.
        """
        world.threads.append(threading.current_thread().name)
        world.score += n * (2 if double else 1)
        bridge.event(f"add:{n}")

    @bridge.command(toolset="flow", description="Scale the score.", sync=False)
    def scale(factor: float = 1.5) -> None:
        world.threads.append(threading.current_thread().name)
        world.score = int(world.score * factor)

    @bridge.command(toolset="flow")
    def explode() -> None:
        """Raise on purpose."""
        raise RuntimeError("boom")

    @bridge.command(listed=False)
    def secret(**extra: str) -> None:
        bridge.event("secret", **extra)

    return bridge


@contextmanager
def running(bridge: GameBridge, world: World, hz: float = 500.0) -> Iterator[int]:
    port = bridge.start(0)
    loop = threading.Thread(target=bridge.run, args=(world.update,), kwargs={"hz": hz},
                            name="game-loop", daemon=True)
    loop.start()
    try:
        yield port
    finally:
        bridge.request_stop()
        loop.join(5)
        bridge.stop()
        assert not loop.is_alive()


def get(port: int, path: str) -> tuple[int, Any]:
    response = loopback_opener(f"http://127.0.0.1:{port}{path}", timeout=5)
    return response.status, json.loads(response.body)


def raw_get(port: int, path: str, headers: dict[str, str]) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest("GET", path, skip_host="Host" in headers)
        for key, value in headers.items():
            conn.putheader(key, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.fixture
def game() -> Iterator[tuple[GameBridge, World, int]]:
    world = World()
    bridge = make_bridge(world)
    with running(bridge, world) as port:
        yield bridge, world, port


# --------------------------------------------------------------------------- manifest

def test_manifest_comes_from_the_decorated_functions() -> None:
    bridge = make_bridge(World())
    doc = bridge.manifest()
    assert doc["game"] == {"name": "Kit Test", "version": "2.0", "protocol": 1}
    toolsets = {ts["name"]: ts for ts in doc["toolsets"]}
    assert set(toolsets) == {"play", "flow"}
    assert toolsets["play"]["description"] == "Play the test game."
    add = toolsets["play"]["tools"][0]
    assert add["name"] == "add" and add["description"] == "Add n points."
    assert add["args"] == [
        {"name": "n", "type": "integer", "description": "How many points.", "required": True, "default": None},
        {"name": "note", "type": "string", "description": "a note", "required": False, "default": ""},
        {"name": "double", "type": "boolean", "description": "", "required": False, "default": False},
    ]
    scale = next(t for t in toolsets["flow"]["tools"] if t["name"] == "scale")
    assert scale["sync"] is False and scale["description"] == "Scale the score."
    assert scale["args"][0]["type"] == "number" and scale["args"][0]["default"] == 1.5
    listed = {t["name"] for ts in doc["toolsets"] for t in ts["tools"]}
    assert "secret" not in listed and "close" not in listed and "noop" not in listed
    assert set(doc["passthrough"]["examples"]) == {"close", "noop", "secret"}
    assert bridge.commands() == ["add", "close", "explode", "noop", "scale", "secret"]


def test_manifest_is_read_cleanly_by_the_bridge_normaliser() -> None:
    from game_bridge_mcp.manifest.reader import normalise_manifest

    manifest = normalise_manifest(make_bridge(World()).manifest())
    assert not manifest.dropped and not manifest.problems
    add = manifest.find("add")
    assert add is not None and add.input_schema["required"] == ["n"]
    assert add.input_schema["properties"]["n"]["type"] == "integer"


@pytest.mark.parametrize("define, error", [
    ("def f(port: int): pass", ValueError),
    ("def f(cmd: str): pass", ValueError),
    ("def f(x: set): pass", TypeError),
    ("def f(x, /): pass", TypeError),
    ("def close(): pass", ValueError),
])
def test_unservable_commands_are_refused_at_registration(define: str, error: type) -> None:
    namespace: dict[str, Any] = {}
    exec(define, namespace)  # noqa: S102 - test input
    func = namespace.get("f") or namespace["close"]
    with pytest.raises(error):
        GameBridge(register=False).command(func)


# --------------------------------------------------------------------------- commands

def test_commands_run_on_the_game_thread_and_publish_completed_id(game: Any) -> None:
    bridge, world, port = game
    status, answer = get(port, "/command?cmd=add&n=5&double=true")
    assert status == 200 and answer["accepted"] is True
    assert answer["commandId"] == 1 and isinstance(answer["frame"], int)
    state = wait_until(lambda: (s := get(port, "/state")[1])["completedCommandId"] >= 1 and s)
    assert state["game"]["score"] == 10
    assert {"m": "add:5"} .items() <= state["events"][-1].items()
    assert state["commandResults"] == [{"id": 1, "ok": True}]
    status, answer = get(port, "/command?cmd=scale&factor=2.5")
    wait_until(lambda: get(port, "/health")[1]["completedCommandId"] >= answer["commandId"])
    assert world.score == 25
    assert world.threads == ["game-loop", "game-loop"]
    health = get(port, "/health")[1]
    assert health["ok"] is True and health["completedCommandId"] == 2 and health["frame"] >= state["frame"]


def test_a_failing_command_completes_and_reports_the_error(game: Any) -> None:
    _bridge, _world, port = game
    answer = get(port, "/command?cmd=explode")[1]
    state = wait_until(lambda: (s := get(port, "/state")[1])["completedCommandId"] >= answer["commandId"] and s)
    assert state["commandResults"][-1] == {"id": answer["commandId"], "ok": False, "error": "RuntimeError: boom"}


def test_frame_increases_and_sim_frame_is_published(game: Any) -> None:
    bridge, _world, port = game
    first = get(port, "/health")[1]["frame"]
    wait_until(lambda: get(port, "/health")[1]["frame"] > first + 3)
    assert "simFrame" not in get(port, "/state")[1]
    bridge.sim_frame = 42
    assert get(port, "/state")[1]["simFrame"] == 42


@pytest.mark.parametrize("query, fragment", [
    ("cmd=add&n=abc", "argument 'n' of 'add' must be an integer, got 'abc'"),
    ("cmd=add&n=1.5", "must be an integer"),
    ("cmd=add", "'add' needs argument 'n'"),
    ("cmd=add&n=1&double=maybe", "must be a boolean"),
    ("cmd=scale&factor=inf", "must be a finite number"),
    ("cmd=add&n=1&n=2", "was given 2 times"),
    ("cmd=add&n=1&colour=red", "'add' has no argument 'colour'"),
])
def test_bad_argument_values_are_refused_with_a_clear_answer(game: Any, query: str, fragment: str) -> None:
    _bridge, world, port = game
    status, answer = get(port, "/command?" + query)
    assert status == 400 and answer["accepted"] is False
    assert fragment in answer["error"]
    assert answer["command"] in ("add", "scale") and isinstance(answer["args"], list)
    assert get(port, "/health")[1]["completedCommandId"] == 0 and world.threads == []


def test_unknown_and_missing_commands_list_the_accepted_ones(game: Any) -> None:
    _bridge, _world, port = game
    for query in ("cmd=fly", "", "cmd=", "cmd=add&cmd=scale"):
        status, answer = get(port, "/command?" + query)
        assert status == 400 and answer["accepted"] is False and answer["error"]
        assert answer["commands"] == ["add", "close", "explode", "noop", "scale", "secret"]
    assert "unknown command 'fly'" in get(port, "/command?cmd=fly")[1]["error"]


def test_extra_arguments_reach_a_kwargs_command_as_strings(game: Any) -> None:
    _bridge, _world, port = game
    answer = get(port, "/command?cmd=secret&colour=red")[1]
    state = wait_until(lambda: (s := get(port, "/state")[1])["completedCommandId"] >= answer["commandId"] and s)
    assert {"m": "secret", "colour": "red"}.items() <= state["events"][-1].items()


def test_driven_through_the_game_client_with_strong_confirmation(game: Any) -> None:
    _bridge, world, port = game
    client = GameClient(port, timeout_ms=5000)
    client.health()
    assert client.known.health_has_completed_id is True
    result = client.command_and_sync("add", {"n": 3})
    assert result["confirmation"] == "completedCommandId"
    assert result["state"]["game"]["score"] == 3 and world.score == 3


def test_events_are_bounded_newest_last() -> None:
    world = World()
    bridge = make_bridge(world, max_events=5)
    with running(bridge, world) as port:
        for i in range(20):
            bridge.event(f"e{i}")
        events = get(port, "/state")[1]["events"]
    assert [e["m"] for e in events] == ["e15", "e16", "e17", "e18", "e19"]


def test_unknown_endpoint_and_other_methods(game: Any) -> None:
    _bridge, _world, port = game
    status, body = get(port, "/nope")
    assert status == 404 and "/health" in body["endpoints"]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", "/command?cmd=add&n=1", body=b"")
        response = conn.getresponse()
        assert response.status == 405 and "GET" in json.loads(response.read())["error"]
    finally:
        conn.close()


# --------------------------------------------------------------------------- state encoding

def test_state_is_strict_json_with_raw_fragments() -> None:
    body = encode_state({"a": float("nan"), "b": [float("inf"), 1.5], "raw": RawJson('[1,{"x":2}]'),
                         "path": Path("/tmp/x"), "tags": {"b", "a"}})
    assert json.loads(body, parse_constant=lambda c: pytest.fail(c)) == {
        "a": None, "b": [None, 1.5], "raw": [1, {"x": 2}], "path": "/tmp/x", "tags": ["a", "b"]}
    with pytest.raises(TypeError, match="object"):
        encode_state({"x": object()})
    # a command's result: the plain encoder's bytes where it is plain JSON, encode_state's otherwise
    from game_bridge_mcp.game.kit.state import encode_plain

    for doc in ({"simFrame": 3, "frames": 1}, [1, "\u00e9", None, True, 2.5], "x", {"nan": float("nan")},
                {"raw": RawJson("[1]"), "tags": {"a"}, "path": Path("/tmp/x")}):
        assert encode_plain(doc) == encode_state(doc)
    with pytest.raises(TypeError, match="object"):
        encode_plain({"x": object()})


def test_command_results_encoded_once_each_are_the_bytes_encoded_afresh() -> None:
    """/state's commandResults come from each entry's JSON kept from the first encoding; the
    bytes are those of encoding the entries afresh, through the ring's wrap, failures,
    results of every shape, and entries published out of order."""
    from game_bridge_mcp.game.kit.outcomes import Outcomes, failure, success

    outcomes = Outcomes(keep=16)

    def same() -> None:
        fresh = encode_state({"commandResults": outcomes.recent()})
        assert encode_state({"commandResults": outcomes.recent_encoded()}) == fresh

    same()
    values: list[Any] = [None, {"simFrame": 3, "frames": 1}, [1, 2.5, "x"], "t\u00e9xt \"q\"", {"nan": float("nan")},
                         object(), "x" * 20000]  # (the last two: a note says the result was left out)
    for command_id in range(1, 60):
        if command_id % 7 == 0:  # published once the next one finishes, both together
            held = command_id
            continue
        entry = failure(command_id, "no") if command_id % 5 == 0 else success(command_id, values[(command_id // 2) % len(values)])
        outcomes.finish(entry)
        if command_id % 7 == 1 and command_id > 1:
            outcomes.finish(success(held, {"late": held}))
        same()
        assert outcomes.recent_encoded() is outcomes.recent_encoded()  # kept until the next completion
    assert len(outcomes.recent()) == 16 and outcomes.completed == 59


def test_a_broken_state_function_answers_500_and_the_game_keeps_serving() -> None:
    world = World()
    bridge = make_bridge(world)
    bridge.state_fn = lambda: {"bad": object()}
    with running(bridge, world) as port:
        status, body = get(port, "/state")
        assert status == 500 and body["ok"] is False and "not JSON" in body["error"]
        assert get(port, "/health")[0] == 200


# --------------------------------------------------------------------------- hardening

@pytest.mark.parametrize("headers", [
    {"Host": "evil.example"},
    {"Host": "evil.example:{port}"},
    {"Host": "127.0.0.1:1"},
    {"Host": "2130706433:{port}"},
    {"Host": "127.0.0.1:{port}", "Origin": "http://evil.example"},
    {"Host": "127.0.0.1:{port}", "Origin": "null"},
    {"Host": "localhost:{port}", "Sec-Fetch-Site": "cross-site"},
])
def test_browser_and_rebinding_requests_are_refused_without_side_effect(game: Any, headers: dict) -> None:
    _bridge, world, port = game
    headers = {k: v.format(port=port) for k, v in headers.items()}
    status, body = raw_get(port, "/command?cmd=add&n=7", headers)
    assert status == 403 and body["accepted"] is False and body["error"]
    assert raw_get(port, "/state", headers)[0] == 403
    # Nothing was queued: the next accepted command gets id 1, and nothing ran.
    assert get(port, "/command?cmd=noop")[1]["commandId"] == 1
    wait_until(lambda: get(port, "/health")[1]["completedCommandId"] == 1)
    assert world.score == 0 and world.threads == []


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "127.1.2.3:{port}",
                                  "[::1]:{port}", "LOCALHOST:{port}"])
def test_loopback_host_headers_are_accepted(game: Any, host: str) -> None:
    _bridge, _world, port = game
    status, body = raw_get(port, "/health", {"Host": host.format(port=port), "Sec-Fetch-Site": "none"})
    assert status == 200 and body["ok"] is True


def test_host_header_rules() -> None:
    assert is_loopback_host_header("127.0.0.1:80", 80) and is_loopback_host_header("localhost", 80)
    for bad in ("localhost", "[::1", "[::1]x", "::1:7", "0x7f.1:7", "127.0.0.1:7:7", "", "[127.0.0.1]:7",
                "localhost.:7", "10.0.0.1:7"):
        assert not is_loopback_host_header(bad, 7), bad


def test_the_server_binds_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        GameBridge(register=False, host="0.0.0.0").start(0)
    with pytest.raises(ValueError, match="loopback"):
        GameBridge(register=False, host="localhost").start(0)


# --------------------------------------------------------------------------- one send, keep-alive

def test_each_answer_is_one_write_and_keep_alive_works(game: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _bridge, _world, port = game
    writes: list[int] = []
    original = socketserver._SocketWriter.write  # type: ignore[attr-defined]

    def counting_write(self: Any, data: bytes) -> int:
        writes.append(len(data))
        return original(self, data)

    monkeypatch.setattr(socketserver._SocketWriter, "write", counting_write)  # type: ignore[attr-defined]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.connect()
    first_socket = conn.sock
    try:
        for path in ["/health", "/state", "/tools", "/command?cmd=noop", "/command?cmd=fly"] * 4:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            assert response.status in (200, 400) and json.loads(body)
            assert response.version == 11 and not response.will_close
        assert conn.sock is first_socket  # the same connection served all 20
    finally:
        conn.close()
    assert len(writes) == 20


def test_a_whole_answer_arrives_in_one_segment_on_a_raw_socket(game: Any) -> None:
    _bridge, _world, port = game
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        data = sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    assert len(body) == length and json.loads(body)["ok"] is True


# --------------------------------------------------------------------------- close and the registry

def test_close_runs_teardown_on_the_game_thread_stops_serving_and_removes_the_entry(tmp_path: Path) -> None:
    world = World()
    environ = {"GAME_BRIDGE_INSTANCES": str(tmp_path)}
    bridge = make_bridge(world, register=True, environ=environ)
    port = bridge.start(0)
    try:
        entries = read_registry(tmp_path).entries
        assert [(e.port, e.pid, e.cwd, e.name, e.version, e.protocol) for e in entries] == [
            (port, os.getpid(), os.getcwd(), "Kit Test", "2.0", 1)]
        loop = threading.Thread(target=bridge.run, args=(world.update,), kwargs={"hz": 500},
                                name="game-loop", daemon=True)
        loop.start()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)  # an idle keep-alive client
        conn.request("GET", "/health")
        conn.getresponse().read()
        status, answer = get(port, "/command?cmd=close")
        assert status == 200 and answer["accepted"] is True
        loop.join(5)
        assert not loop.is_alive() and world.closed_on == "game-loop"
        assert not bridge.running and bridge.closing
        with pytest.raises(Exception):
            loopback_opener(f"http://127.0.0.1:{port}/health", timeout=1)
        with pytest.raises((http.client.HTTPException, OSError)):  # the kept-alive connection was closed too
            conn.request("GET", "/health")
            conn.getresponse().read()
        conn.close()
        assert read_registry(tmp_path).entries == []
    finally:
        bridge.stop()


def test_commands_after_close_is_applied_are_refused(game: Any) -> None:
    bridge, _world, port = game
    bridge.request_stop()
    status, body = bridge.queue_command("cmd=noop")
    assert status == 503 and "closing" in body["error"]


def test_an_unwritable_registry_does_not_stop_the_game(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    bridge = GameBridge(register=True, environ={"GAME_BRIDGE_INSTANCES": str(blocker / "instances")})
    try:
        port = bridge.start(0)
        assert bridge.registration is None and get(port, "/health")[1]["ok"] is True
    finally:
        bridge.stop()


def test_stop_is_idempotent_and_run_needs_start() -> None:
    bridge = GameBridge(register=False)
    with pytest.raises(RuntimeError):
        bridge.run()
    bridge.start(0)
    bridge.stop()
    bridge.stop()
    assert not bridge.running


# --------------------------------------------------------------------------- helpers, imports

def test_debug_port_from_argv() -> None:
    assert debug_port_from_argv(["--debug-port", "7820"], environ={}) == 7820
    assert debug_port_from_argv(["x", "--debug-port=0"], environ={}) == 0
    assert debug_port_from_argv([], environ={"GAME_BRIDGE_DEBUG_PORT": "7821"}) == 7821
    assert debug_port_from_argv(["--debug-port", "7"], environ={"GAME_BRIDGE_DEBUG_PORT": "8"}) == 7
    assert debug_port_from_argv([], environ={}) is None
    assert debug_port_from_argv(["-p", "9"], flag="-p", env_var=None, default=5) == 9
    for argv in (["--debug-port"], ["--debug-port", "x"], ["--debug-port=70000"]):
        with pytest.raises(ValueError, match="--debug-port"):
            debug_port_from_argv(argv, environ={})


def test_importing_the_kit_imports_neither_mcp_nor_psutil() -> None:
    code = ("import sys, game_bridge_mcp.game, game_bridge_mcp.game.demo; "
            "print(sorted(m for m in ('mcp', 'psutil') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_top_level_screen_is_warned_about_once_and_kept_where_the_game_put_it(
        caplog: pytest.LogCaptureFixture) -> None:
    """The convention is ui.screen; a game that says {"screen": ...} is told so on stderr, once."""
    bridge = GameBridge(register=False)
    bridge.state_fn = lambda: {"screen": "Menu", "game": {"score": 1}}
    with caplog.at_level("WARNING", logger="game_bridge_mcp.game.kit.bridge"):
        first = bridge.snapshot()
        bridge.snapshot("digest")
    said = [r.getMessage() for r in caplog.records if "top-level 'screen'" in r.getMessage()]
    assert said == ["game-bridge kit: the state has a top-level 'screen', which the bridge does not read; "
                    "put it in ui.screen (docs/contract.md)"]
    assert first["screen"] == "Menu"  # the whole /state keeps the game's own keys
    caplog.clear()
    fine = GameBridge(register=False)
    fine.state_fn = lambda: {"screen": "x", "ui": {"screen": "Menu"}}
    with caplog.at_level("WARNING", logger="game_bridge_mcp.game.kit.bridge"):
        fine.snapshot()
    assert not [r for r in caplog.records if "top-level" in r.getMessage()]
