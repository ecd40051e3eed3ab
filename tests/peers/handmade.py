"""A reference game written by hand from docs/contract.md alone, for tests.

Why it exists: the game kit (``game_bridge_mcp.game``) and the bridge are written by the
same project; if both got a wire detail wrong in the same way, tests against the kit
would still pass. This game imports nothing from ``game_bridge_mcp``: a standard-library
HTTP server, its own game-loop thread, its own PNG encoder. Tests of an extension run
against it as well as against the kit.

In-process (port 0 by default)::

    with HandmadeGame(features={"results", "after"}, hz=200, event_buffer=8) as game:
        game.port, game.url, game.snapshot(), game.requests   # what it served

As a child process (for launch tests; ``{port}`` from a declaration)::

    python tests/peers/handmade.py --port N [--features results,after,...|all|none]
        [--hz 120] [--events 64] [--lie NAME ...] [--register] [--description TEXT]
        [--ui-text TEXT] [--size 320x240] [--unavailable REASON] [--start-paused]

It exits when it receives ``close`` (or SIGTERM/SIGINT), removing its registry entry.

Options (keyword arguments; the same as the command-line flags):

- ``features``: which of ``results after view events screenshot clock input snapshot`` it
  advertises in ``/health`` *and* serves (default: all). Without a feature its
  endpoints/fields/commands are absent, as in a game that never heard of it.
- ``hz``: loop rate (frames a second). ``frame`` counts every loop turn; ``simFrame``
  only the simulated ones (all of them unless paused).
- ``event_buffer``: how many events ``/events`` keeps (small, to test ``dropped``);
  ``/state.events`` shows the last ``min(10, event_buffer)``.
- ``description`` (``/tools`` ``game.description``), ``ui_text`` (``/state`` ``ui.text``;
  default a one-line picture of the board).
- ``size``: the native screenshot size ``(w, h)``; ``unavailable``: a reason string
  makes ``/screenshot`` answer ``503 {"ok": false, "error": reason}`` (headless mode).
- ``start_paused``: start paused (default: ``GAME_BRIDGE_START_PAUSED=1`` in the
  environment, honoured only with ``clock``).
- ``register``: write ``<pid>.json`` to the instance registry after binding
  (``GAME_BRIDGE_INSTANCES``, else ``GAME_BRIDGE_HOME/instances``, else
  ``~/.game-bridge/instances``; ``environ=`` overrides ``os.environ``).
- ``lies``: a set of names from :data:`LIES`, each breaking one rule on purpose.

Commands (``/tools`` toolset ``play``; clock and input commands only with the feature):

- ``move {dx}``: integer ``-3..3`` (``minimum``/``maximum`` in the manifest); moves
  ``game.x``; out of range or not an integer is an ``ok: false`` outcome with a reason;
  ``result`` ``{"x": new x}``.
- ``spawn {kind}``: ``enum`` ``crate|barrel`` (default crate); ``result``
  ``{"spawned": "crate-N"}``.
- ``emit {n}``: makes ``n`` events (1..1000) ``{"seq", "m": "ping", "i"}``.
- ``noop``; ``close`` (answers, then stops serving and exits its loop).
- ``pause``, ``resume``, ``step {frames}`` (1..10000, default 1; completes only after
  its frames have run; commands behind it wait).
- ``key {key, action, frames}``, ``mouse {x, y, button, action, dx, dy}``, ``text {text}``:
  recorded in ``game.lastInput`` and completed on the next simulated frame (on a
  paused game: the next stepped one; this game has no real devices, only the names are
  the point). Commands complete in queue order: ``completedCommandId`` reaches ``N``
  only once every command up to ``N`` is done.

- ``snapshot_save``, ``snapshot_load {id}``, ``snapshot_drop {id}`` (with ``snapshot``): the
  world (``simFrame``, ``x``, ``spawned``, ``lastInput``: all its future depends on) kept in
  the process, at most 16; ``GET /snapshot?id=`` sends it as bytes (a magic line, the
  SHA-256 of the JSON, the JSON: data, checked whole before anything is loaded), ``POST
  /snapshot`` takes them back (413 over ``snapshot_max_bytes``, 400 with the reason for
  bytes of another game or build, damaged or cut off); ``snapshot_portable=False`` answers
  ``GET /snapshot`` with 409 (live copies only).
- ``noise``: ``game.noise`` draws from the system's randomness every simulated frame (a
  game the same inputs do not reproduce).

An unknown command is refused at ``/command`` (HTTP 404, ``accepted: false``, the list
of commands). A ``Host`` other than loopback, or any ``Origin``, gets 403.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import signal
import struct
import sys
import threading
import time
import urllib.parse
import zlib
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterable, Mapping

#: What an input command applied on a paused game returns: it completes later.
_WAITS = object()
FEATURES = ("results", "after", "view", "events", "screenshot", "clock", "input", "snapshot")
#: ``snapshot``: the bytes' first line, and the most snapshots kept at once.
SNAPSHOT_MAGIC = b"HANDMADE-SNAPSHOT 1\n"
SNAPSHOTS_KEPT = 16

#: Lying modes: each breaks one rule of docs/contract.md while still advertising the feature.
LIES = {
    "simframe-runs-while-paused": "clock: simFrame keeps counting while paused",
    "step-early": "clock: step's completion is published before its frames have run",
    "step-short": "clock: step runs one frame fewer than asked",
    "resume-ignored": "clock: resume leaves the game paused",
    "start-paused-ignored": "clock: GAME_BRIDGE_START_PAUSED is not honoured",
    "seq-restart": "events: seq starts again at 1 on every emit command",
    "seq-gap": "events: seq grows by 2",
    "events-no-seq": "events: /state.events entries carry no seq",
    "events-next-wrong": "events: /events next is always the since it was given",
    "events-no-dropped": "events: /events never says dropped",
    "results-not-list": "results: commandResults is an object, not a list",
    "results-bad-types": "results: entries carry id as a string and ok as a string",
    "results-missing": "results: commandResults stays empty",
    "results-late": "results: an entry appears only after a /state has shown completedCommandId reach it",
    "huge-result": "results: spawn's result is a 3 MB string",
    "huge-description": "/tools game.description is 3 MB",
    "after-ignored": "after: /state?after= answers at once, not done",
    "after-hangs": "after: /state?after= always holds for waitMs, even when done",
    "view-leaks": "view: the digest keeps nested game values and other keys",
    "view-drops": "view: the digest leaves out completedCommandId and the game scalars",
    "screenshot-not-image": "screenshot: the body is text under Content-Type image/png",
    "screenshot-wrong-type": "screenshot: a real PNG under Content-Type text/plain",
    "screenshot-truncated": "screenshot: the PNG is cut off halfway",
    "screenshot-ihdr-mismatch": "screenshot: IHDR claims twice the size the pixel data holds",
    "screenshot-oversize": "screenshot: maxWidth/maxHeight are ignored (native size)",
    "screenshot-stale": "screenshot: X-Game-Frame (and the image) from before the request",
    "screenshot-no-frame": "screenshot: no X-Game-Frame header",
    "screenshot-huge": "screenshot: a 100 MB body",
    "screenshot-never": "screenshot: the answer never arrives",
    "screenshot-no-window": "screenshot: no X-Game-Window header, though input is advertised",
    "screenshot-503-bad": "screenshot: 503 with a text body, not {ok: false, error}",
    "input-wrong-args": "input: key takes 'name' instead of 'key', mouse has no button",
    "input-no-wheel": "input: mouse has no wheel (no dx, dy)",
    "snapshot-load-partial": "snapshot: a load gives back the world but not simFrame",
    "snapshot-post-unchecked": "snapshot: POST /snapshot stores any bytes, unchecked (a load of junk then fails)",
    "snapshot-save-bad-id": "snapshot: snapshot_save answers an id with a slash (../hN)",
    "snapshot-get-junk": "snapshot: GET /snapshot sends bytes its own POST /snapshot refuses",
    "snapshot-post-no-id": "snapshot: POST /snapshot answers 200 without an id",
    "snapshot-event-no-id": "snapshot: snapshot:loaded carries no id",
    "snapshot-no-limit": "snapshot: snapshot_save never refuses, however many are kept",
    "snapshot-drop-ignored": "snapshot: snapshot_drop answers ok and forgets nothing",
    "snapshot-get-text": "snapshot: GET /snapshot's bytes under Content-Type text/plain",
    "snapshot-400-silent": "snapshot: POST /snapshot refuses bytes with 400 and an empty body",
    "snapshot-load-pauses": "snapshot: a load stops the clock (its snapshot was saved paused)",
}

_ALLOWED_DIGEST_KEYS = ("frame", "simFrame", "completedCommandId", "paused", "ui", "events", "commandResults")


# --------------------------------------------------------------------------- snapshot bytes, by hand

def encode_snapshot(world: Mapping[str, Any]) -> bytes:
    """A snapshot as bytes: a magic line, the SHA-256 of the JSON, the JSON. Data only."""
    body = json.dumps(world, sort_keys=True).encode()
    return SNAPSHOT_MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def decode_snapshot(data: bytes) -> dict[str, Any]:
    """The world in ``data``; ValueError saying why they are not this game's snapshot."""
    if not data.startswith(SNAPSHOT_MAGIC):
        raise ValueError("not a Handmade snapshot (no HANDMADE-SNAPSHOT 1 line)")
    digest, sep, body = data[len(SNAPSHOT_MAGIC):].partition(b"\n")
    if not sep or hashlib.sha256(body).hexdigest().encode() != digest:
        raise ValueError("damaged: the checksum does not match (cut off or changed)")
    try:
        world = json.loads(body)
    except ValueError:
        raise ValueError("damaged: the body is not JSON") from None
    if not isinstance(world, dict) or world.get("game") != "Handmade" or world.get("version") != "1.0":
        raise ValueError("from another game or build (game and version must be Handmade 1.0)")
    ints = [world.get(k) for k in ("simFrame", "x", "spawned")]
    if set(world) != {"game", "version", "simFrame", "x", "spawned", "lastInput"} or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in ints) or min(ints[0], ints[2]) < 0 or not (
            world["lastInput"] is None or (isinstance(world["lastInput"], dict)
                                           and all(isinstance(v, str) for v in world["lastInput"].values()))):
        raise ValueError("not this build's fields (simFrame, x, spawned, lastInput)")
    return world


