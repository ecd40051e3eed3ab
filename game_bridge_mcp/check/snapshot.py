"""``check``: an advertised ``snapshot``: a save, steps, a load that gives back the saved
``/state``, the same future from the same steps; the bytes sent and taken back; damaged,
foreign, disguised and oversized bytes refused; the 16-snapshot limit; everything the check
made dropped and the clock left as it was found."""

from __future__ import annotations

import json
import pickle
import socket
import time
from typing import Any

from ..contract import (CLOCK, NOT_RESTORED_KEYS, RESULTS, SNAPSHOT, SNAPSHOT_DROP, SNAPSHOT_LOAD, SNAPSHOT_LOADED_EVENT,
                        SNAPSHOT_MAX_BYTES, SNAPSHOT_MAX_BYTES_FIELD, SNAPSHOT_SAVE, SNAPSHOTS_KEPT)
from ..wire.transport import TransportError
from .base import FAIL, PASS, WARN, CheckSession, is_int, show_value

#: Frames stepped after a save and again after the load.
FUTURE_FRAMES = 5


def comparable(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in NOT_RESTORED_KEYS}


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first path where ``b`` differs from ``a``, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            found = first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}.{index}" if path else str(index))
            if found:
                return found
        return None
    return None if a == b else f"{path or '(root)'}: {show_value(a, 60)} then, {show_value(b, 60)} now"


