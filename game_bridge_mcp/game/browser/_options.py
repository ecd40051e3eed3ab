"""The browser wrapper's command line (its own options beside the family's), the rules for
what it may open (a local page by default, a remote one only with ``--allow-remote``), and
the ``gamebridge.json`` that ``--init`` writes."""

from __future__ import annotations

import html
import ipaddress
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...contract import ENV_DATE
from ...wrappers import named
from ..wrapper.options import SEED, SIZE, CommandLine, Options as WrapperOptions, UsageError
from ..wrapper.options import declaration as launch_declaration

ROW = named("browser")
PROG = f"game-bridge-mcp {ROW.name}"
USAGE = f"""usage: {PROG} [--port N] [--paused] [--size WxH] [--browser PATH] [--screenshot page|canvas]
                                [--seed N] [--date DATE] [--allow-remote] [--load-timeout S]
                                [--max-memory MIB] (URL | FILE | DIR)
       {PROG} --init [--force] [options] (URL | FILE | DIR)

Open an unmodified web game in headless Chromium with the game-bridge debug surface: the
page's clock (requestAnimationFrame, Date, performance.now, timers, CSS animations) is
the wrapper's, so pause, resume and step hold it still or run it frame by frame (1/60 s
of page time each); key, mouse and text are real browser input; screenshots show the
page; /state shows its title, visible text and canvases; its console is the event log.
The page's Date starts at the launch's time, performance.now at 0, and Math.random and
crypto.getRandomValues draw from the seed: the same inputs at the same frames give the same
page. A FILE or DIR is served to the page from http://game-bridge.localhost/ (DIR: its
index.html), an address no other program can reach, the same at every launch.

  --port N          serve on 127.0.0.1:N (default 0: any free port; GAME_BRIDGE_DEBUG_PORT)
  --paused          start paused, before the page's first frame (also GAME_BRIDGE_START_PAUSED=1)
  --size WxH        the viewport in page pixels (default 800x600)
  --browser PATH    the Chromium to run (also GAME_BRIDGE_BROWSER; default: chromium on PATH,
                    then the browsing library's own)
  --screenshot W    page (default: the whole viewport) or canvas (the page's largest canvas;
                    mouse coordinates are then the canvas's)
  --seed N          the page's random numbers (Math.random, crypto) from seed N (also
                    GAME_BRIDGE_SEED; default 0)
  --date DATE       the page's clock starts at DATE: 2024-10-31, 2024-10-31T18:30:00 (local
                    time), ...Z, or Unix ms (also GAME_BRIDGE_DATE; default: the launch's time)
  --allow-remote    allow a URL that is not on this machine (the default: loopback and files)
  --load-timeout S  seconds the page may take to load (default 30)
  --max-memory MIB  the most the browser may hold, in MiB: past it the page is ended, said
                    in an event and on stderr (default 2048)
  --init            write a gamebridge.json here that launches this page through the wrapper
  --force           with --init, replace an existing gamebridge.json
"""
DEFAULT_SIZE = (800, 600)
DEFAULT_LOAD_TIMEOUT_S = 30.0
DEFAULT_MAX_MEMORY_MIB = 2048
LOOPBACK_NAMES = ("localhost", "localhost.")


@dataclass
class Options(WrapperOptions):
    size: tuple[int, int] = DEFAULT_SIZE
    browser: str | None = None
    screenshot: str = "page"
    allow_remote: bool = False
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S
    max_memory_mib: int = DEFAULT_MAX_MEMORY_MIB
    seed: int | None = None
    #: ``--date`` as given (checked when read), and as Unix milliseconds.
    date: str | None = None
    date_ms: int | None = None
    target: str = ""


@dataclass(frozen=True)
class Target:
    """What to open: ``url`` directly, or ``root`` served over loopback and ``path`` in it."""

    url: str | None = None
    root: Path | None = None
    path: str = ""
    #: A DIR was named (its whole folder is the game's), not a FILE in one.
    folder: bool = False

    @property
    def name(self) -> str:
        if self.url is not None:
            parsed = urllib.parse.urlsplit(self.url)
            return parsed.netloc + (parsed.path if parsed.path not in ("", "/") else "")
        assert self.root is not None
        return (self.root / self.path).name if self.path else self.root.name


def _page(opts: Options, words: list[str]) -> None:
    """The one page to open, after the options (or after ``--``)."""
    first = words[0]
    if first == "--":
        if len(words) != 2:
            raise UsageError("name one page: a URL, a FILE or a DIR")
        opts.target = words[1]
    elif first.startswith("-"):
        raise UsageError(f"unknown option {first!r}")
    elif len(words) != 1:
        raise UsageError(f"name one page, after the options (got {first!r} and then {words[1]!r})")
    else:
        opts.target = first


def _set_browser(opts: Options, value: str) -> None:
    opts.browser = value


def _set_screenshot(opts: Options, value: str) -> None:
    if value not in ("page", "canvas"):
        raise UsageError(f"--screenshot is page or canvas, not {value!r}")
    opts.screenshot = value


