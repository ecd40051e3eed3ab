"""GameClient: one game instance's HTTP surface, and the command-then-confirm cycle.

``/command`` is fire-and-forget: the game answers when the command is *queued* and
applies it later on its own thread. ``command_and_sync`` therefore notes the returned
``commandId`` and polls until the game reports ``completedCommandId >= commandId``, so
the state it returns is genuinely the world after the command. Without
``completedCommandId`` it waits for ``frame`` to advance by two and says so
(``confirmation: "frames-advanced"``).

How it polls is described for users in the README ("How a command is confirmed"); in
code: ``_confirm`` runs the loop, ``_frame_plan`` and ``_next_wait`` decide when to ask
(from :class:`~game_bridge_mcp.wire.frames.FrameClock`, which explains how a game's frame
starts are learned), ``_next_state`` what to ask (``/health`` or ``/state``), and
``transport.KeepAliveSession`` how (kept-alive connections). A game that advertises
``after`` is asked once instead (``_confirm_held``).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, Callable

from .. import polling
from ..config import port_number
from ..jsonio import as_int, decode_json, decode_json_taking
from ..polling import Deadline, poll_until
from ..errors import (BridgeUsageError, CommandRejected, CommandTimeout, GameOffline, NotAGameSurface,
                      ScreenshotUnavailable)
from .events import EventsCursor, Page, read_page
from .frames import FrameClock
from .images import (SCREENSHOT_MAX_BYTES, ImageProblem, Screenshot, game_reason, inspect_image, parse_frame,
                     parse_window)
from .transport import (DEFAULT_MAX_BYTES, HEALTH_MAX_BYTES, HttpResponse, KeepAliveSession, Opener,
                        TransportError, loopback_opener)

log = logging.getLogger(__name__)


#: The longest ``/command`` URL (path and query) sent: the common request-line limit of
#: HTTP servers (8 KiB less the method and version), so a long argument is the caller's
#: clear error, not the game's 414.
MAX_COMMAND_URL = 8000


def _count(value: Any) -> int | None:
    """A counter the game reports (``frame``, ``commandId``, ``completedCommandId``): a
    whole number from 0 to 2**53, else None (unknown), so an absurd one (``1e400``, a
    400-digit number, -5) is never arithmetic's problem or a port's for good."""
    return as_int(value, minimum=0)

#: Poll intervals (seconds): the first poll is immediate, then these grow to the cap.
FIRST_INTERVAL_S = 0.0002
MAX_CHEAP_INTERVAL_S = 0.002
#: A /state fetch slower than this is "expensive": poll /health first.
CHEAP_STATE_S = 0.002
#: A /state (or its digest) no slower than this (or 1.5 /health) is polled itself, even
#: when /health carries completedCommandId: one round trip fewer per confirmation.
TINY_STATE_S = 0.0005
#: The longest wait for a predicted frame start (a slow loop gets an extra poll instead).
MAX_FRAME_WAIT_S = 0.05
#: After a frame that follows the command begins, keep polling at short intervals for
#: this long (at most half a frame): a game may apply commands a little into its frame.
SETTLE_S = 0.002
#: Around a predicted frame start, poll back to back for at most this long (or a quarter
#: frame) before backing off: the frame is due, and each poll is a fraction of a millisecond.
BURST_S = 0.001
#: How early to poll before a predicted frame start: about one poll's round trip, so the
#: poll reaches the game as the frame begins (and a poll that lands just before it
#: re-measures the frame's start).
MIN_LEAD_S = 0.00005
MAX_LEAD_S = 0.00015
#: ``after``: the longest hold the extensions page allows (ms); how much of the deadline
#: is kept for a held answer's transfer (plus twice what a /state of the kind asked
#: costs); a held answer this much (or 5 %) shorter than its waitMs, without the command,
#: breaks the rule; a hold of at least this many ms that lasted all of waitMs although the
#: command was done breaks it too (see GameClient._confirm_held).
MAX_WAIT_MS = 10000
HELD_RESERVE_S = 0.02
#: A connection to the game idle longer than this is not reused (servers close idle
#: connections after a few seconds to a minute; one that did is never reused anyway).
KEEP_IDLE_S = 20.0
EARLY_TOLERANCE_S = 0.005
HANG_CHECK_MS = 200


def _format_arg(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


#: At most this many feature names are kept, each at most this long.
MAX_FEATURES = 64
MAX_FEATURE_NAME = 64


def read_features(health: Mapping[str, Any]) -> frozenset[str]:
    """``/health`` ``features`` as a set of names: a list of strings (other entries, and a
    value that is not a list, are ignored; a missing list means none). The one reader of
    ``features``; unknown names are kept and mean nothing."""
    raw = health.get("features")
    if not isinstance(raw, list):
        return frozenset()
    return frozenset(item for item in raw[:MAX_FEATURES]
                     if isinstance(item, str) and 0 < len(item) <= MAX_FEATURE_NAME)


def _health_prefix(endpoint: str) -> str:
    """NotAGameSurface's /health wording does not name the request; other paths' does."""
    return "GET /health " if endpoint == "/health" else ""


class GameClient:
    """The HTTP surface of one game instance on loopback."""

    def __init__(self, port: int, *, host: str = "127.0.0.1", timeout_ms: int = 5000,
                 opener: Opener | None = None, launch_hint: str | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = polling.sleep) -> None:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise BridgeUsageError(f"Host {host!r} is not a loopback IP address; the bridge only talks to games on this machine.")
        number = port_number(port, floats=False)
        if number is None:
            raise BridgeUsageError(f"Port {port!r} is not a TCP port; use a number in 1-65535.", port=port)
        self.port = number
        self.host = host
        self.base_url = f"http://{host if ':' not in host else '[' + host + ']'}:{self.port}"
        self.timeout_ms = int(timeout_ms)
        self.launch_hint = launch_hint
        self._open: Opener = opener or loopback_opener
        self._clock = clock
        self._sleep = sleep
        #: When its frames start; learned from every answer (see wire/frames.py).
        self.frames = FrameClock()
        #: Bumped whenever what was learned about the game is forgotten: a restart seen in
        #: an answer (``frame`` went backwards) or :meth:`forget`. Caches of what a game
        #: said (the Bridge's manifest) are valid for one generation.
        self.generation = 0
        self._relearn()
        #: Kept-alive connections to the game, reused by every request and every thread
        #: (the default transport only; an injected opener is used as it is).
        self._session = KeepAliveSession(max_idle_s=KEEP_IDLE_S) if self._open is loopback_opener else None
        #: Counters for benchmarks and diagnostics.
        self.stats: dict[str, int] = {"requests": 0, "bytes": 0, "stateFetches": 0}
        self._stats_lock = threading.Lock()

    # ----------------------------------------------------------------- what is known
    def _relearn(self, *, restarted: bool = False) -> None:
        """Forget what was learned about the game's answers (its frame clock aside).
        ``restarted``: another process answers (or may answer) on the port now."""
        old_events: EventsCursor | None = getattr(self, "events", None)
        #: The events cursor (wire/events.py): the newest event reported to the agent.
        self.events = EventsCursor(after_restart=restarted and old_events is not None and old_events.seq is not None)
        #: What the answers about this port last showed of its digest (core/digest.py's
        #: only_changes): a command's answer repeats nothing already shown.
        self.shown: dict[str, Any] = {}
        #: Does /health carry completedCommandId? (None: not asked yet.)
        self.health_has_completed_id: bool | None = None
        #: The completedCommandId of the newest answer that carried one (None: unknown): a
        #: command whose commandId is not above it cannot be confirmed by its id.
        self.completed_id: int | None = None
        #: What the last /state, /state?view=digest and /health cost (seconds).
        self.state_cost_s = 0.0
        self.digest_cost_s = 0.0
        self.health_cost_s = 0.0
        #: Does it apply commands between frames (so a frame need not be waited for)?
        self.applies_between_frames = False
        #: The extensions the game advertises in ``/health`` ``features`` (the contract's extensions),
        #: learned from every /health answer; None until one has been read.
        self.features: frozenset[str] | None = None
        #: Advertised extensions the game was caught breaking (an ``after`` answered early
        #: without the command, a digest without ``completedCommandId``): not used again
        #: until the game restarts. See :meth:`uses`.
        self.broken_features: set[str] = set()

    def new_session(self) -> None:
        """Answer as a bridge that never answered about this port would: forget what the
        answers showed and which events were reported (what a replay does when a trace
        moves on to another recording session). What was learned of the game stays."""
        self.shown = {}
        self.events = EventsCursor()

    def forget(self) -> None:
        """Forget everything learned about the game (it went offline, was stopped, or
        another process may answer on the port next); starts a new generation."""
        self.frames.reset()
        self._relearn(restarted=True)
        self.generation += 1
        self.close()  # another process may answer on the port next

    def has_feature(self, name: str) -> bool:
        """Whether the game advertised ``name`` in the last ``/health`` read (in this
        generation). False before any /health: see :meth:`learn_features`."""
        features = self.features
        return features is not None and name in features

    def learn_features(self, *, timeout_ms: int | None = None) -> frozenset[str]:
        """The advertised features, asking ``/health`` once if none was read yet."""
        features = self.features
        if features is None:
            self.health(timeout_ms=timeout_ms)
            features = self.features
        return features if features is not None else frozenset()

    def uses(self, name: str) -> bool:
        """Whether the bridge may rely on extension ``name`` with this game: advertised,
        and not caught broken since the game started. The only gate for sending a
        parameter an extension defines (a game is never sent one it did not advertise)."""
        return self.has_feature(name) and name not in self.broken_features

    def _broken(self, name: str, why: str) -> None:
        if name not in self.broken_features:
            log.warning("port %s advertises %r but %s; not using it until the game restarts", self.port, name, why)
            self.broken_features.add(name)

    @property
    def last_frame(self) -> int | None:
        """The newest frame any answer reported (in this generation)."""
        return self.frames.last_frame

    # ----------------------------------------------------------------- plumbing
    def close(self) -> None:
        """Close the connections kept to the game (the next request opens a fresh one)."""
        if self._session is not None:
            self._session.close()

    def _observe(self, doc: Any, sent: float, arrived: float) -> None:
        """Feed the frame an answer reported to the frame clock (``sent``: when the
        request went out; ``arrived``: when the answer was in, before decoding it)."""
        if not isinstance(doc, dict):
            return
        frame = _count(doc.get("frame"))
        if frame is not None and self.frames.observe(frame, sent, arrived):
            log.info("port %s: frame went back to %s: a new process; forgetting what was learned", self.port, frame)
            self._relearn(restarted=True)
            self.generation += 1
        if "completedCommandId" in doc:
            self.completed_id = _count(doc.get("completedCommandId"))

    def _request(self, path: str, *, timeout_s: float, max_bytes: int, keep: tuple[str, ...] = ()) -> HttpResponse:
        """One GET; transport failures become GameOffline/NotAGameSurface, except the
        TransportError kinds in ``keep``, re-raised for the caller to word."""
        opener = self._session or self._open
        try:
            response = opener(self.base_url + path, timeout=max(timeout_s, 0.001), max_bytes=max_bytes)
        except TransportError as exc:
            if exc.kind in keep:
                raise
            raise self._translate(exc, path, timeout_s) from None
        except ConnectionRefusedError as exc:  # an injected opener may raise plain socket errors
            raise GameOffline(self.port, launch_hint=self.launch_hint, detail=f"GET {path}: {exc}") from None
        except OSError as exc:
            raise GameOffline(self.port, cause="reset", endpoint=path.split("?")[0], detail=str(exc),
                              launch_hint=self.launch_hint) from None
        with self._stats_lock:
            self.stats["requests"] += 1
            self.stats["bytes"] += len(response.body)
        if 300 <= response.status < 400:
            location = response.headers.get("location", "")
            endpoint = path.split("?")[0]
            raise NotAGameSurface(self.port, f"{_health_prefix(endpoint)}answered with a redirect (HTTP {response.status} to {location[:200]!r}); the bridge never follows redirects", path=endpoint)
        return response

    def _translate(self, exc: TransportError, path: str, timeout_s: float) -> Exception:
        endpoint = path.split("?")[0]
        if exc.kind in GameOffline.CAUSES:
            return GameOffline(self.port, cause=exc.kind, endpoint=endpoint, detail=exc.detail or None,
                               timeout_ms=timeout_s * 1000, launch_hint=self.launch_hint)
        return NotAGameSurface(self.port, f"{_health_prefix(endpoint)}gave an unusable answer: {exc.detail}", path=endpoint)

    def _json(self, response: HttpResponse, path: str) -> Any:
        try:
            return decode_json(response.body)
        except ValueError as exc:
            raise NotAGameSurface(self.port, f"answered HTTP {response.status} with a body that {exc}", path=path) from None

    def _timeout_s(self, timeout_ms: int | None) -> float:
        return (self.timeout_ms if timeout_ms is None else timeout_ms) / 1000.0

    # ----------------------------------------------------------------- endpoints
    def health(self, *, timeout_ms: int | None = None) -> dict:
        """``GET /health``; raises GameOffline or NotAGameSurface."""
        sent = self._clock()
        response = self._request("/health", timeout_s=self._timeout_s(timeout_ms), max_bytes=HEALTH_MAX_BYTES)
        arrived = self._clock()
        if response.status != 200:
            raise NotAGameSurface(self.port, f"GET /health returned HTTP {response.status}")
        try:
            body = decode_json(response.body)
        except ValueError as exc:
            raise NotAGameSurface(self.port, f"GET /health answered with a body that {exc}") from None
        if not isinstance(body, dict) or body.get("ok") is not True:
            shown = json.dumps(body)[:120] if not isinstance(body, (bytes, str)) else repr(body)[:120]
            raise NotAGameSurface(self.port, f"GET /health answered {shown} without \"ok\": true")
        self._observe(body, sent, arrived)  # first: a restart forgets what was learned
        self.health_has_completed_id = _count(body.get("completedCommandId")) is not None
        self.features = read_features(body)
        self.health_cost_s = arrived - sent
        return body

    def state(self, *, timeout_ms: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
              digest: bool = False) -> dict:
        """``GET /state`` as a dict (a game that answers something else breaks the contract).

        ``digest``: the digest is all the caller needs, so a game that advertises ``view``
        is asked for ``view=digest`` (the contract's extensions); others answer the whole state."""
        if digest and self.features is None:
            self.learn_features(timeout_ms=timeout_ms)  # once per generation: may it be asked?
        view = digest and self.uses("view")
        return self._state("/state?view=digest" if view else "/state", timeout_s=self._timeout_s(timeout_ms),
                           max_bytes=max_bytes, view=view)

    def _state(self, path: str, *, timeout_s: float, max_bytes: int, view: bool = False,
               held: bool = False) -> dict:
        started = self._clock()
        response = self._request(path, timeout_s=timeout_s, max_bytes=max_bytes)
        arrived = self._clock()
        if response.status != 200:
            raise NotAGameSurface(self.port, f"returned HTTP {response.status}", path="/state")
        holder = [response.body]
        del response  # the bytes live only in ``holder``: released before the document is built
        try:
            body = decode_json_taking(holder)
        except ValueError as exc:
            raise NotAGameSurface(self.port, f"answered HTTP 200 with a body that {exc}", path="/state") from None
        if held:
            # Held until the command was done: the answer was made just before it arrived,
            # and the time it took says nothing about what a /state costs.
            self._observe(body, arrived, arrived)
        else:
            self._observe(body, started, arrived)  # first: a restart forgets what was learned
            cost = self._clock() - started
            if view:
                self.digest_cost_s = cost
            else:
                self.state_cost_s = cost
        with self._stats_lock:
            self.stats["stateFetches"] += 1
        if not isinstance(body, dict):
            raise NotAGameSurface(self.port, f"answered a JSON {type(body).__name__}, not an object", path="/state")
        return body

    def tools(self, *, timeout_ms: int | None = None) -> Any | None:
        """``GET /tools``: the raw manifest document, or None when the game answers 404."""
        response = self._request("/tools", timeout_s=self._timeout_s(timeout_ms), max_bytes=8 * 1024 * 1024)
        if response.status in (404, 501):
            return None
        if response.status != 200:
            raise NotAGameSurface(self.port, f"returned HTTP {response.status}", path="/tools")
        return self._json(response, "/tools")

    def screenshot(self, max_width: int, max_height: int, *, timeout_ms: int | None = None,
                   max_bytes: int = SCREENSHOT_MAX_BYTES) -> Screenshot:
        """``GET /screenshot``: the image, checked whole (see wire/images.py). A ``503`` is
        ScreenshotUnavailable with the game's reason; an image over ``max_bytes``, a body
        that is not the image it claims, any other status: NotAGameSurface saying which."""
        path = f"/screenshot?maxWidth={int(max_width)}&maxHeight={int(max_height)}"
        timeout_s = self._timeout_s(timeout_ms)
        try:
            response = self._request(path, timeout_s=timeout_s, max_bytes=max_bytes, keep=("too-large",))
        except TransportError as exc:  # only too-large is passed through
            raise NotAGameSurface(self.port, f"sent an image over the bridge's {max_bytes // (1024 * 1024)} MB cap "
                                  f"({exc.detail}); it was refused unread. Ask for a smaller maxWidth/maxHeight, "
                                  "or make the game send smaller images", path="/screenshot") from None
        if response.status == 503:
            reason = game_reason(response.body)
            if reason is not None:
                raise ScreenshotUnavailable(self.port, reason)
            raise NotAGameSurface(self.port, "answered 503 without {\"ok\": false, \"error\": \"...\"} saying why",
                                  path="/screenshot")
        if response.status != 200:
            raise NotAGameSurface(self.port, f"returned HTTP {response.status}", path="/screenshot")
        try:
            info = inspect_image(response.body, response.headers.get("content-type"))
        except ImageProblem as exc:
            raise NotAGameSurface(self.port, f"did not answer a usable image: {exc}", path="/screenshot") from None
        return Screenshot(info, response.body, parse_frame(response.headers.get("x-game-frame")),
                          parse_window(response.headers.get("x-game-window")))

    def events_page(self, since: int, limit: int, *, timeout_ms: int | None = None) -> Page:
        """``GET /events?since=&limit=`` (the contract's extensions ``events``), checked (wire/events.py)."""
        path = f"/events?since={int(since)}&limit={int(limit)}"
        response = self._request(path, timeout_s=self._timeout_s(timeout_ms), max_bytes=DEFAULT_MAX_BYTES)
        if response.status != 200:
            raise NotAGameSurface(self.port, f"returned HTTP {response.status}", path="/events")
        try:
            return read_page(self._json(response, "/events"), since)
        except ValueError as exc:
            raise NotAGameSurface(self.port, f"answered a page that {exc}", path="/events") from None

    def command(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                timeout_ms: int | None = None) -> dict:
        """``GET /command?cmd=...&arg=...``: the raw answer (queued, not yet applied).

        Raises CommandRejected when the game refuses the command (its answer is the
        error's ``answer``)."""
        if not isinstance(cmd, str) or not cmd:
            raise BridgeUsageError("A command name must be a non-empty string.")
        query: list[tuple[str, str]] = [("cmd", cmd)]
        for key, value in (args or {}).items():
            if key == "cmd":
                raise BridgeUsageError("An argument may not be called 'cmd': the contract uses that key for the command name.")
            query.append((str(key), _format_arg(value)))
        path = "/command?" + urllib.parse.urlencode(query)
        if len(path) > MAX_COMMAND_URL:
            raise BridgeUsageError(
                f"The arguments of command '{cmd}' make a /command URL of {len(path):,} bytes, over the "
                f"{MAX_COMMAND_URL:,} the bridge sends (HTTP servers refuse longer request lines, often with "
                "414 URI Too Long), so nothing was sent. Send less per command: shorten the argument, or split "
                "it across several commands.", port=self.port, command=cmd, urlBytes=len(path))
        sent = self._clock()
        response = self._request(path, timeout_s=self._timeout_s(timeout_ms), max_bytes=1024 * 1024)
        arrived = self._clock()
        try:
            body = decode_json(response.body)
        except ValueError as exc:
            if response.status != 200:
                raise NotAGameSurface(self.port, f"returned HTTP {response.status}", path="/command") from None
            raise NotAGameSurface(self.port, f"answered with a body that {exc}", path="/command") from None
        if not isinstance(body, dict):
            raise NotAGameSurface(self.port, f"answered a JSON {type(body).__name__}, not an object", path="/command")
        if body.get("accepted") is False or response.status != 200:
            reason = body.get("error") or body.get("message") or body.get("reason") or f"HTTP {response.status}"
            raise CommandRejected(self.port, cmd, str(reason)[:300], body)
        self._observe(body, sent, arrived)
        return body

    # ----------------------------------------------------------------- confirm
    def command_and_sync(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                         timeout_ms: int | None = None, sync: bool = True, digest: bool = False) -> dict:
        """Queue a command and wait until the game has applied it.

        Returns ``{"answer", "commandId", "confirmation", "state"}`` where ``state`` is a
        ``/state`` snapshot taken after the command ran (None when ``sync`` is False,
        ``confirmation: "not-waited"``). ``digest``: the digest of that state is all the
        caller needs (a game with ``view`` then sends only the digest's fields).

        A game that advertises ``after`` is asked once, ``/state?after=<commandId>``, and
        answers when the command is done; others are polled (see the module docstring)."""
        total_ms = self.timeout_ms if timeout_ms is None else int(timeout_ms)
        deadline = self._clock() + total_ms / 1000.0
        if sync and self.features is None:
            # Learned once a generation (features, how to poll), before the command, so
            # the completedCommandId the game reports before it is known too.
            self.health(timeout_ms=total_ms)
        generation, before = self.generation, self.completed_id
        answer = self.command(cmd, args, timeout_ms=self._remaining_ms(deadline))
        command_id = _count(answer.get("commandId"))
        queued_frame = _count(answer.get("frame"))
        if not sync:
            return {"answer": answer, "commandId": command_id, "confirmation": "not-waited", "state": None}
        if (command_id is None or before is None or command_id > before
                or self.generation != generation):  # a restart meanwhile: the old count does not hold
            return self._confirm(cmd, command_id, queued_frame, deadline, total_ms, answer, digest)
        # An id the game had already reported done would "confirm" the command before it
        # ran (a reused or lying counter): confirm it by frames instead, and say why.
        why = (f"The game answered commandId {command_id}, which is not above the completedCommandId "
               f"{before} it reported before the command was sent, so the command could not be confirmed by its id")
        try:
            outcome = self._confirm(cmd, None, queued_frame, deadline, total_ms, answer, digest)
        except CommandTimeout as exc:
            raise CommandTimeout(self.port, cmd, total_ms, message=f"{exc.message} {why}; nor did its "
                                 "frames advance.", reportedCommandId=command_id) from None
        outcome["idNote"] = why + (" (confirmed by frames advancing instead)."
                                   if outcome["confirmation"] == "frames-advanced" else ".")
        outcome["reportedCommandId"] = command_id
        return outcome

    def _remaining_ms(self, deadline: float) -> int:
        # Rounded up, so a poll that times out has always reached the command's deadline
        # (rounded down, it could end just before it and surface as GameOffline).
        return max(1, math.ceil((deadline - self._clock()) * 1000))

    def _confirm(self, cmd: str, command_id: int | None, queued_frame: int | None,
                 deadline: float, total_ms: int, answer: dict, digest: bool = False) -> dict:
        if command_id is not None and self.features is None:
            try:  # which extensions to use and how to poll, learned once (per generation)
                self.health(timeout_ms=self._remaining_ms(deadline))
            except GameOffline:
                if self._clock() < deadline:
                    raise
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id) from None
        if command_id is not None and self.uses("after"):
            held = self._confirm_held(cmd, command_id, queued_frame, deadline, total_ms, answer, digest)
            if held is not None:
                return held  # else the game broke the rule: confirm as for a game without it
        interval = 0.0
        last: dict = {}
        base_frame = queued_frame
        plan = self._frame_plan(queued_frame, self._clock(), digest)
        if plan is not None:  # the command runs on a later frame: no use asking sooner
            self._sleep(max(0.0, min(plan[0], deadline) - self._clock()))
        while True:
            try:
                state = self._next_state(command_id, base_frame, deadline, _count(last.get("frame")), digest)
            except GameOffline:
                if self._clock() < deadline:
                    raise
                state = None  # the poll ran into the command's own deadline: a CommandTimeout
            if state is not None:
                last = state
                verdict = self._verdict(cmd, command_id, queued_frame, base_frame, total_ms, answer, state)
                if verdict is not None:
                    return verdict
                if command_id is None or _count(state.get("completedCommandId")) is None:
                    frame = _count(state.get("frame"))
                    if base_frame is None:
                        base_frame = frame
            now = self._clock()
            if now >= deadline:
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id,
                                     lastCompletedCommandId=_count(last.get("completedCommandId")),
                                     lastFrame=_count(last.get("frame")))
            pause, interval = self._next_wait(queued_frame, interval, command_id, now, digest)
            self._sleep(min(pause, max(0.0, deadline - now)))

    def _verdict(self, cmd: str, command_id: int | None, queued_frame: int | None, base_frame: int | None,
                 total_ms: int, answer: dict, state: dict) -> dict | None:
        """What one snapshot says of the command: the outcome, None (not yet), or a
        CommandTimeout raised for a game that restarted meanwhile."""
        completed = _count(state.get("completedCommandId"))
        frame = _count(state.get("frame"))
        if base_frame is not None and frame is not None and frame < base_frame:
            raise CommandTimeout(self.port, cmd, total_ms, message=(
                f"The game on port {self.port} restarted (frame went back from {base_frame} "
                f"to {frame}) while command '{cmd}' was pending; it was probably lost. Send it again."),
                lastFrame=frame)
        if command_id is not None and completed is not None:
            if completed < command_id:
                return None
            if queued_frame is not None and frame == queued_frame:
                self.applies_between_frames = True  # never wait for a frame with this game
            return {"answer": answer, "commandId": command_id, "confirmation": "completedCommandId", "state": state}
        if frame is None:
            return {"answer": answer, "commandId": command_id, "confirmation": "unconfirmed", "state": state}
        if base_frame is not None and frame >= base_frame + 2:
            return {"answer": answer, "commandId": command_id, "confirmation": "frames-advanced", "state": state}
        return None

    def _confirm_held(self, cmd: str, command_id: int, queued_frame: int | None, deadline: float,
                      total_ms: int, answer: dict, digest: bool) -> dict | None:
        """``after`` (the contract's extensions): ``/state?after=<id>&waitMs=<what is left>``, asked
        again only when it was held for all of ``waitMs``. None when the game broke the
        rule (answered early without the command, or without ``completedCommandId``):
        the caller confirms by polling, and the feature is not used again until restart.

        ``waitMs`` leaves a little of the deadline for the answer's transfer, so even a game
        that holds for all of ``waitMs`` when the command is long done answers in time."""
        while True:
            remaining_s = deadline - self._clock()
            if remaining_s <= 0:
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id)
            view = digest and self.uses("view")
            cost = self.digest_cost_s if view else self.state_cost_s
            reserve_s = min(remaining_s / 4, HELD_RESERVE_S + 2 * cost)
            wait_ms = max(0, min(MAX_WAIT_MS, int((remaining_s - reserve_s) * 1000)))
            path = f"/state?after={command_id}&waitMs={wait_ms}" + ("&view=digest" if view else "")
            sent = self._clock()
            try:
                state = self._state(path, timeout_s=remaining_s, max_bytes=DEFAULT_MAX_BYTES, view=view, held=True)
            except GameOffline:
                if self._clock() < deadline:
                    raise
                raise CommandTimeout(self.port, cmd, total_ms, commandId=command_id) from None
            held_s = self._clock() - sent
            verdict = self._verdict(cmd, command_id, queued_frame, queued_frame, total_ms, answer, state)
            completed = _count(state.get("completedCommandId"))
            if completed is None:
                self._broken("view" if view else "after", "its /state answered without completedCommandId")
                return None
            if verdict is not None:
                if wait_ms >= HANG_CHECK_MS and held_s >= wait_ms / 1000 * 0.98:
                    # The command may have been done long before: a game that holds for all
                    # of waitMs would cost every call its whole deadline.
                    self._broken("after", f"held /state for all of waitMs ({wait_ms} ms) although the command was done")
                return verdict
            if held_s < wait_ms / 1000 - max(EARLY_TOLERANCE_S, 0.05 * wait_ms / 1000):
                self._broken("after", f"answered /state?after={command_id} after {held_s * 1000:.0f} ms of "
                             f"waitMs={wait_ms} with completedCommandId {completed}")
                return None

    def _next_wait(self, queued_frame: int | None, interval: float, command_id: int | None,
                   now: float, digest: bool = False) -> tuple[float, float]:
        """How long to wait before the next poll, and the interval to carry on from."""
        backoff = min(max(interval * 2, FIRST_INTERVAL_S), self._interval_cap(command_id, digest))
        plan = self._frame_plan(queued_frame, now, digest)
        if plan is None:
            return backoff, backoff
        poll_at, starts, period = plan
        if poll_at - now > backoff:
            return poll_at - now, 0.0  # nothing changes before the next frame: sleep until just before it
        if now < starts + min(BURST_S, period / 4):
            return 0.0, 0.0  # the frame is due about now: poll back to back for a moment
        return backoff, backoff  # it is late: back off as without a prediction

    def poll_cost(self, digest: bool = False) -> float:
        """What the last ``/state`` of the kind ``state(digest=digest)`` asks cost (seconds)."""
        return self.digest_cost_s if digest and self.uses("view") else self.state_cost_s

    def _frame_plan(self, queued_frame: int | None, now: float,
                    digest: bool = False) -> tuple[float, float, float] | None:
        """When the frame after the newest one seen is predicted to start, and when to
        poll for it (about one poll's round trip earlier), with the period; None when
        there is no prediction or it should not be used."""
        seen = self.frames.last_frame
        period = self.frames.period_s
        if seen is None or period is None:
            return None
        if queued_frame is not None and seen <= queued_frame and self.applies_between_frames:
            return None
        starts = self.frames.next_frame_at(seen)
        if starts is None:
            return None
        if queued_frame is not None and seen > queued_frame and now - (starts - period) < min(SETTLE_S, period / 2):
            return None  # a frame after the command has just begun: the game may still be applying it
        cost = self.poll_cost(digest)
        tiny = self.health_has_completed_id and self._state_is_tiny(digest)
        probe = self.health_cost_s if (self.health_has_completed_id and not tiny) or cost >= CHEAP_STATE_S else cost
        poll_at = min(starts - min(max(probe, MIN_LEAD_S), MAX_LEAD_S), now + MAX_FRAME_WAIT_S)
        return poll_at, starts, period

    def _state_is_tiny(self, digest: bool) -> bool:
        """Whether the /state a confirmation asks for (its digest, with ``view``) is known
        to cost about what a /health does: then it is polled itself, which saves the
        /state fetch after a /health poll has seen the command done."""
        cost = self.poll_cost(digest)
        return 0.0 < cost <= max(TINY_STATE_S, 1.5 * self.health_cost_s)

    def _interval_cap(self, command_id: int | None, digest: bool = False) -> float:
        if self.health_has_completed_id and command_id is not None:
            # Only the tiny /health is polled and /state is fetched once, at the end:
            # /state's cost must not slow the polls (it would delay the answer by up to 2x it).
            return MAX_CHEAP_INTERVAL_S
        return max(MAX_CHEAP_INTERVAL_S, 2 * self.poll_cost(digest))

    def _next_state(self, command_id: int | None, base_frame: int | None,
                    deadline: float, state_frame: int | None, digest: bool = False) -> dict | None:
        """One poll step: a /state snapshot worth checking, or None (not yet).

        ``state_frame`` is the frame of the last /state fetched for this command: without
        completedCommandId in /health, /state is fetched again only once a newer frame
        has begun."""
        cheap = self.poll_cost(digest) < CHEAP_STATE_S
        if self.health_has_completed_id is None and command_id is not None:
            self.health(timeout_ms=self._remaining_ms(deadline))  # learn which way to poll, once
        if self.health_has_completed_id and command_id is not None:
            if not self._state_is_tiny(digest):
                health = self.health(timeout_ms=self._remaining_ms(deadline))
                completed = _count(health.get("completedCommandId"))
                frame = _count(health.get("frame"))
                restarted = base_frame is not None and frame is not None and frame < base_frame
                if not restarted and (completed is None or completed < command_id):
                    return None  # a restart goes on to /state, where _confirm reports it
        elif base_frame is not None and (not cheap or self.frames.period_s is not None):
            # /state is expensive, or this game's frames are known to advance (so polls
            # land near frame starts, where an early one should cost only a tiny
            # /health): wait for a frame after the command's, and after the last /state.
            health = self.health(timeout_ms=self._remaining_ms(deadline))
            frame = _count(health.get("frame"))
            if frame is not None and base_frame <= frame <= max(base_frame, state_frame or base_frame):
                return None  # a frame that went back goes on to /state, where _confirm reports it
        state = self.state(timeout_ms=self._remaining_ms(deadline), digest=digest)
        if (digest and command_id is not None and self.uses("view") and self.health_has_completed_id
                and _count(state.get("completedCommandId")) is None):
            self._broken("view", "its view=digest answer left out completedCommandId")
            state = self.state(timeout_ms=self._remaining_ms(deadline))
        return state

    # ----------------------------------------------------------------- close
    def port_is_quiet(self, *, timeout_ms: int = 250) -> bool:
        """True when nothing accepts a connection on the port any more."""
        try:
            self._open(self.base_url + "/health", timeout=timeout_ms / 1000.0, max_bytes=HEALTH_MAX_BYTES)
        except TransportError as exc:
            return exc.kind == "refused"
        except OSError:
            return True
        return False

    def close_and_wait(self, grace_ms: int) -> bool:
        """Send ``close`` and wait up to ``grace_ms`` for the port to go quiet.

        Never waits for a completion (a closing game cannot report one). Returns True
        when the port went quiet in time."""
        deadline = Deadline(grace_ms / 1000.0, clock=self._clock)
        try:
            self.command("close", timeout_ms=max(100, min(grace_ms, self.timeout_ms)))
        except (GameOffline, NotAGameSurface):
            pass  # a game that drops the connection while closing is closing

        def quiet() -> bool | None:
            return True if self.port_is_quiet(timeout_ms=min(250, deadline.remaining_ms())) else None

        return poll_until(quiet, deadline, first_s=0.002, growth=2, max_s=0.05, sleep=self._sleep) is not None