class SnapshotChecks(CheckSession):
    """snapshot_save / snapshot_load / snapshot_drop and ``/snapshot``."""

    def _snap_run(self, cmd: str, args: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, dict[str, Any], str]:
        """Send, wait for completion: ``(state then, its commandResults entry, problem)``."""
        command_id, problem = self.send(cmd, args)
        if command_id is None:
            return None, {}, problem
        state, problem = self.completed(command_id)
        if state is None:
            return None, {}, problem
        entries = state.get("commandResults")
        entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == command_id), None) \
            if isinstance(entries, list) else None
        if entry is None:
            return None, {}, f"{cmd} completed but commandResults has no entry for it"
        return state, entry, ""

    def _snap_step(self, frames: int) -> dict[str, Any] | None:
        state, entry, problem = self._snap_run("step", {"frames": str(frames)})
        if state is None or entry.get("ok") is not True:
            self.report(FAIL, f"snapshot: step {frames}: {problem or show_value(entry)}")
            return None
        return state

    def check_snapshot(self, features: list[str]) -> None:
        missing = [name for name in (RESULTS, CLOCK) if name not in features]
        if missing:
            self.report(FAIL, f"snapshot: advertised without {' and '.join(missing)}",
                        "A game with snapshot also has results (a save's id comes back as its result) and clock "
                        "(a snapshot is of a frame, and the same future needs stepped frames).")
            return
        before, problem = self.read("/state")
        if before is None:
            self.report(FAIL, f"snapshot: {problem}")
            return
        was_paused = before.get("paused") is True
        made: list[str] = []
        try:
            self.send("pause")
            self._round_trip(made)
        finally:
            for snapshot_id in made:
                self.send(SNAPSHOT_DROP, {"id": snapshot_id})
            if not was_paused:
                self.send("resume")

    def _save(self, made: list[str]) -> tuple[str, dict[str, Any]] | None:
        state, entry, problem = self._snap_run(SNAPSHOT_SAVE)
        if state is None:
            self.report(FAIL, f"snapshot: snapshot_save: {problem}")
            return None
        result = entry.get("result")
        if entry.get("ok") is not True or not isinstance(result, dict):
            self.report(FAIL, f"snapshot: snapshot_save did not succeed with a result: {show_value(entry)}",
                        "Its result is {\"id\": \"<id>\", \"simFrame\": <n>, \"bytes\": <n>}.")
            return None
        snapshot_id = result.get("id")
        if not isinstance(snapshot_id, str) or not snapshot_id or len(snapshot_id) > 64 or not all(
                ch.isascii() and (ch.isalnum() or ch in "._-") for ch in snapshot_id):
            self.report(FAIL, f"snapshot: snapshot_save's id {show_value(snapshot_id)} is not 1-64 of [A-Za-z0-9._-]")
            return None
        made.append(snapshot_id)
        if result.get("simFrame") != state.get("simFrame") or not is_int(result.get("bytes")):
            self.report(FAIL, f"snapshot: snapshot_save's result {show_value(result)} does not say the paused game's "
                              f"simFrame ({show_value(state.get('simFrame'))}) and its bytes as whole numbers")
            return None
        return snapshot_id, state

    def _load(self, snapshot_id: str, saved: dict[str, Any], what: str) -> bool:
        state, entry, problem = self._snap_run(SNAPSHOT_LOAD, {"id": snapshot_id})
        if state is None or entry.get("ok") is not True:
            self.report(FAIL, f"snapshot: snapshot_load of {what}: {problem or show_value(entry)}")
            return False
        differs = first_difference(comparable(saved), comparable(state))
        if differs:
            self.report(FAIL, f"snapshot: after snapshot_load of {what}, /state is not what it was at saving: {differs}",
                        "A load gives back /state as it was (simFrame included), except frame, completedCommandId, "
                        "commandResults and the events, which go on counting.")
            return False
        return True

    def _round_trip(self, made: list[str]) -> None:
        saved = self._save(made)
        if saved is None:
            return
        snapshot_id, state = saved
        after = self._snap_step(FUTURE_FRAMES)
        if after is None:
            return
        if not self._load(snapshot_id, state, "the saved id"):
            return
        events, _ = self.read("/state")
        listed = (events or {}).get("events")
        recent = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
        loaded = [e for e in recent if e.get("m") == SNAPSHOT_LOADED_EVENT]
        if not loaded:
            self.report(FAIL, f"snapshot: no {SNAPSHOT_LOADED_EVENT} event after a load (recent events: "
                              f"{show_value([e.get('m') for e in recent], 80)})",
                        "A load adds the event snapshot:loaded with its id.")
            return
        if loaded[-1].get("id") != snapshot_id:
            self.report(FAIL, f"snapshot: the {SNAPSHOT_LOADED_EVENT} event after loading {snapshot_id!r} carries id "
                              f"{show_value(loaded[-1].get('id'))}", "A load adds the event snapshot:loaded with its id.")
            return
        again = self._snap_step(FUTURE_FRAMES)
        if again is None:
            return
        differs = first_difference(comparable(after), comparable(again))
        if differs:
            self.report(FAIL, f"snapshot: the same {FUTURE_FRAMES} frames after the load gave another state: {differs}",
                        "From a loaded snapshot the same commands at the same simulation frames give the same states: "
                        "save everything the future depends on (random generators, timers).")
            return
        self.report(PASS, f"snapshot: a load gives back the saved /state (simFrame {state.get('simFrame')}) and the "
                          f"same {FUTURE_FRAMES} frames after it")
        self._bytes(snapshot_id, state, made)
        self._unknown_id()
        self._clock_kept(snapshot_id)
        self._limit(made)

    def _bytes(self, snapshot_id: str, saved: dict[str, Any], made: list[str]) -> None:
        try:
            response = self.get(f"{SNAPSHOT}?id={snapshot_id}")
        except TransportError as exc:
            self.report(FAIL, f"snapshot: GET {SNAPSHOT} got no usable answer ({exc.kind}: {exc.detail})")
            return
        if response.status == 409:
            self.report(PASS, "snapshot: GET /snapshot answers 409: the game keeps live copies (forks re-execute)",
                        f"Its reason: {show_value(response.body[:200].decode('utf-8', 'replace'))}")
            return
        if response.status != 200 or not response.body:
            self.report(FAIL, f"snapshot: GET {SNAPSHOT}?id= answered HTTP {response.status} "
                              f"({len(response.body)} bytes), not 200 with the bytes or 409")
            return
        data = response.body
        kind = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        if kind != "application/octet-stream":
            self.report(WARN, f"snapshot: GET {SNAPSHOT} answers Content-Type {show_value(kind or None)}, not "
                              "application/octet-stream", "The bridge moves the bytes whatever it says; the "
                              "extension names application/octet-stream.")
        posted = self._post(data)
        if not isinstance(posted, str):
            self.report(FAIL, f"snapshot: POST {SNAPSHOT} of the game's own bytes: {posted[1]}")
            return
        made.append(posted)
        if not self._load(posted, saved, "its own bytes posted back"):
            return
        self.report(PASS, f"snapshot: GET /snapshot sends {len(data):,} bytes, and POST /snapshot takes them back "
                          "to the same state")
        self._refusals(data, saved)

    def _post(self, body: bytes) -> str | tuple[int, str]:
        """POST ``body``: the id stored, or (status, what it said)."""
        try:
            response = self._open(self.base + SNAPSHOT, timeout=self.timeout_s, max_bytes=1024 * 1024,
                                  body=body)  # type: ignore[call-arg]
        except TransportError as exc:
            return 0, f"no usable answer ({exc.kind}: {exc.detail})"
        text = response.body[:200].decode("utf-8", "replace")
        if response.status != 200:
            return response.status, f"HTTP {response.status}: {show_value(text)}"
        try:
            doc = json.loads(response.body)
        except ValueError:
            return 200, f"HTTP 200 with a body that is not JSON: {show_value(text)}"
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
            return 200, f"HTTP 200 without {{\"id\": ...}}: {show_value(doc)}"
        return str(doc["id"])

    def _refusals(self, data: bytes, saved: dict[str, Any]) -> None:
        """Bytes that are not the game's own are refused with 400, and nothing changes."""
        before, _ = self.read("/state")
        disguised = pickle.dumps({"simFrame": 0, "__reduce__": "os.system"}, protocol=2)
        cases = {"cut off": data[: max(1, len(data) // 2)], "damaged": bytes([data[0] ^ 0xFF]) + data[1:],
                 "another game's": b'{"game": "not this one", "version": "0"}',
                 "a pickle (code in disguise)": disguised, "empty": b""}
        accepted: list[str] = []
        silent: list[str] = []
        for name, body in cases.items():
            posted = self._post(body)
            if isinstance(posted, str):
                accepted.append(name)
                self.send(SNAPSHOT_DROP, {"id": posted})
            elif posted[0] != 400:
                accepted.append(f"{name} ({posted[1]})")
            elif posted[1].endswith(('""', "''")):
                silent.append(name)
        after, _ = self.read("/state")
        if silent:
            self.report(WARN, f"snapshot: POST /snapshot refused {', '.join(silent)} bytes with 400 and no reason",
                        "Say why as text (another game, another build, damaged): the bridge shows it to the agent.")
        if accepted:
            self.report(FAIL, f"snapshot: POST /snapshot took bytes that are not this build's: {', '.join(accepted)}",
                        "Check the bytes whole (a checksum, the game's name and build) and answer 400 with the reason; "
                        "they are data, never code: any local process can POST.")
        elif before is not None and after is not None and first_difference(comparable(before), comparable(after)):
            self.report(FAIL, "snapshot: refused bytes changed the game: "
                              f"{first_difference(comparable(before), comparable(after))}")
        else:
            self.report(PASS, f"snapshot: POST /snapshot refuses {', '.join(cases)} bytes with 400, and nothing changes")
        self._oversize()

    def _oversize(self) -> None:
        cap = self.health_doc.get(SNAPSHOT_MAX_BYTES_FIELD)
        cap = cap if is_int(cap) and cap > 0 else SNAPSHOT_MAX_BYTES
        head = (f"POST {SNAPSHOT} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/octet-stream\r\n"
                f"Content-Length: {cap + 1}\r\nConnection: close\r\n\r\n").encode()
        status = None
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout_s) as sock:
                sock.sendall(head + b"\0" * 1024)
                answer = b""
                deadline = time.monotonic() + self.timeout_s
                while b"\r\n" not in answer and time.monotonic() < deadline:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            parts = answer.split(b" ", 2)
            status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        except OSError as exc:
            self.report(WARN, f"snapshot: a POST of {cap + 1:,} bytes (over snapshotMaxBytes) got no answer ({exc})",
                        "Answer 413 from the Content-Length alone, before reading the body.")
            return
        if status == 413:
            self.report(PASS, f"snapshot: a POST over snapshotMaxBytes ({cap:,}) is refused with 413 unread")
        else:
            self.report(FAIL, f"snapshot: a POST over snapshotMaxBytes ({cap:,}) answered {status}, not 413")

    def _clock_kept(self, snapshot_id: str) -> None:
        """Whether the clock runs is not part of a snapshot: loaded while it runs (the
        snapshot was saved paused), the game runs on."""
        command_id, problem = self.send("resume")
        try:
            if command_id is not None:
                _resumed, problem = self.completed(command_id)
            state, entry, problem = self._snap_run(SNAPSHOT_LOAD, {"id": snapshot_id}) if not problem \
                else (None, {}, f"resume: {problem}")
        finally:
            self.send("pause")
        if state is None or entry.get("ok") is not True:
            self.report(FAIL, f"snapshot: snapshot_load while the clock runs: {problem or show_value(entry)}")
        elif state.get("paused") is not False:
            self.report(FAIL, f"snapshot: a load while the clock ran left /state.paused "
                              f"{show_value(state.get('paused'))} (the snapshot was saved paused)",
                        "Whether the clock runs is not part of a snapshot: a load leaves it paused or running as "
                        "it was.")
        else:
            self.report(PASS, "snapshot: a load leaves the clock as it was (running here, saved paused)")

    def _unknown_id(self) -> None:
        _state, entry, problem = self._snap_run(SNAPSHOT_LOAD, {"id": "no-such-snapshot-from-check"})
        if entry.get("ok") is not False:
            self.report(FAIL, f"snapshot: snapshot_load of an unknown id did not fail: {problem or show_value(entry)}")

    def _limit(self, made: list[str]) -> None:
        taken = 0
        for _ in range(SNAPSHOTS_KEPT + 1):
            _state, entry, problem = self._snap_run(SNAPSHOT_SAVE)
            if entry.get("ok") is not True:
                break
            result = entry.get("result")
            if isinstance(result, dict) and isinstance(result.get("id"), str):
                made.append(result["id"])
            taken += 1
        else:
            self.report(FAIL, f"snapshot: the game kept more than {SNAPSHOTS_KEPT} snapshots it was not told to drop",
                        "Keep at most 16, and refuse snapshot_save with a reason that says so when full.")
            return
        full = entry.get("error")
        if made:  # snapshot_drop forgets one: the place it held takes a new save
            dropped = made.pop()
            self._snap_run(SNAPSHOT_DROP, {"id": dropped})
            _state, again, problem = self._snap_run(SNAPSHOT_SAVE)
            result = again.get("result")
            if isinstance(result, dict) and isinstance(result.get("id"), str):
                made.append(result["id"])
            if again.get("ok") is not True:
                self.report(FAIL, f"snapshot: full at {SNAPSHOTS_KEPT}, a snapshot_drop did not make room: the next "
                                  f"snapshot_save failed ({problem or show_value(again.get('error'), 100)})",
                            "snapshot_drop {id} forgets that snapshot: it no longer counts towards the 16.")
                return
        self.report(PASS, f"snapshot: full at {SNAPSHOTS_KEPT} kept (refused after {taken} more): "
                          f"{show_value(full, 100)}; a snapshot_drop makes room")


__all__ = ["FUTURE_FRAMES", "SnapshotChecks"]
