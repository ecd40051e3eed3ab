""":class:`GameClient`: one game instance's HTTP surface; it learns from every answer
(:class:`~.known.Known`, the frame clock, restarts) and confirms commands through its
:class:`~.confirm.Confirmer`."""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import threading
import time
import urllib.parse
import weakref
from collections.abc import Mapping
from typing import Any, Callable

from .. import polling
from ..config import port_number
from ..contract import CMD, FRAME_HEADER, SNAPSHOT_MAX_BYTES_FIELD, VIEW_FEATURE, WINDOW_HEADER
from ..jsonio import decode_json, decode_json_taking
from ..polling import Deadline, poll_until
from ..errors import (BridgeUsageError, CommandRejected, GameOffline, NotAGameSurface,
                      ScreenshotUnavailable)
from .confirm import Confirmer
from .events import Page, read_page
from .frames import FrameClock
from .known import Known, Look, counter
from .images import (SCREENSHOT_MAX_BYTES, ImageProblem, Screenshot, game_reason, inspect_image, parse_frame,
                     parse_window)
from .transport import (DEFAULT_MAX_BYTES, HEALTH_MAX_BYTES, HttpResponse, KeepAliveSession, Opener,
                        TransportError, loopback_opener)

log = logging.getLogger(__name__)


#: The longest ``/command`` URL (path and query) sent: the common request-line limit of
#: HTTP servers (8 KiB less the method and version), so a long argument is the caller's
#: clear error, not the game's 414.
MAX_COMMAND_URL = 8000


#: A connection to the game idle longer than this is not reused (servers close idle
#: connections after a few seconds to a minute; one that did is never reused anyway).
KEEP_IDLE_S = 20.0


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


#: What ``urllib.parse.quote_plus`` leaves as it is.
_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]*")


