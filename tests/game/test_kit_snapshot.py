"""The kit's ``snapshot``, without game code: what a game's callables reach is copied and put
back in place (module globals, closures, objects, aliases, slots, random generators);
bytes that are data go to another instance of the same build; bytes that are not this
build's, damaged, disguised or too large are refused and change nothing; hooks; the limit."""

from __future__ import annotations

import collections
import dataclasses
import enum
import hashlib
import http.client
import json
import pickle
import random
import threading
from typing import Any, NamedTuple

import pytest

from game_bridge_mcp.game import GameBridge
from game_bridge_mcp.game.snapshot import codec
from game_bridge_mcp.game.snapshot.graph import NotSnapshotable, copy_graph, find_roots
from kit_helpers import doc, looping, settled

pytestmark = pytest.mark.timeout(60)


class Kind(enum.Enum):
    CRATE = 1
    BARREL = 2


class Point(NamedTuple):
    x: int
    y: int


@dataclasses.dataclass
class Body:
    at: Point
    kind: Kind
    tags: set[str]


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a = [1]


class World:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.bodies = [Body(Point(0, 0), Kind.CRATE, {"new"})]
        self.alias = self.bodies  # the same list twice
        self.queue: collections.deque[int] = collections.deque([1, 2], maxlen=5)
        self.counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        self.cells = {(0, 0): "start"}
        self.slotted = Slotted()
        self.lock = threading.Lock()  # machinery: shared, not copied
        self.score = 0.5

    def update(self) -> None:
        body = Body(Point(self.rng.randrange(9), random.randrange(9)), Kind.BARREL, {"x"})
        self.bodies.append(body)
        self.queue.append(len(self.bodies))
        self.counts[body.kind.name] += 1
        self.cells[(body.at.x, body.at.y)] = "hit"
        self.slotted.a.append(body.at.x)
        self.slotted.b = body.at.y
        self.score = self.score * 1.5

    def state(self) -> dict[str, Any]:
        return {"game": {"bodies": len(self.bodies), "score": self.score, "last": self.bodies[-1].at.x,
                         "queue": list(self.queue), "counts": dict(self.counts), "slot": self.slotted.a[-1],
                         "rng": hashlib.sha256(repr(self.rng.getstate()).encode()).hexdigest()[:12]}}


def world_game(seed: int = 3, **options: Any) -> tuple[World, GameBridge]:
    world = World(seed)
    bridge = GameBridge("World", "1.0", state=world.state, clock=True, register=False,
                        environ={"GAME_BRIDGE_START_PAUSED": "1"}, **options)
    return world, bridge


def game_state(port: int) -> dict[str, Any]:
    return {k: v for k, v in doc(port, "/state").items() if k in ("game", "simFrame")}


def ok(state: dict[str, Any]) -> Any:
    entry = state["commandResults"][-1]
    assert entry["ok"] is True, entry
    return entry.get("result")


def post(port: int, body: bytes, path: str = "/snapshot") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/octet-stream"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def get_bytes(port: int, snapshot_id: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", f"/snapshot?id={snapshot_id}")
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# --------------------------------------------------------------------------- in the process

def test_a_load_puts_everything_back_in_place_and_the_same_future_follows() -> None:
    world, bridge = world_game()
    originals = (world.bodies, world.queue, world.counts, world.slotted, world.rng)
    with looping(bridge, world.update) as port:
        settled(port, "cmd=step&frames=3")
        saved = ok(settled(port, "cmd=snapshot_save"))
        assert saved["simFrame"] == 3 and saved["bytes"] == 0  # a lock in the state: not plain data
        status, reason = get_bytes(port, saved["id"])  # so they stay in the process, and say why
        assert status == 409 and b"stays in the game's process" in reason and b".lock is a lock" in reason, (status, reason)
        before = game_state(port)
        after_five = game_state(port) if settled(port, "cmd=step&frames=5") else None
        settled(port, "cmd=step&frames=4")
        loaded = settled(port, f"cmd=snapshot_load&id={saved['id']}")
        assert loaded["events"][-1]["m"] == "snapshot:loaded" and loaded["events"][-1]["id"] == saved["id"]
        assert game_state(port) == before
        settled(port, "cmd=step&frames=5")
        assert game_state(port) == after_five
    assert (world.bodies, world.queue, world.counts, world.slotted, world.rng) == originals
    assert world.alias is world.bodies and world.bodies[0].at == Point(0, 0) and world.bodies[0].kind is Kind.CRATE


