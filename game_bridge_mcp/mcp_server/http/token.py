"""The bearer token of ``--http``: where it comes from (``GAME_BRIDGE_TOKEN``, or generated),
how strong it must be, the one file per server a generated one is written to (after the bind,
never through a link, removed at exit), what ``call --url`` reads, and failed attempts logged
without flooding the log (docs/http.md, "Who may call")."""

from __future__ import annotations

import errno
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ...errors import BridgeUsageError
from ...paths import http_dir

log = logging.getLogger("game_bridge_mcp")

TOKEN_ENV = "GAME_BRIDGE_TOKEN"
#: The shortest token accepted from the environment.
MIN_TOKEN_CHARS = 16
#: What a token must be worth for a bind beyond loopback, estimated as its length times the
#: bits of its alphabet (the distinct characters it uses): 32 random hex digits are 128,
#: ``secrets.token_urlsafe(32)`` about 200; ``passwordpassword`` 48.
STRONG_TOKEN_BITS = 128
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
#: A server's token file, by the port it serves on.
TOKEN_FILE = "token-{port}"


def strength_bits(token: str) -> float:
    """A token's strength as length times log2 of its distinct characters (a bound from
    above for a random one, far above for a word repeated)."""
    distinct = len(set(token))
    return len(token) * math.log2(distinct) if distinct > 1 else 0.0


def choose_token(environ: Mapping[str, str], *, loopback: bool) -> tuple[str, bool]:
    """The token this server requires, and whether it was generated here. A bind beyond
    loopback needs the token set explicitly (it has to reach the other machine anyway, and
    nobody exposes a bridge by accident), and a strong one."""
    given = environ.get(TOKEN_ENV)
    if given is not None and given.strip():
        token = given.strip()
        if len(token) < MIN_TOKEN_CHARS or not all(33 <= ord(c) <= 126 for c in token):
            raise BridgeUsageError(
                f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} visible ASCII characters (no spaces); this one is "
                f"{len(token)} long. Make one with: {MAKE_ONE}.")
        if not loopback and strength_bits(token) < STRONG_TOKEN_BITS:
            raise BridgeUsageError(
                f"{TOKEN_ENV} is too weak for an address beyond loopback: about {strength_bits(token):.0f} bits "
                f"(its length times the bits of the {len(set(token))} different characters it uses), and this bind "
                f"needs {STRONG_TOKEN_BITS}. Use a random one: {MAKE_ONE}.")
        return token, False
    if not loopback:
        raise BridgeUsageError(
            f"--http on an address other than loopback exposes the bridge to the network, so it needs {TOKEN_ENV} "
            f"set explicitly (a random secret that the agents are given, e.g. {MAKE_ONE}).")
    return secrets.token_urlsafe(32), True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class TokenFile:
    """The file a generated token is written to for ``call --url`` on this machine:
    ``<home>/http/token-<port>``, one per server, written once the port is bound, created
    with O_EXCL|O_NOFOLLOW (never through a link, never over another live server's), mode
    0600, its first line the token and its second the server's pid; removed at exit."""

    def __init__(self, environ: Mapping[str, str], registry_dir: Path | None) -> None:
        self._environ = environ
        self._registry_dir = registry_dir
        self.path: Path | None = None

    def write(self, port: int, token: str) -> Path | None:
        """Write it; the path, or None (said on stderr by the caller) when it cannot be."""
        directory = http_dir(self._environ, self._registry_dir)
        if directory is None:
            return None
        path = directory / TOKEN_FILE.format(port=port)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        for _attempt in range(2):
            try:
                fd = os.open(path, flags, 0o600)
            except FileExistsError:
                if not self._stale(path):
                    log.warning("%s belongs to another live server: this server's token is not written", path)
                    return None
                try:
                    path.unlink()  # a server that was killed left it (its port is ours now)
                except OSError as exc:
                    log.warning("could not replace the stale %s: %s", path, exc)
                    return None
                continue
            except OSError as exc:
                log.warning("could not write the token to %s: %s", path, exc)
                return None
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(f"{token}\n{os.getpid()}\n")
            self.path = path
            return path
        return None

    @staticmethod
    def _stale(path: Path) -> bool:
        """Whether an existing token file's server is gone (or the file is no token file)."""
        try:
            if path.is_symlink() or not path.is_file():
                return True
            lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
            pid = int(lines[1]) if len(lines) > 1 and lines[1].strip().isdigit() else 0
        except OSError:
            return False
        return pid <= 0 or pid == os.getpid() or not _alive(pid)

    def remove(self) -> None:
        """At exit: remove the file, if it is still the one this server wrote."""
        path, self.path = self.path, None
        if path is None:
            return
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
            if len(lines) > 1 and lines[1].strip() == str(os.getpid()):
                path.unlink()
        except OSError:
            pass


def read_token_file(environ: Mapping[str, str], registry_dir: Path | None, port: int) -> str | None:
    """The token a local server on ``port`` generated (``call --url`` on this machine); None
    when there is none."""
    directory = http_dir(environ, registry_dir)
    if directory is None:
        return None
    try:
        fd = os.open(directory / TOKEN_FILE.format(port=port), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, encoding="utf-8") as handle:
            text = handle.readline().strip()
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ELOOP):
            log.debug("could not read the token file: %s", exc)
        return None
    return text or None


class FailedAttempts:
    """Requests refused for a missing or wrong token, logged at most once every
    ``every_s`` with how many and from where (a flood leaves a few lines, not thousands)."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic, *,
                 what: str = "request(s) without the right bearer token") -> None:
        self.every_s = every_s
        self.what = what
        self._clock = clock
        self._lock = threading.Lock()
        self._count = 0
        self._sources: dict[str, int] = {}
        self._last = -math.inf
        #: Every refusal since the start (for tests and a summary).
        self.total = 0

    def record(self, source: str) -> None:
        with self._lock:
            self.total += 1
            self._count += 1
            if len(self._sources) < 8 or source in self._sources:
                self._sources[source] = self._sources.get(source, 0) + 1
            now = self._clock()
            if now - self._last < self.every_s:
                return
            count, sources, self._count, self._sources = self._count, self._sources, 0, {}
            since = "" if self._last == -math.inf else f" in the last {now - self._last:.0f} s"
            self._last = now
        shown = ", ".join(f"{where} ({n})" for where, n in sorted(sources.items(), key=lambda item: -item[1]))
        log.warning("refused %d %s%s, from %s", count, self.what, since, shown or "?")


__all__ = ["FailedAttempts", "MIN_TOKEN_CHARS", "STRONG_TOKEN_BITS", "TOKEN_ENV", "TokenFile", "choose_token",
           "read_token_file", "strength_bits"]
