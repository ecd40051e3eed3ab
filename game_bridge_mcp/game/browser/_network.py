"""Every request the page makes passes here (the library's routing, on the driving thread): a
local game's files are answered from :class:`~._files.Files`, and every navigation, not
only the first, is held to the rule the page was opened under (docs/reliability.md, "The
browser wrapper's page"):

- the page (the main frame) stays on the origin it was opened at; with ``--allow-remote``
  it may go to any http(s) address;
- a frame in it may show its own origin, a loopback address or the game's files; with
  ``--allow-remote``, any http(s) address;
- a navigation refused is aborted before it is sent, and the event ``navigation:refused``
  says where it was going.
"""

from __future__ import annotations

import ipaddress
import logging
import urllib.parse
from typing import Any, Callable

from ._files import ORIGIN, Files

log = logging.getLogger(__name__)

#: Longest URL an event repeats.
MAX_URL = 500
LOOPBACK_NAMES = ("localhost", "localhost.")


def origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


def is_loopback(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").strip("[]").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def short(url: str) -> str:
    return url if len(url) <= MAX_URL else url[:MAX_URL] + "..."


class Network:
    """The page's requests: ``files`` answer :data:`ORIGIN` (None: the page is a URL);
    ``home`` is the origin the page was opened at."""

    def __init__(self, *, home: str, files: Files | None, allow_remote: bool, event: Callable[..., None]) -> None:
        self.home = origin_of(home)
        self.files = files
        self.allow_remote = allow_remote
        self.event = event
        self.refused = 0

    def attach(self, context: Any) -> None:
        context.route("**/*", self.route)

    def allowed(self, url: str, *, main: bool) -> bool:
        """Whether a frame (``main``: the page itself) may navigate to ``url``."""
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in ("http", "https"):
            return scheme in ("about", "data", "blob") and not main
        if self.allow_remote:
            return True
        origin = origin_of(url)
        if main:
            return origin == self.home
        return origin in (self.home, origin_of(ORIGIN)) or is_loopback(url)

    def route(self, route: Any) -> None:
        request = route.request
        url = str(request.url)
        try:
            navigation = bool(request.is_navigation_request())
            main = navigation and request.frame.parent_frame is None
        except Exception:  # noqa: BLE001 - a worker's request has no frame
            navigation = main = False
        if navigation and not self.allowed(url, main=main):
            self.refused += 1
            self.event("navigation:refused", url=short(url), frame="main" if main else "frame",
                       why="--allow-remote lets the page go to other addresses" if not self.allow_remote
                       else "only http(s) pages are opened")
            _abort(route)
            return
        self.answer(route)

    def answer(self, route: Any) -> None:
        """Let the request go on, or answer it from the game's files."""
        url = str(route.request.url)
        try:
            if self.files is not None and origin_of(url) == origin_of(ORIGIN):
                method = str(route.request.method).upper()
                if method not in ("GET", "HEAD"):
                    route.fulfill(status=405, body=b"the game's files are read-only", content_type="text/plain")
                    return
                answer = self.files.get(url)
                route.fulfill(status=answer.status, body=answer.body if method == "GET" else b"",
                              headers={"Content-Type": answer.content_type, "Cache-Control": "no-store"})
            else:
                route.continue_()
        except Exception as exc:  # noqa: BLE001 - the page or its request went meanwhile
            log.debug("game-bridge browser: a request could not be answered: %s", exc)


def _abort(route: Any) -> None:
    try:
        route.abort("aborted")  # (blockedbyclient would show an error page in its place)
    except Exception as exc:  # noqa: BLE001 - gone meanwhile
        log.debug("game-bridge browser: a refused request was gone: %s", exc)