# --------------------------------------------------------------------------- PNG, by hand

def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(width: int, height: int, rows: Iterable[bytes], *, claim: tuple[int, int] | None = None) -> bytes:
    """An 8-bit RGB PNG from ``height`` rows of ``3 * width`` bytes (filter 0 each).
    ``claim`` puts other dimensions into IHDR (a lying mode)."""
    cw, ch = claim or (width, height)
    raw = b"".join(b"\x00" + row for row in rows)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", cw, ch, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b""))


def fit(native: tuple[int, int], max_w: int, max_h: int) -> tuple[int, int]:
    """Scale down (never up) to fit, keeping the aspect ratio."""
    w, h = native
    scale = min(1.0, max_w / w, max_h / h)
    return max(1, int(w * scale)), max(1, int(h * scale))


def render(width: int, height: int, x: int, spawned: int, paused: bool) -> list[bytes]:
    """A picture of the board: a sky band, a ground band, the player as a red block at x
    (-10..10 across the width), one small box per spawned thing; grey when paused."""
    sky, ground = (b"\x60\x60\x60", b"\x30\x30\x30") if paused else (b"\x40\x80\xe0", b"\x30\xa0\x30")
    player_w = max(1, width // 20)
    left = max(0, min(width - player_w, int((x + 10) / 20 * (width - player_w))))
    ground_y = height * 3 // 4
    rows: list[bytes] = []
    sky_row, ground_row = sky * width, ground * width
    player_row = sky * left + b"\xe0\x20\x20" * player_w + sky * (width - left - player_w)
    boxes = min(spawned, 20)
    box_w = max(1, width // 40)
    box_row = bytearray(ground_row)
    for i in range(boxes):
        start = (i * 2 * box_w) * 3
        box_row[start:start + box_w * 3] = b"\xc0\x90\x40" * box_w
    for y in range(height):
        if y >= ground_y:
            rows.append(bytes(box_row) if y < ground_y + max(1, height // 16) else ground_row)
        elif y >= ground_y - max(1, height // 10):
            rows.append(player_row)
        else:
            rows.append(sky_row)
    return rows


# --------------------------------------------------------------------------- the game

class _Refused(Exception):
    """A command the game will not carry out: an ``ok: false`` outcome."""


class HandmadeGame:
    """The game: state owned by the loop thread (under ``lock``), served by an HTTP thread pool."""

    def __init__(self, *, features: Iterable[str] = FEATURES, hz: float = 120.0, event_buffer: int = 64,
                 description: str = "A hand-made test game: move the red block with move {dx}; nothing ends it.",
                 ui_text: str | None = None, size: tuple[int, int] = (320, 240), unavailable: str | None = None,
                 start_paused: bool | None = None, register: bool = False, lies: Iterable[str] = (),
                 port: int = 0, environ: Mapping[str, str] | None = None,
                 snapshot_max_bytes: int | None = None, snapshot_portable: bool = True, noise: bool = False) -> None:
        self.features = [f for f in FEATURES if f in set(features)]
        unknown = set(lies) - set(LIES)
        if unknown:
            raise ValueError(f"unknown lies: {sorted(unknown)}; known: {sorted(LIES)}")
        self.lies = set(lies)
        self.hz = hz
        self.description = description if "huge-description" not in self.lies else "d" * 3_000_000
        self.ui_text = ui_text
        self.size = size
        self.unavailable = unavailable
        self.environ = dict(os.environ if environ is None else environ)
        if start_paused is None:
            start_paused = self.environ.get("GAME_BRIDGE_START_PAUSED") == "1"
        self.register = register
        self.requested_port = port
        self.lock = threading.Condition()
        self.frame = 0
        self.sim_frame = 0
        self.paused = bool(start_paused and "clock" in self.features and "start-paused-ignored" not in self.lies)
        self.next_id = 0
        self.completed = 0
        self._finished: set[int] = set()  # done, waiting for an earlier command to be
        self.waiting_input: list[tuple[int, str, dict[str, str]]] = []  # for the next simulated frame
        self.queue: collections.deque[tuple[int, str, dict[str, str]]] = collections.deque()
        self.results: collections.deque[dict[str, Any]] = collections.deque(maxlen=32)
        self._late_results: list[dict[str, Any]] = []  # results-late: held back from the next /state
        self._shown_late: list[dict[str, Any]] = []  # ...and published on the frame after it was served
        self._early_step_shown = True  # step-early: its frames wait until a /state has shown it complete
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=max(1, event_buffer))
        self.seq = 0
        self.x = 0
        self.spawned = 0
        self.last_input: dict[str, Any] | None = None
        self.stepping: tuple[int, int] | None = None  # (command id, frames left)
        self.shots: list[dict[str, Any]] = []  # pending screenshot requests, rendered by the loop
        self.requests: list[str] = []  # every path served, in order
        self.closed = threading.Event()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._connections: set[Any] = set()  # open sockets, shut on stop so keep-alive ends too
        self.entry_path: Path | None = None
        #: ``snapshot``: the snapshots kept (id -> the saved world, or raw posted bytes), the
        #: largest POST taken (None: not said in /health, the contract's 64 MiB), and whether
        #: GET /snapshot sends bytes (False: 409, live copies only).
        self.snapshots: dict[str, Any] = {}
        self.snapshot_count = 0
        self.snapshot_max_bytes = snapshot_max_bytes
        self.snapshot_portable = snapshot_portable
        #: ``noise``: a world that draws from the system's randomness each simulated frame
        #: (``game.noise``), so the same inputs do not give the same game.
        self.noise: float | None = 0.0 if noise else None

    # ------------------------------------------------------------------ life
    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "HandmadeGame":
        """Bind and start serving (once; starting again does nothing)."""
        if self._server is not None:
            return self
        self._server = ThreadingHTTPServer(("127.0.0.1", self.requested_port), _handler(self))
        self._server.daemon_threads = True
        server = self._server
        for target, name in ((self._loop, "handmade-loop"), (lambda: server.serve_forever(0.02), "handmade-http")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.register:
            self._write_entry()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            self.lock.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for conn in list(self._connections):
            try:
                conn.shutdown(2)
            except OSError:
                pass
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(5)
        if self.entry_path is not None:
            try:
                self.entry_path.unlink()
            except OSError:
                pass
            self.entry_path = None
        self.closed.set()

    def __enter__(self) -> "HandmadeGame":
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()

    def _write_entry(self) -> None:
        env = self.environ
        directory = Path(env["GAME_BRIDGE_INSTANCES"]) if env.get("GAME_BRIDGE_INSTANCES") else (
            Path(env["GAME_BRIDGE_HOME"]) / "instances" if env.get("GAME_BRIDGE_HOME")
            else Path.home() / ".game-bridge" / "instances")
        entry = {"name": "Handmade", "version": "1.0", "protocol": 1, "port": self.port, "pid": os.getpid(),
                 "host": "127.0.0.1", "started": datetime.now(timezone.utc).isoformat(), "cwd": os.getcwd()}
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{os.getpid()}.json"
            tmp = directory / f".{os.getpid()}.tmp"
            tmp.write_text(json.dumps(entry))
            os.replace(tmp, path)
            self.entry_path = path
        except OSError:
            pass  # advertising, not infrastructure

    # ------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        period = 1.0 / self.hz
        next_at = time.monotonic()
        while not self._stop.is_set():
            with self.lock:
                self._tick()
                self.lock.notify_all()
            next_at += period
            delay = next_at - time.monotonic()
            if delay < -period:
                next_at = time.monotonic()
            elif delay > 0:
                self._stop.wait(delay)

    def _tick(self) -> None:
        self.frame += 1
        if self._shown_late:
            self.results.extend(self._shown_late)
            self._shown_late.clear()
        simulate = not self.paused or "simframe-runs-while-paused" in self.lies
        if self.waiting_input and (simulate or self.stepping is not None):  # this frame reads them
            for command_id, cmd, args in self.waiting_input:
                self._finish(command_id, True, self._deliver(cmd, args))
            self.waiting_input.clear()
        if self.stepping is not None and self._early_step_shown:
            command_id, left = self.stepping
            self.sim_frame += 1
            left -= 1
            if left <= 0:
                self.stepping = None
                if "step-early" not in self.lies:
                    self._finish(command_id, True, {"simFrame": self.sim_frame})
            else:
                self.stepping = (command_id, left)
            self._noise()
        elif simulate:
            self.sim_frame += 1
            self._noise()
        while self.queue and self.stepping is None:
            command_id, cmd, args = self.queue.popleft()
            try:
                result = self._apply(command_id, cmd, args)
            except _Refused as exc:
                self._finish(command_id, False, str(exc))
            else:
                if result is _WAITS:
                    continue
                if self.stepping is None or "step-early" in self.lies:
                    self._finish(command_id, True, result)
                    # by request, not by time: on a loaded machine a frame or two could run
                    # before the snapshot that shows it complete, and the lie would vary
                    self._early_step_shown = self.stepping is None
        for shot in self.shots:
            self._render_shot(shot)
        self.shots.clear()

    def _noise(self) -> None:
        if self.noise is not None:
            self.noise = round(int.from_bytes(os.urandom(4), "big") / 2**32, 6)

    def _finish(self, command_id: int, ok: bool, outcome: Any) -> None:
        self._finished.add(command_id)
        while self.completed + 1 in self._finished:  # in queue order
            self._finished.discard(self.completed + 1)
            self.completed += 1
        entry: dict[str, Any] = {"id": command_id, "ok": ok}
        if not ok:
            entry["error"] = outcome
        elif outcome is not None:
            entry["result"] = outcome
        if "results-bad-types" in self.lies:
            entry = {"id": str(command_id), "ok": "yes" if ok else "no", "error": 42}
        if "results-late" in self.lies:
            self._late_results.append(entry)
        elif "results-missing" not in self.lies:
            self.results.append(entry)

    def _event(self, m: str, **fields: Any) -> None:
        self.seq += 2 if "seq-gap" in self.lies else 1
        self.events.append({"seq": self.seq, "m": m, **fields})

    # ------------------------------------------------------------------ commands
    def commands(self) -> list[str]:
        names = ["move", "spawn", "emit", "noop", "close"]
        if "clock" in self.features:
            names += ["pause", "resume", "step"]
        if "input" in self.features:
            names += ["key", "mouse", "text"]
        if "snapshot" in self.features:
            names += ["snapshot_save", "snapshot_load", "snapshot_drop"]
        return names

    @staticmethod
    def _int(args: Mapping[str, str], name: str, low: int, high: int, default: int | None = None) -> int:
        if name not in args:
            if default is None:
                raise _Refused(f"{name} is required")
            return default
        try:
            value = int(args[name])
        except ValueError:
            raise _Refused(f"{name} must be a whole number (got {args[name]!r})") from None
        if not low <= value <= high:
            raise _Refused(f"{name} must be between {low} and {high} (got {value})")
        return value

    def _apply(self, command_id: int, cmd: str, args: dict[str, str]) -> Any:
        if cmd == "move":
            self.x += self._int(args, "dx", -3, 3)
            self._event("moved", x=self.x)
            return {"x": self.x}
        if cmd == "spawn":
            kind = args.get("kind", "crate")
            if kind not in ("crate", "barrel"):
                raise _Refused(f"kind must be crate or barrel (got {kind!r})")
            self.spawned += 1
            name = f"{kind}-{self.spawned}"
            self._event("spawned", name=name)
            return {"spawned": "s" * 3_000_000 if "huge-result" in self.lies else name}
        if cmd == "emit":
            n = self._int(args, "n", 1, 1000, 1)
            if "seq-restart" in self.lies:
                self.seq = 0
            for i in range(n):
                self._event("ping", i=i)
            return {"emitted": n}
        if cmd == "noop":
            return None
        if cmd == "close":
            threading.Thread(target=self.stop, name="handmade-close", daemon=True).start()
            return None
        if cmd == "pause":
            self.paused = True
            return {"paused": True}
        if cmd == "resume":
            if "resume-ignored" not in self.lies:
                self.paused = False
            return {"paused": self.paused}
        if cmd == "step":
            frames = self._int(args, "frames", 1, 10000, 1)
            if "step-short" in self.lies:
                frames -= 1
            if frames <= 0:
                return {"simFrame": self.sim_frame}
            self.stepping = (command_id, frames)
            return {"simFrame": self.sim_frame}
        if cmd == "snapshot_save":
            if len(self.snapshots) >= SNAPSHOTS_KEPT and "snapshot-no-limit" not in self.lies:
                raise _Refused(f"{SNAPSHOTS_KEPT} snapshots are kept already: snapshot_drop one first")
            world = self.world()
            snapshot_id = self._keep_snapshot(world)
            if "snapshot-save-bad-id" in self.lies:
                snapshot_id = "../" + snapshot_id
            return {"id": snapshot_id, "simFrame": self.sim_frame, "bytes": len(encode_snapshot(world))}
        if cmd == "snapshot_load":
            kept = self.snapshots.get(args.get("id", ""))
            if kept is None:
                raise _Refused(f"no snapshot {args.get('id', '')!r}")
            world = kept if isinstance(kept, dict) else decode_snapshot(kept)  # junk posted unchecked fails here
            self.x, self.spawned, self.last_input = world["x"], world["spawned"], world["lastInput"]
            if "snapshot-load-partial" not in self.lies:
                self.sim_frame = world["simFrame"]
            if "snapshot-load-pauses" in self.lies:
                self.paused = True
            if "snapshot-event-no-id" in self.lies:
                self._event("snapshot:loaded")
            else:
                self._event("snapshot:loaded", id=args["id"])
            return {"id": args["id"], "simFrame": self.sim_frame}
        if cmd == "snapshot_drop":
            if "snapshot-drop-ignored" in self.lies:
                return {"dropped": args.get("id", "")}
            if self.snapshots.pop(args.get("id", ""), None) is None:
                raise _Refused(f"no snapshot {args.get('id', '')!r}")
            return {"dropped": args["id"]}
        if cmd in ("key", "mouse", "text"):
            if self.paused and self.stepping is None and "simframe-runs-while-paused" not in self.lies:
                self.waiting_input.append((command_id, cmd, args))  # the game reads it in its next frame
                return _WAITS
            return self._deliver(cmd, args)
        raise _Refused(f"unknown command {cmd!r}")  # not reached: /command refuses these

    def world(self) -> dict[str, Any]:
        """Everything this game's future depends on (its commands are its only input)."""
        return {"game": "Handmade", "version": "1.0", "simFrame": self.sim_frame, "x": self.x,
                "spawned": self.spawned, "lastInput": self.last_input}

    def _keep_snapshot(self, kept: Any) -> str:
        self.snapshot_count += 1
        snapshot_id = f"h{self.snapshot_count}"
        self.snapshots[snapshot_id] = kept
        return snapshot_id

    def _deliver(self, cmd: str, args: dict[str, str]) -> Any:
        self.last_input = {"device": cmd, **args}
        self._event("input", device=cmd)
        return None

    # ------------------------------------------------------------------ answers
    def health(self) -> dict[str, Any]:
        answer = {"ok": True, "frame": self.frame, "completedCommandId": self.completed}
        if self.features:
            answer["features"] = list(self.features)
        if "snapshot" in self.features and self.snapshot_max_bytes is not None:
            answer["snapshotMaxBytes"] = self.snapshot_max_bytes
        return answer

    def snapshot(self, view: str | None = None) -> dict[str, Any]:
        """``/state`` (call with ``lock`` held, or accept a torn read in a test)."""
        ui: dict[str, Any] = {"screen": "PausedScreen" if self.paused else "PlayScreen",
                              "text": self.ui_text if self.ui_text is not None else self._board_text(),
                              "elements": [{"label": "Restart", "visible": True}]}
        recent = list(self.events)[-min(10, self.events.maxlen or 10):]
        if "events" not in self.features or "events-no-seq" in self.lies:
            recent = [{k: v for k, v in e.items() if k != "seq"} for e in recent]
        doc: dict[str, Any] = {
            "frame": self.frame, "simFrame": self.sim_frame, "completedCommandId": self.completed,
            "paused": self.paused, "ui": ui, "events": recent,
            "game": {"x": self.x, "spawned": self.spawned, "state": "RUNNING", "lastInput": self.last_input,
                     "board": [[0] * 8 for _ in range(4)], "meta": {"seed": 7},
                     **({"noise": self.noise} if self.noise is not None else {})},
            "extra": {"note": "only in the full state"},
        }
        if "results" in self.features:
            doc["commandResults"] = ({str(e.get("id")): e for e in self.results}
                                     if "results-not-list" in self.lies else list(self.results))
        if view == "digest" and "view" in self.features and "view-leaks" not in self.lies:
            doc = {k: v for k, v in doc.items() if k in _ALLOWED_DIGEST_KEYS or k == "game"}
            doc["game"] = {k: v for k, v in doc["game"].items() if not isinstance(v, (dict, list))}
            if "view-drops" in self.lies:
                doc.pop("completedCommandId", None)
                doc["game"] = {}
        return doc

    def _board_text(self) -> str:
        cells = ["."] * 21
        cells[max(-10, min(10, self.x)) + 10] = "@"
        return "".join(cells) + f"  spawned {self.spawned}"

    def manifest(self) -> dict[str, Any]:
        def arg(name: str, type_: str, description: str, **extra: Any) -> dict[str, Any]:
            return {"name": name, "type": type_, "description": description, **extra}

        tools = [
            {"name": "move", "description": "Move the red block by dx cells.",
             "args": [arg("dx", "integer", "cells to move", required=True, minimum=-3, maximum=3)]},
            {"name": "spawn", "description": "Spawn a thing; its name comes back as the result.",
             "args": [arg("kind", "string", "what to spawn", enum=["crate", "barrel"], default="crate")]},
            {"name": "emit", "description": "Make n ping events.",
             "args": [arg("n", "integer", "how many", minimum=1, maximum=1000, default="1")]},
            {"name": "noop", "description": "Do nothing (harmless)."},
        ]
        if "clock" in self.features:
            tools += [{"name": "pause", "description": "Stop the simulation clock."},
                      {"name": "resume", "description": "Restart the simulation clock."},
                      {"name": "step", "description": "Run frames simulation frames, then stay paused.",
                       "args": [arg("frames", "integer", "frames to run", minimum=1, maximum=10000, default="1")]}]
        if "input" in self.features:
            key_name = "name" if "input-wrong-args" in self.lies else "key"
            mouse = [arg("x", "integer", "window x"), arg("y", "integer", "window y"),
                     arg("action", "string", "click, down, up, move or wheel",
                         enum=["click", "down", "up", "move", "wheel"])]
            if "input-no-wheel" not in self.lies:
                mouse += [arg("dx", "integer", "wheel: pixels right", default="0"),
                          arg("dy", "integer", "wheel: pixels down", default="0")]
            if "input-wrong-args" not in self.lies:
                mouse.insert(2, arg("button", "integer", "1 left, 2 middle, 3 right", enum=[1, 2, 3]))
            tools += [{"name": "key", "description": "Press a key.",
                       "args": [arg(key_name, "string", "key name"),
                                arg("action", "string", "press, down or up", enum=["press", "down", "up"]),
                                arg("frames", "integer", "frames held", minimum=1)]},
                      {"name": "mouse", "description": "Use the pointer.", "args": mouse},
                      {"name": "text", "description": "Type text.", "args": [arg("text", "string", "the text")]}]
        return {"game": {"name": "Handmade", "version": "1.0", "protocol": 1, "description": self.description},
                "toolsets": [{"name": "play", "description": "Everything this game does.", "tools": tools}],
                "passthrough": {"description": "Nothing unpublished.", "examples": []}}

    # ------------------------------------------------------------------ screenshots
    def _render_shot(self, shot: dict[str, Any]) -> None:
        """On the loop thread: render at the frame after the request arrived."""
        if "screenshot-stale" in self.lies:
            frame, x = max(0, shot["frame_at_request"] - 50), self.x - 1
        else:
            frame, x = self.frame, self.x
        native = self.size
        w, h = native if "screenshot-oversize" in self.lies else fit(native, shot["max_w"], shot["max_h"])
        claim = (w * 2, h * 2) if "screenshot-ihdr-mismatch" in self.lies else None
        shot["png"] = encode_png(w, h, render(w, h, x, self.spawned, self.paused), claim=claim)
        shot["frame"] = frame
        shot["done"].set()


def _handler(game: HandmadeGame) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            game._connections.add(self.connection)

        def finish(self) -> None:
            game._connections.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def send(self, status: int, body: bytes, ctype: str = "application/json",
                 headers: Mapping[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def send_json(self, status: int, doc: Any) -> None:
            self.send(status, json.dumps(doc).encode())

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
            if host not in ("127.0.0.1", "localhost", "::1") or self.headers.get("Origin") is not None:
                self.send_json(403, {"ok": False, "error": "foreign Host or Origin refused"})
                return
            parsed = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
            game.requests.append(self.path)
            try:
                route = {"/health": self.on_health, "/state": self.on_state, "/command": self.on_command,
                         "/tools": self.on_tools, "/events": self.on_events, "/screenshot": self.on_screenshot,
                         "/snapshot": self.on_snapshot}
                handler = route.get(parsed.path)
                if handler is None or (parsed.path == "/events" and "events" not in game.features) or (
                        parsed.path == "/screenshot" and "screenshot" not in game.features) or (
                        parsed.path == "/snapshot" and "snapshot" not in game.features):
                    self.send_json(404, {"ok": False, "error": f"no such endpoint {parsed.path}"})
                    return
                handler(query)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            """``POST /snapshot``: store bytes to load later, if they are this build's snapshot."""
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
            if host not in ("127.0.0.1", "localhost", "::1") or self.headers.get("Origin") is not None:
                self.send_json(403, {"ok": False, "error": "foreign Host or Origin refused"})
                return
            if urllib.parse.urlsplit(self.path).path != "/snapshot" or "snapshot" not in game.features:
                self.send_json(404, {"ok": False, "error": "only POST /snapshot is served"})
                self.close_connection = True
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self.send(400, b"a POST needs a Content-Length", "text/plain")
                self.close_connection = True
                return
            cap = game.snapshot_max_bytes if game.snapshot_max_bytes is not None else 64 * 1024 * 1024
            if length > cap:
                self.send(413, f"{length} bytes is over snapshotMaxBytes ({cap})".encode(), "text/plain")
                self.close_connection = True  # the body is not read
                return
            data = self.rfile.read(length)
            if len(data) < length:
                return  # the peer went away mid-body
            try:
                kept: Any = data if "snapshot-post-unchecked" in game.lies else decode_snapshot(data)
            except ValueError as exc:
                self.send(400, b"" if "snapshot-400-silent" in game.lies else str(exc).encode(), "text/plain")
                return
            with game.lock:
                if len(game.snapshots) >= SNAPSHOTS_KEPT:
                    self.send(400, f"{SNAPSHOTS_KEPT} snapshots are kept already".encode(), "text/plain")
                    return
                snapshot_id = game._keep_snapshot(kept)
            self.send_json(200, {"stored": True} if "snapshot-post-no-id" in game.lies else {"id": snapshot_id})

        def on_snapshot(self, query: Mapping[str, str]) -> None:
            with game.lock:
                kept = game.snapshots.get(query.get("id", ""))
            if kept is None:
                self.send(404, f"no snapshot {query.get('id', '')!r}".encode(), "text/plain")
            elif not game.snapshot_portable:
                self.send(409, b"this game keeps its snapshots as live copies in its process", "text/plain")
            elif "snapshot-get-junk" in game.lies:
                self.send(200, b"HANDMADE-SNAPSHOT 0\nnot this build's", "application/octet-stream")
            else:
                self.send(200, encode_snapshot(kept) if isinstance(kept, dict) else kept,
                          "text/plain" if "snapshot-get-text" in game.lies else "application/octet-stream")

        def _hold(self, query: Mapping[str, str]) -> str | None:
            """``after``/``waitMs``: hold until done or the time is up. A problem string for 400."""
            if "after" not in game.features or "after" not in query or "after-ignored" in game.lies:
                return None
            try:
                after = int(query["after"])
                wait_ms = int(query.get("waitMs", "0"))
            except ValueError:
                return "after and waitMs must be whole numbers"
            deadline = time.monotonic() + max(0, min(10000, wait_ms)) / 1000
            with game.lock:
                while (game.completed < after or "after-hangs" in game.lies) and not game._stop.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    game.lock.wait(left)
            return None

        def on_health(self, query: Mapping[str, str]) -> None:
            problem = self._hold(query)
            if problem:
                self.send_json(400, {"ok": False, "error": problem})
                return
            with game.lock:
                doc = game.health()
            self.send_json(200, doc)

        def on_state(self, query: Mapping[str, str]) -> None:
            problem = self._hold(query)
            if problem:
                self.send_json(400, {"ok": False, "error": problem})
                return
            with game.lock:
                doc = game.snapshot(query.get("view"))
                # results-late: a snapshot showing a command complete without its entry has been
                # served, so the entry may appear from the next frame on (by request, not by time:
                # a loaded machine's polls never skip past the lie)
                game._shown_late.extend(game._late_results)
                game._late_results.clear()
                game._early_step_shown = True
            self.send_json(200, doc)

        def on_tools(self, _query: Mapping[str, str]) -> None:
            self.send_json(200, game.manifest())

        def on_command(self, query: Mapping[str, str]) -> None:
            args = dict(query)
            cmd = args.pop("cmd", "")
            if cmd not in game.commands():
                self.send_json(404, {"accepted": False, "error": f"unknown command {cmd!r}",
                                     "commands": game.commands()})
                return
            with game.lock:
                game.next_id += 1
                command_id = game.next_id
                game.queue.append((command_id, cmd, args))
                frame = game.frame
            self.send_json(200, {"accepted": True, "commandId": command_id, "frame": frame})

        def on_events(self, query: Mapping[str, str]) -> None:
            try:
                since = int(query.get("since", "0"))
                limit = int(query.get("limit", "100"))
            except ValueError:
                self.send_json(400, {"ok": False, "error": "since and limit must be whole numbers"})
                return
            if not 1 <= limit <= 1000:
                self.send_json(400, {"ok": False, "error": f"limit must be 1 to 1000 (got {limit})"})
                return
            with game.lock:
                buffered = list(game.events)
            newer = [e for e in buffered if e["seq"] > since]
            page = newer[:limit]
            dropped = bool(buffered) and buffered[0]["seq"] > since + 1 and game.seq > since
            if "events-no-dropped" in game.lies:
                dropped = False
            nxt = page[-1]["seq"] if page and "events-next-wrong" not in game.lies else since
            self.send_json(200, {"events": page, "next": nxt, "dropped": dropped})

        def on_screenshot(self, query: Mapping[str, str]) -> None:
            try:
                max_w = int(query.get("maxWidth", "768"))
                max_h = int(query.get("maxHeight", "768"))
            except ValueError:
                self.send_json(400, {"ok": False, "error": "maxWidth and maxHeight must be whole numbers"})
                return
            if max_w < 1 or max_h < 1:
                self.send_json(400, {"ok": False, "error": "maxWidth and maxHeight must be at least 1"})
                return
            if "screenshot-503-bad" in game.lies:
                self.send(503, b"Service Unavailable", "text/plain")
                return
            if game.unavailable is not None:
                self.send_json(503, {"ok": False, "error": game.unavailable})
                return
            if "screenshot-never" in game.lies:
                game._stop.wait(3600)
                return
            if "screenshot-huge" in game.lies:
                self._send_huge()
                return
            with game.lock:
                shot = {"max_w": max_w, "max_h": max_h, "frame_at_request": game.frame, "done": threading.Event()}
                game.shots.append(shot)
            if not shot["done"].wait(10):
                self.send_json(503, {"ok": False, "error": "the loop did not render in 10 s"})
                return
            body: bytes = shot["png"]
            ctype = "image/png"
            if "screenshot-not-image" in game.lies:
                body = b"this is not an image, it is a sentence"
            elif "screenshot-wrong-type" in game.lies:
                ctype = "text/plain"
            elif "screenshot-truncated" in game.lies:
                body = body[: len(body) // 2]
            headers = {} if "screenshot-no-frame" in game.lies else {"X-Game-Frame": str(shot["frame"])}
            if "input" in game.features and "screenshot-no-window" not in game.lies:
                headers["X-Game-Window"] = f"{game.size[0]}x{game.size[1]}"
            self.send(200, body, ctype, headers)

        def _send_huge(self) -> None:
            total = 100 * 1024 * 1024
            head = encode_png(64, 64, render(64, 64, 0, 0, False))
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(total))
            self.send_header("X-Game-Frame", str(game.frame))
            self.end_headers()
            self.wfile.write(head[:33])  # signature and IHDR, then filler
            block = b"\x00" * (1024 * 1024)
            sent = 33
            while sent < total and not game._stop.is_set():
                piece = block[: min(len(block), total - sent)]
                self.wfile.write(piece)
                sent += len(piece)

    return Handler


# --------------------------------------------------------------------------- as a process

def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="handmade.py", description="A hand-made game for game-bridge-mcp tests.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--features", default="all", help="comma-separated, or all, or none")
    parser.add_argument("--hz", type=float, default=120.0)
    parser.add_argument("--events", type=int, default=64, help="event buffer size")
    parser.add_argument("--lie", action="append", default=[], choices=sorted(LIES))
    parser.add_argument("--register", action="store_true", help="write a registry entry")
    parser.add_argument("--description")
    parser.add_argument("--ui-text")
    parser.add_argument("--size", default="320x240")
    parser.add_argument("--unavailable", help="answer /screenshot with 503 and this reason")
    parser.add_argument("--start-paused", action="store_true", default=None)
    parser.add_argument("--snapshot-max-bytes", type=int, default=None)
    parser.add_argument("--snapshot-live-only", action="store_true", help="answer GET /snapshot with 409")
    parser.add_argument("--noise", action="store_true", help="game.noise: system randomness every simulated frame")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = _parse(sys.argv[1:] if argv is None else argv)
    features = (FEATURES if ns.features == "all" else () if ns.features == "none"
                else tuple(f.strip() for f in ns.features.split(",") if f.strip()))
    w, _, h = ns.size.partition("x")
    extra = {"description": ns.description} if ns.description is not None else {}
    game = HandmadeGame(features=features, hz=ns.hz, event_buffer=ns.events, lies=ns.lie, register=ns.register,
                        ui_text=ns.ui_text, size=(int(w), int(h)), unavailable=ns.unavailable,
                        start_paused=ns.start_paused, port=ns.port, snapshot_max_bytes=ns.snapshot_max_bytes,
                        snapshot_portable=not ns.snapshot_live_only, noise=ns.noise, **extra)
    game.start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: threading.Thread(target=game.stop, daemon=True).start())
    sys.stderr.write(f"handmade game listening on 127.0.0.1:{game.port} features={','.join(game.features)}\n")
    sys.stderr.flush()
    while not game.closed.wait(0.2):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
