"""The browser wrapper's command line, the rules for what it may open (a local page by
default, a remote one only with ``--allow-remote``), and the ``gamebridge.json`` that
``--init`` writes."""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...contract import ENV_DEBUG_PORT

PROG = "game-bridge-mcp browser"
USAGE = f"""usage: {PROG} [--port N] [--paused] [--size WxH] [--browser PATH] [--screenshot page|canvas]
                                [--allow-remote] [--load-timeout S] (URL | FILE | DIR)
       {PROG} --init [--force] [options] (URL | FILE | DIR)

Open an unmodified web game in headless Chromium with the game-bridge debug surface: the
page's clock (requestAnimationFrame, Date, performance.now, timers, CSS animations) is
the wrapper's, so pause, resume and step hold it still or run it frame by frame (1/60 s
of page time each); key, mouse and text are real browser input; screenshots show the
page; /state shows its title, visible text and canvases; its console is the event log.
A FILE or DIR is served over a loopback HTTP server (DIR: its index.html).

  --port N          serve on 127.0.0.1:N (default 0: any free port; GAME_BRIDGE_DEBUG_PORT)
  --paused          start paused, before the page's first frame (also GAME_BRIDGE_START_PAUSED=1)
  --size WxH        the viewport in page pixels (default 800x600)
  --browser PATH    the Chromium to run (also GAME_BRIDGE_BROWSER; default: chromium on PATH,
                    then the browsing library's own)
  --screenshot W    page (default: the whole viewport) or canvas (the page's largest canvas;
                    mouse coordinates are then the canvas's)
  --allow-remote    allow a URL that is not on this machine (the default: loopback and files)
  --load-timeout S  seconds the page may take to load (default 30)
  --init            write a gamebridge.json here that launches this page through the wrapper
  --force           with --init, replace an existing gamebridge.json
"""
DEFAULT_SIZE = (800, 600)
MAX_SIDE = 8192
DEFAULT_LOAD_TIMEOUT_S = 30.0
DECLARATION = "gamebridge.json"
LOOPBACK_NAMES = ("localhost", "localhost.")


class UsageError(Exception):
    pass


@dataclass
class Options:
    port: int = 0
    paused: bool = False
    size: tuple[int, int] = DEFAULT_SIZE
    browser: str | None = None
    screenshot: str = "page"
    allow_remote: bool = False
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S
    init: bool = False
    force: bool = False
    target: str = ""
    help: bool = False


@dataclass(frozen=True)
class Target:
    """What to open: ``url`` directly, or ``root`` served over loopback and ``path`` in it."""

    url: str | None = None
    root: Path | None = None
    path: str = ""

    @property
    def name(self) -> str:
        if self.url is not None:
            parsed = urllib.parse.urlsplit(self.url)
            return parsed.netloc + (parsed.path if parsed.path not in ("", "/") else "")
        assert self.root is not None
        return (self.root / self.path).name if self.path else self.root.name


def parse(argv: Sequence[str], environ: dict[str, str] | None = None) -> Options:
    env = os.environ if environ is None else environ
    opts = Options()
    if env.get(ENV_DEBUG_PORT, "").strip():
        opts.port = _port(env[ENV_DEBUG_PORT], ENV_DEBUG_PORT)
    args = list(argv)
    index = 0
    valued = ("--port", "--size", "--browser", "--screenshot", "--load-timeout")
    while index < len(args):
        arg = args[index]
        name, eq, inline = arg.partition("=")
        if arg in ("-h", "--help"):
            opts.help = True
            return opts
        if name in valued:
            if eq:
                value = inline
            elif index + 1 < len(args):
                index += 1
                value = args[index]
            else:
                raise UsageError(f"{name} needs a value")
            _set(opts, name, value)
        elif arg in ("--paused", "--init", "--force", "--allow-remote"):
            setattr(opts, arg[2:].replace("-", "_"), True)
        elif arg == "--":
            rest = args[index + 1:]
            if len(rest) != 1:
                raise UsageError("name one page: a URL, a FILE or a DIR")
            opts.target = rest[0]
            return opts
        elif arg.startswith("-"):
            raise UsageError(f"unknown option {arg!r}")
        else:
            if index != len(args) - 1:
                raise UsageError(f"name one page, after the options (got {arg!r} and then {args[index + 1]!r})")
            opts.target = arg
            return opts
        index += 1
    raise UsageError("name the page: a URL, a FILE or a DIR")


def _set(opts: Options, name: str, value: str) -> None:
    if name == "--port":
        opts.port = _port(value, "--port")
    elif name == "--size":
        width, _x, height = value.lower().partition("x")
        if not (width.isdigit() and height.isdigit() and 1 <= int(width) <= MAX_SIDE and 1 <= int(height) <= MAX_SIDE):
            raise UsageError(f"--size expects WIDTHxHEIGHT, each 1 to {MAX_SIDE} (e.g. 800x600), got {value!r}")
        opts.size = (int(width), int(height))
    elif name == "--browser":
        opts.browser = value
    elif name == "--screenshot":
        if value not in ("page", "canvas"):
            raise UsageError(f"--screenshot is page or canvas, not {value!r}")
        opts.screenshot = value
    else:
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not 0 < seconds <= 600:
            raise UsageError(f"--load-timeout expects seconds, more than 0 and at most 600, got {value!r}")
        opts.load_timeout_s = seconds


def _port(value: str, source: str) -> int:
    text = value.strip()
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise UsageError(f"{source} expects a port number 0-65535, got {value!r}")
    return int(text)


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
        return Target(root=path.resolve(), path="index.html")
    if path.is_file():
        resolved = path.resolve()
        return Target(root=resolved.parent, path=resolved.name)
    raise UsageError(f"no such file or directory: {path}")


def declaration(opts: Options) -> dict[str, Any]:
    """The launch declaration that opens ``opts``' page through the wrapper, with the
    bridge's own interpreter (``{python}``): no path of this machine but the page's, so it
    can be committed (the launcher puts the bridge's package on the wrapper's path)."""
    argv = ["{python}", "-m", "game_bridge_mcp.game.browser", "--port", "{port}"]
    if opts.size != DEFAULT_SIZE:
        argv += ["--size", f"{opts.size[0]}x{opts.size[1]}"]
    if opts.browser:
        argv += ["--browser", opts.browser]
    if opts.screenshot != "page":
        argv += ["--screenshot", opts.screenshot]
    if opts.allow_remote:
        argv.append("--allow-remote")
    if opts.load_timeout_s != DEFAULT_LOAD_TIMEOUT_S:
        argv += ["--load-timeout", f"{opts.load_timeout_s:g}"]
    argv.append(opts.target)
    ready_ms = int(max(60.0, opts.load_timeout_s + 30) * 1000)
    launch: dict[str, Any] = {"argv": argv, "cwd": ".", "readyTimeoutMs": ready_ms}
    return {"name": f"{opts.target} (web page, through game-bridge-mcp)", "launch": launch}


def write_init(opts: Options, directory: Path) -> Path:
    path = directory / DECLARATION
    if path.exists() and not opts.force:
        raise FileExistsError(f"{path} already exists; pass --force to replace it")
    path.write_text(json.dumps(declaration(opts), indent=2) + "\n", encoding="utf-8")
    return path