def test_module_globals_and_closures_are_found_and_rebound() -> None:
    namespace: dict[str, Any] = {"random": random}
    exec(compile(  # a game written with module globals, as examples/catch_stars.py is
        "import random\n"
        "rng = random.Random(1)\n"
        "score = 0\n"
        "world = {'x': 0}\n"
        "def update():\n"
        "    global score\n"
        "    score += rng.randrange(5)\n"
        "    world['x'] += 1\n"
        "def state():\n"
        "    return {'game': {'score': score, 'x': world['x']}}\n", "globalgame", "exec"), namespace)
    namespace["__name__"] = "globalgame"
    roots = find_roots([namespace["state"], namespace["update"]])
    assert set(roots) == {"global:globalgame:rng", "global:globalgame:score", "global:globalgame:world"}
    for _ in range(3):
        namespace["update"]()
    graph = copy_graph(roots)
    seen = namespace["state"]()
    for _ in range(4):
        namespace["update"]()
    graph.restore()
    assert namespace["state"]() == seen


def test_a_generator_in_the_state_is_refused_with_where_it_is() -> None:
    holder = {"script": (i for i in range(3))}

    def state() -> dict[str, Any]:
        return {"game": {"n": len(holder)}}

    with pytest.raises(NotSnapshotable, match=r"\[k\]|script.*generator"):
        copy_graph(find_roots([state]))


# --------------------------------------------------------------------------- bytes between instances

def portable_game(seed: int) -> tuple[World, GameBridge]:
    world, bridge = world_game(seed)
    bridge.snapshot_skip(world.lock)  # kept out: the bytes are then data
    return world, bridge


def test_bytes_go_to_another_instance_of_the_same_build() -> None:
    world, bridge = portable_game(3)
    other_world, other = portable_game(99)
    with looping(bridge, world.update) as port, looping(other, other_world.update) as other_port:
        settled(port, "cmd=step&frames=6")
        saved = ok(settled(port, "cmd=snapshot_save"))
        status, data = get_bytes(port, saved["id"])
        assert status == 200 and len(data) == saved["bytes"] > 0
        assert data.startswith(codec.MAGIC)
        expected = game_state(port)
        status, answer = post(other_port, data)
        assert status == 200, answer
        loaded = settled(other_port, f"cmd=snapshot_load&id={json.loads(answer)['id']}")
        assert ok(loaded)["simFrame"] == 6
        assert game_state(other_port) == expected
        assert other_world.lock is not world.lock and other_world.alias is other_world.bodies
        settled(port, "cmd=step&frames=7")
        settled(other_port, "cmd=step&frames=7")
        assert game_state(other_port) == game_state(port)


def refusals(data: bytes) -> dict[str, bytes]:
    head, _, rest = data[len(codec.MAGIC):].partition(b"\n")
    document = json.loads(rest)

    def signed(changed: dict[str, Any]) -> bytes:
        body = json.dumps(changed).encode()
        return codec.MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body

    cases = {"cut off": data[:-10], "damaged": data[:-3] + b"xyz", "pickled": pickle.dumps(document),
             "empty": b"", "another game": signed({**document, "game": "Other"}),
             "another version": signed({**document, "gameVersion": "2.0"})}
    def disguised(d: dict[str, Any]) -> None:  # a root that would be os.system
        d["nodes"][next(iter(d["roots"].values()))] = ["sh", ["fn", "os", "system"]]

    def foreign_class(d: dict[str, Any]) -> None:
        d["nodes"].append(["o", ["subprocess", "Popen"], {}, {}, []])

    def out_of_range(d: dict[str, Any]) -> None:
        d["nodes"].append(["l", None, [10 ** 6], None])

    for name, change in {"code in disguise": disguised, "a class it does not hold": foreign_class,
                         "a node out of range": out_of_range}.items():
        changed = json.loads(rest)
        change(changed)
        cases[name] = signed(changed)
    assert head  # the checksum line is there
    return cases


