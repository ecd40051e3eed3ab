"""Discovery: registry + scan, verified against the live port. Real HTTP servers on port
0 (FakeGame, a plain 404 server, listeners that never answer), real dead pids, and
recording openers where a test must prove what was (not) contacted."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from game_bridge_mcp.wire.client import GameClient
from game_bridge_mcp.config import Config
from game_bridge_mcp.discovery import report as discovery
from game_bridge_mcp.discovery import probe
from game_bridge_mcp.discovery.report import discover
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.manifest.reader import normalise_manifest
from game_bridge_mcp.wire.transport import TransportError, loopback_opener
from peers.fakegame import FakeGame

PROBE_MS = 250
#: The deadline of the hung-listeners test: long enough that one deadline and ten lie far apart.
HUNG_MS = 1500


# --------------------------------------------------------------------------- helpers

def make_config(reg: Path, ports: tuple[int, ...] = (), **kw: Any) -> Config:
    return Config(environ={"GAME_BRIDGE_INSTANCES": str(reg), "HOME": str(reg.parent)},
                  scan_range=ports, **kw)


def write_entry(reg: Path, *, port: int, pid: int, host: str = "127.0.0.1", name: str = "Registered Name",
                version: str = "0.0.0-registry", cwd: str = "/checkouts/main", **extra: Any) -> Path:
    reg.mkdir(parents=True, exist_ok=True)
    doc = {"name": name, "version": version, "protocol": 1, "port": port, "pid": pid,
           "host": host, "started": "2026-08-20T22:27:19.774Z", "cwd": cwd, **extra}
    path = reg / f"{pid}.json"
    path.write_text(json.dumps(doc))
    return path


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def quiet_port() -> int:
    """A port with nothing listening (bound then released; nothing else here takes it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def hung_listener() -> Iterator[int]:
    """Accepts connections (the kernel does) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@contextmanager
def not_a_game(status: int = 404, body: bytes = b"<html>nope</html>") -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class RecordingOpener:
    """The real transport, recording every URL (and able to forbid some)."""

    def __init__(self, forbidden: str | None = None) -> None:
        self.urls: list[str] = []
        self.forbidden = forbidden
        self._lock = threading.Lock()

    def __call__(self, url: str, *, timeout: float, max_bytes: int) -> Any:
        with self._lock:
            self.urls.append(url)
        if self.forbidden and self.forbidden in url:
            pytest.fail(f"discovery contacted {url}")
        return loopback_opener(url, timeout=timeout, max_bytes=max_bytes)


def by_port(items: list[dict]) -> dict[int, dict]:
    return {item["port"]: item for item in items}


@pytest.fixture
def reg(tmp_path: Path) -> Path:
    return tmp_path / "instances"


# --------------------------------------------------------------------------- live

def test_live_instance_via_registry_takes_identity_from_the_game(reg: Path) -> None:
    with FakeGame(screen="MenuScreen") as game:
        write_entry(reg, port=game.port, pid=os.getpid())
        report = discover(make_config(reg), probe_timeout_ms=PROBE_MS)
    assert set(report) == {"registryDir", "live", "stale", "notAGame", "free"}
    assert report["registryDir"] == str(reg)
    (inst,) = report["live"]
    assert inst == {
        "port": game.port, "discovery": "registry", "status": "live", "frame": inst["frame"],
        "game": "Fake Game", "version": "1.2.3", "protocol": 1, "manifest": "game",
        "pid": os.getpid(), "cwd": "/checkouts/main", "started": "2026-08-20T22:27:19.774Z",
        "screen": "MenuScreen", "toolsets": ["play", "flow", "bridge"],
        "launchedByThisBridge": False}
    assert isinstance(inst["frame"], int)
    assert list(inst)[:4] == ["port", "discovery", "status", "frame"]


def test_scan_plus_registry_is_both_and_scan_only_omits_unknowns(reg: Path) -> None:
    gone = quiet_port()
    with FakeGame() as registered, FakeGame(manifest=None) as old_build:
        write_entry(reg, port=registered.port, pid=os.getpid())
        report = discover(make_config(reg, (registered.port, old_build.port, gone)),
                          probe_timeout_ms=PROBE_MS, launched_ports={registered.port})
    live = by_port(report["live"])
    assert [i["port"] for i in report["live"]] == sorted(live)
    assert live[registered.port]["discovery"] == "both"
    assert live[registered.port]["launchedByThisBridge"] is True
    old = live[old_build.port]
    assert old == {"port": old_build.port, "discovery": "scan", "status": "live-no-manifest",
                   "frame": old["frame"], "manifest": "fallback", "screen": "GameScreen",
                   "toolsets": ["bridge"], "launchedByThisBridge": False}
    assert report["free"] == [gone]


def test_entry_name_and_version_fill_in_only_when_the_game_says_nothing(reg: Path) -> None:
    with FakeGame(manifest=None) as game:
        write_entry(reg, port=game.port, pid=os.getpid(), name="Orbital\u202e Freight\x07", version="0.9.2")
        (inst,) = discover(make_config(reg), probe_timeout_ms=PROBE_MS)["live"]
    assert inst["status"] == "live-no-manifest"
    assert (inst["game"], inst["version"], inst["protocol"]) == ("Orbital Freight", "0.9.2", 1)


class Known:
    """A KnownInstances stand-in: real GameClients per port, a manifest function."""

    def __init__(self, manifest: Any) -> None:
        self.clients: dict[int, GameClient] = {}
        self._manifest = manifest
        self.calls: list[tuple[str, int, int | None]] = []

    def client(self, port: int) -> GameClient:
        self.calls.append(("client", port, None))
        return self.clients.setdefault(port, GameClient(port, timeout_ms=2000))

    def manifest(self, port: int, *, refresh: bool = False, timeout_ms: int | None = None) -> Any:
        # the probe's /health went through this port's own client before the manifest is asked for
        self.calls.append(("manifest", port, self.clients[port].last_frame))
        return self._manifest(port)


def test_known_manifest_is_the_source_of_identity_and_tools_is_not_fetched(reg: Path) -> None:
    custom = normalise_manifest({"game": {"name": "Cached", "version": "2"},
                                 "toolsets": {"build": {"tools": [{"name": "spawn"}]}}})
    known = Known(lambda port: custom)
    with FakeGame() as game:
        report = discover(make_config(reg, (game.port,)), known=known, probe_timeout_ms=PROBE_MS)
    (inst,) = report["live"]
    assert [c[:2] for c in known.calls] == [("client", game.port), ("manifest", game.port)]
    assert (inst["game"], inst["version"], inst["toolsets"]) == ("Cached", "2", ["build", "bridge"])
    assert "/tools" not in game.requests


def test_the_known_client_sees_health_before_the_manifest_is_asked_for(reg: Path) -> None:
    known = Known(lambda port: normalise_manifest({"game": {"name": "X"}}))
    with FakeGame() as game:
        report = discover(make_config(reg, (game.port,)), known=known, probe_timeout_ms=PROBE_MS)
    (manifest_call,) = [c for c in known.calls if c[0] == "manifest"]
    assert manifest_call[2] is not None  # the client had seen the /health frame already
    assert report["live"][0]["game"] == "X"


def test_a_failing_known_manifest_still_lists_the_instance(reg: Path) -> None:
    def explode(port: int) -> Any:
        raise RuntimeError("cache exploded")

    with FakeGame() as game:
        (inst,) = discover(make_config(reg, (game.port,)), known=Known(explode),
                           probe_timeout_ms=PROBE_MS)["live"]
    assert inst["status"] == "live-no-manifest" and inst["manifest"] == "fallback"
    assert "cache exploded" in inst["manifestProblem"]


def test_tools_answer_that_breaks_the_contract_falls_back(reg: Path) -> None:
    with FakeGame() as game:
        game.overrides["/tools"] = lambda h: h.send_json(500, {"error": "boom"})
        (inst,) = discover(make_config(reg, (game.port,)), probe_timeout_ms=PROBE_MS)["live"]
    assert inst["manifest"] == "fallback" and "HTTP 500" in inst["manifestProblem"]


def test_manifest_file_is_used_when_tools_is_missing(reg: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"game": {"name": "From File", "version": "1"},
                                "toolsets": [{"name": "play", "tools": [{"name": "jump"}]}]}))
    with FakeGame(manifest=None) as game:
        (inst,) = discover(make_config(reg, (game.port,), manifest_file=path),
                           probe_timeout_ms=PROBE_MS)["live"]
    assert (inst["status"], inst["manifest"], inst["game"]) == ("live", "file", "From File")


def test_screen_comes_from_health_when_published_without_fetching_state(reg: Path) -> None:
    with FakeGame() as game:
        game.overrides["/health"] = lambda h: h.send_json(200, {"ok": True, "frame": 7, "screen": "PauseScreen"})
        (inst,) = discover(make_config(reg, (game.port,)), probe_timeout_ms=PROBE_MS)["live"]
    assert inst["screen"] == "PauseScreen" and inst["frame"] == 7
    assert "/state" not in game.requests


def test_a_huge_state_is_not_parsed_for_the_screen(reg: Path) -> None:
    with FakeGame(padding_bytes=2 * 1024 * 1024) as game:
        (inst,) = discover(make_config(reg, (game.port,)), probe_timeout_ms=PROBE_MS)["live"]
    assert inst["status"] == "live" and "screen" not in inst


def test_launched_mapping_supplies_pid_and_cwd_for_unregistered_games(reg: Path) -> None:
    with FakeGame() as game:
        report = discover(make_config(reg, ()), probe_timeout_ms=PROBE_MS,
                          launched_ports={game.port: {"pid": 4321, "cwd": "/rc"}})
    (inst,) = report["live"]
    assert (inst["pid"], inst["cwd"], inst["launchedByThisBridge"]) == (4321, "/rc", True)


# --------------------------------------------------------------------------- stale, not a game

def test_an_entry_whose_port_is_quiet_is_stale_and_kept(reg: Path) -> None:
    port, pid = quiet_port(), dead_pid()
    path = write_entry(reg, port=port, pid=pid)
    report = discover(make_config(reg), probe_timeout_ms=PROBE_MS)
    assert report["live"] == [] and report["free"] == []  # not scanned: not "free"
    (entry,) = report["stale"]
    assert entry["path"] == str(path) and entry["port"] == port and entry["pid"] == pid
    assert entry["pidAlive"] is False and "not running" in entry["reason"]
    assert entry["game"] == "Registered Name" and "pruned" not in entry
    assert path.exists()


def test_a_port_answering_http_that_is_not_a_game(reg: Path) -> None:
    with not_a_game() as other:
        path = write_entry(reg, port=other, pid=dead_pid())
        report = discover(make_config(reg, (other,)), probe_timeout_ms=PROBE_MS)
    (item,) = report["notAGame"]
    assert item["port"] == other and "HTTP 404" in item["reason"] and item["registry"] == [str(path)]
    (stale,) = report["stale"]
    assert "not a game" in stale["reason"]
    assert report["live"] == [] and report["free"] == []


def test_an_entry_pointing_at_a_hung_listener_is_stale(reg: Path) -> None:
    with hung_listener() as port:
        write_entry(reg, port=port, pid=os.getpid())
        report = discover(make_config(reg), probe_timeout_ms=PROBE_MS)
    (stale,) = report["stale"]
    assert stale["pidAlive"] is True and f"within {PROBE_MS}ms" in stale["reason"]
    assert "unresponsive" not in report  # registry-only: reported once, as the stale entry


def test_a_leftover_entry_for_a_reused_port_is_not_attached_to_the_new_game(reg: Path) -> None:
    with FakeGame() as game:
        old = write_entry(reg, port=game.port, pid=dead_pid(), cwd="/old")
        write_entry(reg, port=game.port, pid=os.getpid(), cwd="/new")
        report = discover(make_config(reg), probe_timeout_ms=PROBE_MS)
    (inst,) = report["live"]
    assert (inst["pid"], inst["cwd"]) == (os.getpid(), "/new")
    (stale,) = report["stale"]
    assert stale["path"] == str(old) and "leftover" in stale["reason"]


def test_a_dead_pid_entry_on_a_live_port_gives_no_pid(reg: Path) -> None:
    with FakeGame() as game:
        write_entry(reg, port=game.port, pid=dead_pid(), cwd="/old")
        report = discover(make_config(reg), probe_timeout_ms=PROBE_MS)
    (inst,) = report["live"]
    assert inst["discovery"] == "registry" and "pid" not in inst and "cwd" not in inst
    assert len(report["stale"]) == 1


def test_registry_problems_are_reported_not_fatal(reg: Path) -> None:
    reg.mkdir()
    (reg / "5.json").write_text("{broken")
    write_entry(reg, port=7820, pid=6, host="localhost")
    report = discover(make_config(reg), probe_timeout_ms=PROBE_MS)
    problems = {Path(p["path"]).name: p for p in report["registryProblems"]}
    assert "not valid JSON" in problems["5.json"]["reason"]
    assert problems["6.json"]["host"] == "localhost"


def test_non_loopback_hosts_are_never_contacted(reg: Path) -> None:
    with FakeGame() as game:
        write_entry(reg, port=game.port, pid=os.getpid(), host="10.255.255.1")
        write_entry(reg, port=game.port, pid=1, host="localhost")
        opener = RecordingOpener()
        report = discover(make_config(reg), opener=opener, probe_timeout_ms=PROBE_MS)
    assert opener.urls == []  # nothing probed at all: both entries were set aside
    assert report["live"] == [] and report["stale"] == []
    assert {p["host"] for p in report["registryProblems"]} == {"10.255.255.1", "localhost"}
    assert all("no connection" in p["reason"] for p in report["registryProblems"])


def test_non_loopback_entry_on_a_scanned_port_contacts_only_loopback(reg: Path) -> None:
    with FakeGame() as game:
        write_entry(reg, port=game.port, pid=os.getpid(), host="10.255.255.1")
        opener = RecordingOpener(forbidden="10.255.255.1")
        report = discover(make_config(reg, (game.port,)), opener=opener, probe_timeout_ms=PROBE_MS)
    assert all(url.startswith("http://127.0.0.1:") for url in opener.urls)
    (inst,) = report["live"]
    assert inst["discovery"] == "scan" and "pid" not in inst


def test_other_loopback_hosts_are_probed_where_they_say(reg: Path) -> None:
    port = quiet_port()
    write_entry(reg, port=port, pid=dead_pid(), host="127.0.0.2")
    opener = RecordingOpener()
    report = discover(make_config(reg), opener=opener, probe_timeout_ms=PROBE_MS)
    assert opener.urls == [f"http://127.0.0.2:{port}/health"]
    assert report["stale"][0]["host"] == "127.0.0.2"


# --------------------------------------------------------------------------- prune

def test_prune_semantics(reg: Path) -> None:
    quiet_dead = write_entry(reg, port=quiet_port(), pid=dead_pid())
    quiet_alive = write_entry(reg, port=quiet_port(), pid=os.getpid())
    (reg / "77.json").write_text("{broken")
    with FakeGame() as game, not_a_game() as other:
        live_entry = write_entry(reg, port=game.port, pid=os.getppid())  # another living pid
        taken = write_entry(reg, port=other, pid=dead_pid())
        config = make_config(reg)

        report = discover(config, probe_timeout_ms=PROBE_MS)  # no prune: nothing deleted
        assert all(p.exists() for p in (quiet_dead, quiet_alive, live_entry, taken, reg / "77.json"))
        assert all("pruned" not in s for s in report["stale"])

        report = discover(config, prune=True, probe_timeout_ms=PROBE_MS)
    stale = {s["path"]: s for s in report["stale"]}
    assert stale[str(quiet_dead)]["pruned"] is True and not quiet_dead.exists()
    assert stale[str(quiet_alive)]["pruned"] is False and quiet_alive.exists()
    assert "still running" in stale[str(quiet_alive)]["notPrunedBecause"]
    assert stale[str(taken)]["pruned"] is False and taken.exists()  # port not quiet
    assert "not quiet" in stale[str(taken)]["notPrunedBecause"]
    assert live_entry.exists() and by_port(report["live"])[game.port]["pid"] == os.getppid()
    assert (reg / "77.json").exists()  # broken files are reported, never pruned


# --------------------------------------------------------------------------- scanning

def test_free_and_sorted_and_deduplicated(reg: Path) -> None:
    ports = sorted({quiet_port() for _ in range(5)})
    with FakeGame() as game:
        write_entry(reg, port=game.port, pid=os.getpid())
        spec = ",".join(str(p) for p in reversed(ports + [game.port]))
        opener = RecordingOpener()
        report = discover(make_config(reg), range_spec=spec, opener=opener, probe_timeout_ms=PROBE_MS)
    assert report["free"] == ports
    assert [i["port"] for i in report["live"]] == [game.port]
    health_urls = [u for u in opener.urls if u.endswith("/health")]
    assert len(health_urls) == len(set(health_urls)) == len(ports) + 1  # the game probed once


def test_probes_run_concurrently() -> None:
    """Every probe blocks until all are in flight at once: a sequential scan would break
    the barrier and report the ports as unresponsive rather than free."""
    ports = tuple(range(40001, 40021))
    barrier = threading.Barrier(len(ports), timeout=5)

    def opener(url: str, *, timeout: float, max_bytes: int) -> Any:
        barrier.wait()
        raise TransportError("refused", "connection refused")

    report = discover(Config(environ={"GAME_BRIDGE_INSTANCES": "/nonexistent/instances"},
                             scan_range=ports), opener=opener, probe_timeout_ms=PROBE_MS)
    assert report["free"] == list(ports)
    assert "unresponsive" not in report


@pytest.mark.slow
def test_hung_listeners_are_reported_and_cost_one_deadline(reg: Path) -> None:
    with ExitStack() as stack:
        hung = sorted(stack.enter_context(hung_listener()) for _ in range(10))
        quiet = sorted({quiet_port() for _ in range(30)} - set(hung))
        config = make_config(reg, tuple(hung + quiet))
        started = time.monotonic()
        report = discover(config, probe_timeout_ms=HUNG_MS)
        elapsed = time.monotonic() - started
    assert [u["port"] for u in report["unresponsive"]] == hung
    assert all(f"within {HUNG_MS}ms" in u["reason"] for u in report["unresponsive"])
    assert report["free"] == quiet
    # at once: one deadline (1.5 s); one after another: ten (15 s)
    assert elapsed < 5 * HUNG_MS / 1000, elapsed


def test_bad_range_is_a_usage_error_quoting_it(reg: Path) -> None:
    with pytest.raises(BridgeUsageError) as err:
        discover(make_config(reg), range_spec="7777,banana")
    assert "7777,banana" in err.value.message
    with pytest.raises(BridgeUsageError):
        discover(make_config(reg), range_spec=["7777"])  # type: ignore[arg-type]
    assert discover(make_config(reg), range_spec=quiet_port(), use_registry=False)["free"]
    default = quiet_port()
    assert discover(make_config(reg, (default,)), range_spec=" ")["free"] == [default]


def test_no_registry_and_no_scan(reg: Path) -> None:
    with FakeGame() as game:
        write_entry(reg, port=game.port, pid=os.getpid())
        other = quiet_port()
        opener = RecordingOpener()
        report = discover(make_config(reg, (other,), registry=False), opener=opener,
                          probe_timeout_ms=PROBE_MS)
        assert report["free"] == [other] and report["live"] == []
        assert "not read" in report["registryNote"]
        assert not any(f":{game.port}/" in u for u in opener.urls)

        opener = RecordingOpener()
        report = discover(make_config(reg, (other,)), use_scan=False, opener=opener,
                          probe_timeout_ms=PROBE_MS)
        assert report["free"] == [] and [i["port"] for i in report["live"]] == [game.port]
        assert not any(f":{other}/" in u for u in opener.urls)
        # the arguments override the config
        report = discover(make_config(reg, (other,), scan=False, registry=False),
                          use_registry=True, use_scan=True, probe_timeout_ms=PROBE_MS)
        assert report["free"] == [other] and report["live"][0]["discovery"] == "registry"


def test_missing_registry_directory_is_not_an_error(tmp_path: Path) -> None:
    report = discover(make_config(tmp_path / "nowhere", ()), probe_timeout_ms=PROBE_MS)
    assert report == {"registryDir": str(tmp_path / "nowhere"), "live": [], "stale": [],
                      "notAGame": [], "free": []}


def test_registry_dir_follows_override_then_environment(tmp_path: Path) -> None:
    config = Config(environ={"GAME_BRIDGE_HOME": str(tmp_path / "home")}, scan_range=())
    assert discover(config)["registryDir"] == str(tmp_path / "home" / "instances")
    config.registry_dir = tmp_path / "explicit"
    assert discover(config)["registryDir"] == str(tmp_path / "explicit")


@pytest.mark.slow
def test_a_typical_listing_is_fast(reg: Path) -> None:
    """20 entries (live, stale, broken) plus a 12-port range: a generous bound here;
    scripts/bench_discovery.py measures it properly."""
    with ExitStack() as stack:
        games = [stack.enter_context(FakeGame()) for _ in range(4)]
        write_entry(reg, port=games[0].port, pid=os.getpid())
        for game in games[1:]:
            write_entry(reg, port=game.port, pid=dead_pid())  # live port, leftover entry
        for _ in range(12):
            write_entry(reg, port=quiet_port(), pid=dead_pid())
        for i in range(4):
            (reg / f"{900000 + i}.json").write_text("{broken" if i % 2 else json.dumps({"port": 1}))
        ports = tuple(sorted({quiet_port() for _ in range(12)}))
        config = make_config(reg, ports)
        discover(config, probe_timeout_ms=PROBE_MS)  # warm up
        started = time.monotonic()
        report = discover(config, probe_timeout_ms=PROBE_MS)
        elapsed = time.monotonic() - started
    assert len(report["live"]) == 4 and len(report["registryProblems"]) == 4
    assert elapsed < 20 * PROBE_MS / 1000, elapsed  # a hang guard; its speed is the benchmark's


# --------------------------------------------------------------------------- the connect sweep

def test_connect_sweep_settles_quiet_ports_without_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "CONNECT_BATCH", 3)  # several batches, order kept
    with hung_listener() as a, hung_listener() as b:
        quiet = [quiet_port() for _ in range(5)]
        addresses = [("127.0.0.1", p) for p in [quiet[0], a, quiet[1], quiet[2], b, quiet[3], quiet[4]]]
        assert discovery.connect_sweep(addresses, 1.0) == [
            "refused", "open", "refused", "refused", "open", "refused", "refused"]


def test_the_default_path_sweeps_only_loopback_and_http_probes_only_listeners(
        reg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    swept: list[tuple[str, int]] = []
    real_sweep = discovery.connect_sweep

    def spy(addresses: list[tuple[str, int]], timeout_s: float) -> list[str]:
        swept.extend(addresses)
        return real_sweep(addresses, timeout_s)

    http: list[str] = []
    real_probe = discovery.probe_port

    def probe_spy(host: str, port: int, **kw: Any) -> Any:
        http.append(f"{host}:{port}")
        return real_probe(host, port, **kw)

    monkeypatch.setattr(discovery, "connect_sweep", spy)
    monkeypatch.setattr(discovery, "probe_port", probe_spy)
    quiet = quiet_port()
    with FakeGame() as game:
        write_entry(reg, port=game.port, pid=os.getpid(), host="10.255.255.1")
        write_entry(reg, port=quiet, pid=dead_pid())
        report = discover(make_config(reg, (game.port,)), probe_timeout_ms=PROBE_MS)
    assert sorted(swept) == sorted([("127.0.0.1", game.port), ("127.0.0.1", quiet)])
    assert http == [f"127.0.0.1:{game.port}"]
    assert [i["port"] for i in report["live"]] == [game.port]
    assert report["stale"][0]["port"] == quiet


def test_a_port_whose_accept_queue_is_full_is_unresponsive_not_free(reg: Path) -> None:
    """Linux drops SYNs to a listener whose accept queue is full: the connect never
    completes, and the sweep must give up at the deadline rather than hang or say free."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(0)
    port = sock.getsockname()[1]
    fillers: list[socket.socket] = []
    try:
        for _ in range(8):  # fill the queue; later connects stall
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.05)
        if discovery.connect_sweep([("127.0.0.1", port)], 0.2) != ["pending"]:
            pytest.skip("this kernel completes connects to a full accept queue")
        report = discover(make_config(reg, (port,)), probe_timeout_ms=PROBE_MS)
    finally:
        for filler in fillers:
            filler.close()
        sock.close()
    (item,) = report["unresponsive"]
    assert item["port"] == port and "did not accept a connection" in item["reason"]
    assert report["free"] == []