def _set_load_timeout(opts: Options, value: str) -> None:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 600:
        raise UsageError(f"--load-timeout expects seconds, more than 0 and at most 600, got {value!r}")
    opts.load_timeout_s = seconds


def _set_max_memory(opts: Options, value: str) -> None:
    text = value.strip()
    if not text.isdigit() or not 64 <= int(text) <= 1_048_576:
        raise UsageError(f"--max-memory expects MiB, a whole number from 64 to 1048576, got {value!r}")
    opts.max_memory_mib = int(text)


def _set_date(opts: Options, value: str) -> None:
    from ._time import parse_date

    try:
        opts.date_ms = parse_date(value)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    opts.date = value


def start_date(opts: Options, environ: Mapping[str, str] | None = None) -> int | None:
    """The page's start as Unix ms: ``--date``, else ``GAME_BRIDGE_DATE``, else None (the
    launch's time); UsageError for a malformed ``GAME_BRIDGE_DATE``."""
    from ._time import parse_date

    if opts.date_ms is not None:
        return opts.date_ms
    text = (os.environ if environ is None else environ).get(ENV_DATE, "").strip()
    if not text:
        return None
    try:
        return parse_date(text, ENV_DATE)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


COMMAND_LINE = CommandLine(
    Options, _page, missing="name the page: a URL, a FILE or a DIR", switches=("--allow-remote",),
    valued={**SIZE, **SEED, "--date": _set_date, "--browser": _set_browser, "--screenshot": _set_screenshot,
            "--load-timeout": _set_load_timeout, "--max-memory": _set_max_memory})


def parse(argv: Sequence[str], environ: dict[str, str] | None = None) -> Options:
    return COMMAND_LINE.parse(argv, environ)


def _is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def resolve_target(text: str, *, allow_remote: bool) -> Target:
    """What ``text`` names, or UsageError saying why it cannot be opened."""
    parsed = urllib.parse.urlsplit(text)
    scheme = parsed.scheme.lower()
    if scheme == "file":
        return _local(Path(urllib.parse.unquote(parsed.path)))
    if scheme in ("http", "https"):
        if not parsed.hostname:
            raise UsageError(f"{text!r} names no host")
        if not _is_loopback(parsed.hostname) and not allow_remote:
            raise UsageError(f"{text!r} is not on this machine; pass --allow-remote to open a remote page "
                             "(the default is loopback URLs and local files)")
        return Target(url=text)
    if scheme and len(scheme) > 1:  # (a one-letter "scheme" is a Windows drive)
        raise UsageError(f"cannot open a {scheme}: URL; name an http(s) URL, a FILE or a DIR")
    return _local(Path(text))


def _local(path: Path) -> Target:
    if path.is_dir():
        if not (path / "index.html").is_file():
            raise UsageError(f"{path} has no index.html; name the page's file")
        return Target(root=path.resolve(), path="index.html", folder=True)
    if path.is_file():
        resolved = path.resolve()
        return Target(root=resolved.parent, path=resolved.name)
    raise UsageError(f"no such file or directory: {path}")


_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.I | re.S)


def page_name(opts: Options) -> str:
    """What ``--init`` calls the game: the page's title, else its folder's (or file's) name,
    else (a URL) its host and path."""
    try:
        target = resolve_target(opts.target, allow_remote=True)
    except UsageError:
        return opts.target
    if target.root is None:
        return target.name
    try:
        with open(target.root / target.path, "rb") as page:
            found = _TITLE.search(page.read(65536))
    except OSError:
        found = None
    title = " ".join(html.unescape(found.group(1).decode("utf-8", "replace")).split()) if found else ""
    return title[:100] or (target.root.name if target.folder else target.path) or opts.target


def declaration(opts: Options) -> dict[str, Any]:
    """The launch declaration that opens ``opts``' page through the wrapper (``--init``): no
    path of this machine but the page's."""
    argv: list[str] = []
    if opts.size != DEFAULT_SIZE:
        argv += ["--size", f"{opts.size[0]}x{opts.size[1]}"]
    if opts.browser:
        argv += ["--browser", opts.browser]
    if opts.screenshot != "page":
        argv += ["--screenshot", opts.screenshot]
    if opts.seed is not None:
        argv += ["--seed", str(opts.seed)]
    if opts.date is not None:
        argv += ["--date", opts.date]
    if opts.allow_remote:
        argv.append("--allow-remote")
    if opts.load_timeout_s != DEFAULT_LOAD_TIMEOUT_S:
        argv += ["--load-timeout", f"{opts.load_timeout_s:g}"]
    if opts.max_memory_mib != DEFAULT_MAX_MEMORY_MIB:
        argv += ["--max-memory", str(opts.max_memory_mib)]
    argv.append(opts.target)
    ready_ms = int(max(60.0, opts.load_timeout_s + 30) * 1000)
    return launch_declaration(ROW.module, f"{page_name(opts)} (web page, through game-bridge-mcp)", argv,
                              ready_timeout_ms=ready_ms)