def test_bytes_that_are_not_this_builds_are_refused_and_change_nothing() -> None:
    world, bridge = portable_game(3)
    with looping(bridge, world.update) as port:
        settled(port, "cmd=step&frames=2")
        saved = ok(settled(port, "cmd=snapshot_save"))
        _status, data = get_bytes(port, saved["id"])
        before = game_state(port)
        for name, body in refusals(data).items():
            status, reason = post(port, body)
            assert status == 400, (name, status, reason)
        for fragment in ("checksum", "another game", "does not hold", "not something this game"):
            assert any(fragment in post(port, body)[1].decode() for body in refusals(data).values()), fragment
        assert game_state(port) == before and world.bodies is world.alias


# --------------------------------------------------------------------------- the rest of the extension

def test_hooks_the_limit_and_unknown_ids() -> None:
    held = {"n": 5, "blob": b"\x00\x01"}

    def save() -> dict[str, Any]:
        return {"n": held["n"]}

    def load(data: Any) -> None:
        held["n"] = data["n"]

    bridge = GameBridge("Hooked", "1.0", state=lambda: {"game": {"n": held["n"]}}, clock=True, register=False,
                        snapshot=(save, load), environ={"GAME_BRIDGE_START_PAUSED": "1"})
    with looping(bridge) as port:
        saved = ok(settled(port, "cmd=snapshot_save"))
        held["n"] = 9
        status, data = get_bytes(port, saved["id"])
        assert status == 200 and len(data) == saved["bytes"]
        settled(port, f"cmd=snapshot_load&id={saved['id']}")
        assert held["n"] == 5
        held["n"] = 1
        status, answer = post(port, data)
        assert status == 200
        settled(port, f"cmd=snapshot_load&id={json.loads(answer)['id']}")
        assert held["n"] == 5
        for _ in range(14):
            ok(settled(port, "cmd=snapshot_save"))
        full = settled(port, "cmd=snapshot_save")["commandResults"][-1]
        assert full["ok"] is False and "16 snapshots are kept already" in full["error"]
        assert post(port, data)[0] == 400
        for query in ("cmd=snapshot_load&id=nope", "cmd=snapshot_drop&id=nope"):
            entry = settled(port, query)["commandResults"][-1]
            assert entry["ok"] is False and "no snapshot 'nope'" in entry["error"]
        assert ok(settled(port, f"cmd=snapshot_drop&id={saved['id']}")) == {"dropped": saved["id"]}
        assert get_bytes(port, saved["id"])[0] == 404


def test_the_server_takes_a_post_only_at_snapshot_and_refuses_a_large_one_unread() -> None:
    world, bridge = portable_game(1)
    with looping(bridge, world.update) as port:
        assert post(port, b"x", path="/state")[0] == 405
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.putrequest("POST", "/snapshot")
        conn.putheader("Content-Length", str(64 * 1024 * 1024 + 1))
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 413 and b"snapshotMaxBytes" in response.read()
        conn.close()
        assert doc(port, "/health")["ok"] is True  # still serving


def test_features_follow_the_clock_and_the_opt_out() -> None:
    assert "snapshot" in world_game()[1].health()["features"]
    assert "snapshot" not in world_game(snapshot=False)[1].health()["features"]
    assert "snapshot" not in GameBridge("No clock", register=False).health()["features"]
    with pytest.raises(ValueError, match="snapshot needs the clock"):
        GameBridge("No clock", register=False, snapshot=(lambda: {}, lambda data: None))