def _quoted(text: str) -> str:
    """``urllib.parse.quote_plus(text)``, without its work for the usual name or number."""
    return text if _URL_SAFE.fullmatch(text) else urllib.parse.quote_plus(text)


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
        #: What this generation's answers taught (wire/known.py); reset on a restart.
        self.known = Known(self.port)
        #: Kept-alive connections to the game, reused by every request and every thread
        #: (the default transport only; an injected opener is used as it is).
        self._session = KeepAliveSession(max_idle_s=KEEP_IDLE_S) if self._open is loopback_opener else None
        #: Counters for benchmarks and diagnostics.
        self.stats: dict[str, int] = {"requests": 0, "bytes": 0, "stateFetches": 0}
        self._stats_lock = threading.Lock()
        #: Sends commands and confirms them, given this client's endpoints and what it knows
        #: (through a weak proxy: the client is freed, and its connections closed, as before).
        self.confirmer = Confirmer(weakref.proxy(self), self.known, self.frames, clock=clock, sleep=sleep)
        #: Told of every command the game accepted: ``(cmd, args, simFrame before, commandId)``
        #: (the bridge's journal of a launched paused game, core/journal.py); None: nobody.
        self.on_sent: Callable[[str, dict[str, Any], int | None, int | None], None] | None = None

    # ----------------------------------------------------------------- what is known
    def forget(self) -> None:
        """Forget everything learned about the game (it went offline, was stopped, or
        another process may answer on the port next); starts a new generation."""
        self.frames.reset()
        self.known.reset()
        self.close()  # another process may answer on the port next

    @property
    def generation(self) -> int:
        """Bumped whenever what was learned about the game is forgotten: a restart seen in
        an answer (``frame`` went backwards) or :meth:`forget`. Caches of what a game said
        (the Bridge's manifest) are valid for one generation."""
        return self.known.generation

    @property
    def features(self) -> frozenset[str] | None:
        """The extensions advertised in the last ``/health`` read (in this generation);
        None before one was read."""
        return self.known.features

    @property
    def completed_id(self) -> int | None:
        """The completedCommandId of the newest answer that carried one (None: unknown)."""
        return self.known.completed_id

    @property
    def paused(self) -> bool | None:
        """``paused`` in the newest answer that carried it (None: unknown)."""
        return self.known.paused

    def has_feature(self, name: str) -> bool:
        """Whether the game advertised ``name`` in the last ``/health`` read (in this
        generation). False before any /health: see :meth:`learn_features`."""
        return self.known.has_feature(name)

    def learn_features(self, *, timeout_ms: int | None = None) -> frozenset[str]:
        """The advertised features, asking ``/health`` once if none was read yet."""
        features = self.known.features
        if features is None:
            self.health(timeout_ms=timeout_ms)
            features = self.known.features
        return features if features is not None else frozenset()

    def uses(self, name: str) -> bool:
        """Whether the bridge may rely on extension ``name`` with this game: advertised,
        and not caught broken since the game started. The only gate for sending a
        parameter an extension defines (a game is never sent one it did not advertise)."""
        return self.known.uses(name)

    def poll_cost(self, digest: bool = False) -> float:
        """What the last ``/state`` of the kind ``state(digest=digest)`` asks cost (seconds)."""
        return self.known.poll_cost(digest)

    @property
    def last_frame(self) -> int | None:
        """The newest frame any answer reported (in this generation)."""
        return self.frames.last_frame

    def paused_look(self) -> Look | None:
        """:meth:`Known.paused_look <.known.Known.paused_look>`, when a kept-alive connection
        also shows the same process on the port as when it was seen."""
        look = self.known.paused_look()
        return look if look is not None and self.connected() else None

    def others_commanded(self) -> None:
        """A command this client did not send ran between two of its looks (or the game's
        ids skip): :meth:`paused_look` has none to offer until the game restarts."""
        self.known.others_command = True

    def connected(self) -> bool:
        """Whether a kept-alive connection to the game is open, so the process that answered
        this client before is still the one on the port (False with an injected opener: it
        keeps none this client can see)."""
        return self._session is not None and self._session.holds(self.host, self.port)

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
        frame = counter(doc.get("frame"))
        if frame is not None and self.frames.observe(frame, sent, arrived):
            log.info("port %s: frame went back to %s: a new process; forgetting what was learned", self.port, frame)
            self.known.reset()
        if "completedCommandId" in doc:
            self.known.completed_id = counter(doc.get("completedCommandId"))
        if isinstance(doc.get("paused"), bool):
            self.known.paused = doc["paused"]
        if "simFrame" in doc:
            self.known.sim_frame = counter(doc.get("simFrame"))

    def _request(self, path: str, *, timeout_s: float, max_bytes: int, keep: tuple[str, ...] = (),
                 body: bytes | None = None) -> HttpResponse:
        """One GET (a POST of ``body``, on a connection of its own); transport failures become
        GameOffline/NotAGameSurface, except the TransportError kinds in ``keep``, re-raised
        for the caller to word."""
        try:
            if body is None:
                response = (self._session or self._open)(self.base_url + path, timeout=max(timeout_s, 0.001),
                                                          max_bytes=max_bytes)
            else:
                post: Any = self._open
                response = post(self.base_url + path, timeout=max(timeout_s, 0.001), max_bytes=max_bytes, body=body)
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
    def health(self, *, timeout_ms: int | None = None) -> dict[str, Any]:
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
        known = self.known
        known.health_has_completed_id = counter(body.get("completedCommandId")) is not None
        known.features = read_features(body)
        known.snapshot_max_bytes = counter(body.get(SNAPSHOT_MAX_BYTES_FIELD))
        known.health_cost_s = arrived - sent
        return body

    def state(self, *, timeout_ms: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
              digest: bool = False) -> dict[str, Any]:
        """``GET /state`` as a dict (a game that answers something else breaks the contract).

        ``digest``: the digest is all the caller needs, so a game that advertises ``view``
        is asked for ``view=digest`` (docs/contract.md); others answer the whole state."""
        if digest and self.known.features is None:
            self.learn_features(timeout_ms=timeout_ms)  # once per generation: may it be asked?
        view = digest and self.uses(VIEW_FEATURE)
        return self._state("/state?view=digest" if view else "/state", timeout_s=self._timeout_s(timeout_ms),
                           max_bytes=max_bytes, view=view)

    def _state(self, path: str, *, timeout_s: float, max_bytes: int, view: bool = False,
               held: bool = False) -> dict[str, Any]:
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
                self.known.digest_cost_s = cost
            else:
                self.known.state_cost_s = cost
        with self._stats_lock:
            self.stats["stateFetches"] += 1
        if not isinstance(body, dict):
            raise NotAGameSurface(self.port, f"answered a JSON {type(body).__name__}, not an object", path="/state")
        self.known.saw(body)
        return body

    def held_state(self, command_id: int, wait_ms: int, *, view: bool, timeout_s: float) -> dict[str, Any]:
        """``GET /state?after=<command_id>&waitMs=<wait_ms>`` (docs/contract.md, ``after``),
        with ``view=digest`` when ``view``: the state once the command is done, or after
        ``wait_ms``. What it took says nothing about what a /state costs."""
        path = f"/state?after={command_id}&waitMs={wait_ms}" + ("&view=digest" if view else "")
        return self._state(path, timeout_s=timeout_s, max_bytes=DEFAULT_MAX_BYTES, view=view, held=True)

    def command_and_sync(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                         timeout_ms: int | None = None, sync: bool = True, digest: bool = False,
                         pending_ok: bool = False) -> dict[str, Any]:
        """Queue a command and wait until the game has applied it.

        Returns ``{"answer", "commandId", "confirmation", "state"}`` where ``state`` is a
        ``/state`` snapshot taken after the command ran (None when ``sync`` is False,
        ``confirmation: "not-waited"``). ``digest``: the digest of that state is all the
        caller needs (a game with ``view`` then sends only the digest's fields).

        ``pending_ok``: on a game with ``clock`` that was paused when the command was sent,
        a command still not done a few loop frames later, with ``/state`` still paused,
        waits for the clock: it is answered at once with ``confirmation: "pending"`` and
        the state then, instead of waiting for a clock nobody moves.

        A game that advertises ``after`` is asked once, ``/state?after=<commandId>``, and
        answers when the command is done; others are polled (see wire/confirm.py)."""
        total_ms = self.timeout_ms if timeout_ms is None else int(timeout_ms)
        return self.confirmer.command_and_sync(cmd, args, total_ms=total_ms, sync=sync, digest=digest,
                                               pending_ok=pending_ok)

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
        return Screenshot(info, response.body, parse_frame(response.headers.get(FRAME_HEADER.lower())),
                          parse_window(response.headers.get(WINDOW_HEADER.lower())))

    def events_page(self, since: int, limit: int, *, timeout_ms: int | None = None) -> Page:
        """``GET /events?since=&limit=`` (docs/contract.md, ``events``), checked (wire/events.py)."""
        path = f"/events?since={int(since)}&limit={int(limit)}"
        response = self._request(path, timeout_s=self._timeout_s(timeout_ms), max_bytes=DEFAULT_MAX_BYTES)
        if response.status != 200:
            raise NotAGameSurface(self.port, f"returned HTTP {response.status}", path="/events")
        try:
            return read_page(self._json(response, "/events"), since)
        except ValueError as exc:
            raise NotAGameSurface(self.port, f"answered a page that {exc}", path="/events") from None

    def command(self, cmd: str, args: Mapping[str, Any] | None = None, *,
                timeout_ms: int | None = None) -> dict[str, Any]:
        """``GET /command?cmd=...&arg=...``: the raw answer (queued, not yet applied).

        Raises CommandRejected when the game refuses the command (its answer is the
        error's ``answer``)."""
        if not isinstance(cmd, str) or not cmd:
            raise BridgeUsageError("A command name must be a non-empty string.")
        query: list[tuple[str, str]] = [(CMD, cmd)]
        for key, value in (args or {}).items():
            if key == CMD:
                raise BridgeUsageError("An argument may not be called 'cmd': the contract uses that key for the command name.")
            query.append((str(key), _format_arg(value)))
        path = "/command?" + "&".join(_quoted(key) + "=" + _quoted(value) for key, value in query)
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
        sim_frame = self.known.sim_frame  # before the answer: the frame it was sent at
        self._observe(body, sent, arrived)
        self.known.sent(counter(body.get("commandId")))
        if self.on_sent is not None:
            self.on_sent(cmd, dict(args or {}), sim_frame, counter(body.get("commandId")))
        return body

    def exchange(self, path: str, *, timeout_ms: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                 body: bytes | None = None, keep: tuple[str, ...] = ()) -> HttpResponse:
        """One request of an extension that answers more than JSON (``snapshot``'s bytes, see
        wire/snapshots.py): a GET, or a POST of ``body``; the status is the caller's to read."""
        return self._request(path, timeout_s=self._timeout_s(timeout_ms), max_bytes=max_bytes, keep=keep, body=body)

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
