"""``game-bridge-mcp browser``: open an unmodified web page in headless Chromium and serve the
kit's surface once it has loaded, until ``close``, the page ends or SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..._version import __version__
from ..wrapper.input import input_commands
from ..wrapper.main import Cli, main as wrapper_main
from ..wrapper.serve import Late, Say, add_commands, assemble, drive, start
from ..wrapper.options import launch_seed
from ._files import HOST as FILES_HOST
from ..wrapper.options import UsageError
from ._options import COMMAND_LINE, ROW, USAGE, Options, Target, declaration, resolve_target, start_date

log = logging.getLogger(__name__)
say = Say(ROW.name)

INSTALL = "pip install 'game-bridge-mcp[browser]'"
#: Seconds a still-loading page is given before the wrapper says so on stderr.
LOAD_WARNING_S = 3.0
#: Seconds after SIGTERM before the wrapper stops waiting for the page and ends hard.
STOP_GRACE_S = 5.0
#: Frames a second while running (each 1/60 s of page time).
HZ = 60.0
#: Chromium's own options beside the library's: sound without a click first. (Its crash
#: handler still starts in a session of its own; the launcher finds it as a descendant
#: carrying the launch's marker, and it exits with the browser.)
BROWSER_ARGS = ["--autoplay-policy=no-user-gesture-required",
                # the wheel scrolls at once, not in an animation on wall-clock time
                "--disable-smooth-scrolling",
                # the game's files' address is answered in the wrapper, never looked up
                f"--host-resolver-rules=MAP {FILES_HOST} ~NOTFOUND"]


def _bundled(playwright: Any) -> Any:
    return lambda: playwright.chromium.executable_path


def run(opts: Options) -> int:
    """Open the page under the wrapper; returns the process exit code."""
    try:
        target = resolve_target(opts.target, allow_remote=opts.allow_remote)
        seed = launch_seed(opts.seed)
        start_ms = start_date(opts)
    except UsageError as exc:
        say(str(exc))
        return 2
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        say(f"the browsing library (Playwright) is not installed here: {INSTALL}")
        return 1
    from ._chromium import GroupedBrowser, Scratch, find_browser
    from ._files import Files, folder_served

    files: Files | None = None
    if target.root is not None:
        file = target.root / target.path
        only = None if target.folder or folder_served(file) else target.path
        if only is not None:
            say(f"serving only {target.path}, not the rest of {target.root} (it is your home folder, above it, "
                "or others can write there); put the game in a folder of its own and open that to serve it all")
        try:
            files = Files(target.root, only=only)
        except OSError as exc:
            say(f"cannot open {target.root}: {exc.strerror or exc}")
            return 1
    url = target.url if target.url is not None else files.url(target.path)  # type: ignore[union-attr]
    grouped: GroupedBrowser | None = None
    scratch = Scratch()  # (first, the folders of wrappers that were ended hard are removed)
    os.environ.update(TMPDIR=str(scratch.tmp))  # the library's driver keeps its profile and artifacts there
    try:
        with sync_playwright() as playwright:
            try:
                executable = find_browser(opts.browser, dict(os.environ), _bundled(playwright))
            except ValueError as exc:
                say(str(exc))
                return 1
            grouped = GroupedBrowser(executable, scratch)
            return _serve(playwright, grouped, opts, target, url, files=files, seed=seed, start_ms=start_ms)
    finally:
        if grouped is not None:
            grouped.close()
        scratch.remove()
        if files is not None:
            files.close()


def _serve(playwright: Any, grouped: Any, opts: Options, target: Target, url: str, *, files: Any, seed: int,
           start_ms: int | None) -> int:
    from playwright.sync_api import Error as PlaywrightError

    from . import _commands as page_commands
    from ._input import WORDS
    from ._network import Network
    from ._chromium import MemoryCap
    from ._page import MAX_CHUNK, Page, PageGone
    from ._time import PageTime

    sandbox = os.geteuid() != 0
    if not sandbox:
        say("running as root, so Chromium runs without its sandbox (--no-sandbox): the page is held only by "
            "what root may do; run the wrapper as another user to keep the sandbox")
    try:
        browser = playwright.chromium.launch(executable_path=str(grouped.shim), headless=True,
                                             chromium_sandbox=sandbox,
                                             args=[*BROWSER_ARGS, f"--js-flags=--max-old-space-size={opts.max_memory_mib}"])
    except PlaywrightError as exc:
        say(f"{grouped.executable} did not start: {_first_line(exc)}")
        return 1
    context = browser.new_context(viewport={"width": opts.size[0], "height": opts.size[1]}, device_scale_factor=1,
                                  service_workers="block", accept_downloads=False)
    page = context.new_page()

    page_time = PageTime(page, seed=seed, start_ms=start_ms)
    page_time.install()
    late = Late()
    bridge = assemble(
        target.name, f"Chromium {browser.version} via game-bridge-mcp {__version__}, seed {seed}",
        state=late.state, on_close=lambda: late.engine.close(), paused=opts.paused,
        description=(f"{target.name}: an unmodified web page, run by game-bridge-mcp's browser wrapper in "
                     "headless Chromium, which knows nothing of its rules. Look at it with screenshots and "
                     "ui.text; play it with key, mouse and text as a player would; pause, step and resume its "
                     "clock (timers, animation frames, Date and CSS animations stand still while paused)."),
        input_help="Act as a player: keys, the pointer and typed text, delivered as real browser input.")
    driver = Page(page, bridge, canvas=opts.screenshot == "canvas", size=opts.size, time_=page_time,
                  load_timeout_s=opts.load_timeout_s,
                  memory=MemoryCap(grouped.memory, opts.max_memory_mib * 2 ** 20))
    late.engine = driver
    driver.attach(on_popup=lambda popup: _popup(driver, popup))
    Network(home=url, files=files, allow_remote=opts.allow_remote, event=bridge.event).attach(context)
    loaded = threading.Event()

    def warn_loading() -> None:
        if not loaded.wait(LOAD_WARNING_S):
            say(f"{url} has not finished loading in {LOAD_WARNING_S:g} s; the debug surface starts once it has "
                f"(--load-timeout {opts.load_timeout_s:g} s)")

    threading.Thread(target=warn_loading, name="game-bridge-load-warning", daemon=True).start()
    try:
        response = page.goto(url, wait_until="load", timeout=opts.load_timeout_s * 1000)
    except PlaywrightError as exc:
        say(f"{url} did not load: {_first_line(exc)}")
        return 1
    finally:
        loaded.set()
    if response is not None and response.status >= 400:
        say(f"{url} answered HTTP {response.status} {response.status_text}; opening it anyway")

    driver.start()
    if not bridge.name or bridge.name == target.name:
        title = str(driver.seen.get("title") or "").strip()
        if title:
            bridge.name = title[:100]
    bridge.screenshot(driver.capture, window=driver.window_size, hasher=driver.picture_hash)
    add_commands(bridge, input_commands(driver.devices, driver, WORDS))
    bridge.on_step_interrupted(lambda: driver.schedule.let_go(driver.devices.release_all))
    page_commands.register(bridge, driver, driver.seen.get("commands"))
    _on_signals(bridge, grouped)
    if start(bridge, opts.port, target.name, say) is None:
        return 1
    try:
        drive(driver, bridge, hz=HZ, max_chunk=MAX_CHUNK)
    except PageGone:
        pass  # driver.gone says why
    finally:
        bridge.stop()
        if not grouped.running and grouped.pid is not None and driver.gone != "closed by the agent":
            driver.gone = f"the browser exited (code {grouped.exit_code}) under the page"
        try:
            browser.close()
        except PlaywrightError:
            pass
    why = driver.gone or "stopped"
    say(f"{target.name} ended ({why}) after {driver.frames_run} frames")
    return 0 if why in ("closed by the agent", "the page closed itself", "stopped") else 1


def _popup(driver: Any, popup: Any) -> None:
    """A page the game opened (``window.open``): reported and closed (one page per instance)."""
    if popup is driver.page:
        return
    try:
        where = popup.url
        popup.close()
    except Exception:  # noqa: BLE001 - gone already
        where = "?"
    driver.bridge.event("popup", url=str(where)[:500], closed=True)


def _on_signals(bridge: Any, grouped: Any) -> None:
    """SIGTERM / SIGINT end the loop; a page that holds the thread is ended hard after
    :data:`STOP_GRACE_S`, its browser with it."""

    def handler(signum: int, _frame: Any) -> None:
        bridge.request_stop()

        def hard_stop() -> None:
            time.sleep(STOP_GRACE_S)
            say(f"the page did not let go within {STOP_GRACE_S:g} s of signal {signum}; ending now")
            grouped.close(grace_s=0.5)  # the browser, and the stand-in's directory
            os._exit(128 + signum)

        threading.Thread(target=hard_stop, name="game-bridge-hard-stop", daemon=True).start()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("=")]
    return lines[0][:500] if lines else type(exc).__name__


def _check_init(opts: Options) -> None:
    resolve_target(opts.target, allow_remote=opts.allow_remote)


CLI = Cli(row=ROW, usage=USAGE, command_line=COMMAND_LINE, declaration=declaration, run=run,
          target=lambda opts: opts.target, check_init=_check_init, verb="opens")


def main(argv: Sequence[str] | None = None) -> int:
    return wrapper_main(CLI, argv)
