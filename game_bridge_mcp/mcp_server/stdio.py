"""Serving the bridge over stdio: private protocol streams (nothing else can reach stdout),
signals, and one shutdown path that reaps launched instances."""

from __future__ import annotations

import gc
import io
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.stdio import stdio_server

from ..config import Config, configure_logging
from ..core.bridge import Bridge
from ..core.composites import Composite
from ..launch.guarantees import warn_once
from ..launch.parent import restore_sigchld
from .adapter import BridgeServer
from .fastpath import DISABLE_ENV, FastPath
from .pipes import LineReader, Writer, hung_up, loop_streams
from .reader import ThreadedReader

log = logging.getLogger("game_bridge_mcp")


def _claim_stdio() -> tuple[Any, Any]:
    """Keep the protocol's fds private; point fd 0 at /dev/null and fd 1 at stderr."""
    sys.stdout.flush()
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    streams = loop_streams(proto_in, proto_out)  # read and written on the event loop: no thread per line
    if streams is not None:
        return streams
    stdin = anyio.wrap_file(io.TextIOWrapper(os.fdopen(proto_in, "rb", buffering=0), encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(proto_out, "wb", buffering=0), encoding="utf-8", write_through=True))
    return stdin, stdout


#: glibc's mallopt parameter for the size from which blocks are mapped on their own.
M_MMAP_THRESHOLD = -3
#: Set this long after start (off the path to the first answer: importing ctypes costs a few ms).
ALLOCATOR_TUNING_DELAY_S = 0.5


def return_large_blocks_to_the_system() -> bool:
    """Keep glibc's mmap threshold at 1 MiB. By default glibc raises it to the size of each
    large block freed (up to 32 MiB), after which a 10 MB /state's buffers come from the
    heap and stay in the process when freed; with it fixed, they go back to the system at
    once. False where there is no glibc (nothing to tune)."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 1 << 20))
    except (OSError, AttributeError, ImportError):
        return False


#: Reading stops while the answers have not moved for this long (a client not reading them).
HOLD_AFTER_S = 0.05
#: Once stdin is closed, answers that do not move for this long end the server.
GONE_AFTER_S = 3.0


def _hold(out: Writer, fast: FastPath | None) -> Callable[[], bool]:
    """When the reader must wait: the fast path's queue is full, or the answers already
    due are not being read (more requests would only pile up behind them)."""
    def hold() -> bool:
        return (fast is not None and fast.full) or out.stalled_for() > HOLD_AFTER_S
    return hold


def _watch_for_a_gone_client(fd: int, out: Writer, finish: Callable[[int], int]) -> None:
    """A client that closed stdin and stopped reading will never take its answers: with
    writes stuck and nothing to read, nothing else would end the server. Checked twice a
    second; it then ends the server the one way (launched games reaped)."""
    def watch() -> None:
        while True:
            time.sleep(0.5)
            if hung_up(fd) and out.stalled_for() > GONE_AFTER_S:
                log.warning("stdin is closed and the client has not read its answers for %.0f s: shutting down",
                            GONE_AFTER_S)
                finish(0)
                os._exit(0)  # finish returns only when embedded; nothing can unblock the stuck writes

    threading.Thread(target=watch, name="gb-gone-client", daemon=True).start()


def start_stdio_server(config: Config, *, composites: Sequence[Composite] = (), exit_process: bool = True) -> int:
    """Serve over stdio until stdin closes or SIGINT/SIGTERM/SIGHUP arrives, then reap what
    was launched. A signal always ends the process (exit code 128 + the signal number);
    stdin EOF ends it with 0, or returns 0 when ``exit_process`` is False."""
    configure_logging(config.environ)
    restore_sigchld()  # before anything is launched (the subreaper is the entry point's: cli/main.py)
    warn_once(sys.stderr)  # psutil missing: say what cannot be guaranteed (once; cli/main.py may have)
    bridge = Bridge(config, composites=composites)
    app = BridgeServer(bridge)
    stdin, stdout = _claim_stdio()
    fast: FastPath | None = None
    reader: ThreadedReader | None = None
    protocol_in = stdin.fileno() if isinstance(stdin, LineReader) else None
    if isinstance(stdin, LineReader) and isinstance(stdout, Writer) and config.environ.get(DISABLE_ENV) != "1":
        fast = FastPath(app, stdout)  # tools/call lines answered without the SDK's machinery
        stdout.observe = fast.outgoing
        # stdin is read on threads that run the calls they read; the SDK reads the rest
        reader = ThreadedReader(stdin.fileno(), fast, max_calls=fast.max_calls)
        stdin = LineReader(reader.sdk_fd)
        reader.hold = _hold(stdout, fast)
        reader.start()
    if isinstance(stdin, LineReader) and isinstance(stdout, Writer):
        stdin.hold = _hold(stdout, None)
    # The start-up heap (the SDK, pydantic's schemas: tens of thousands of objects) lives
    # as long as the process: keep it out of the collector's full passes, which otherwise
    # rescan it while a large /state is parsed and digested.
    gc.freeze()
    finished = threading.Lock()

    def finish(code: int) -> int:
        """The one shutdown path: reap launched instances, flush, exit."""
        with finished:
            try:
                if fast is not None:
                    fast.close()  # its calls are cancelled and end (within about 100 ms)
                bridge.shutdown()
            finally:
                sys.stderr.flush()
                if exit_process or code != 0:
                    os._exit(code)
        return code

    async def watch_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                log.info("signal %s: shutting down", signum)
                # The SDK's stdin reader is a thread that cannot be cancelled: do not unwind,
                # finish from here (in a thread, so the loop stays responsive meanwhile).
                await anyio.to_thread.run_sync(finish, 128 + int(signum), abandon_on_cancel=True)

    async def tune_allocator() -> None:
        await anyio.sleep(ALLOCATOR_TUNING_DELAY_S)
        return_large_blocks_to_the_system()

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            if threading.current_thread() is threading.main_thread():
                tasks.start_soon(watch_signals)
            tasks.start_soon(tune_allocator)
            async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
                await app.run(read_stream, write_stream)
            tasks.cancel_scope.cancel()

    if protocol_in is not None and isinstance(stdout, Writer):
        _watch_for_a_gone_client(protocol_in, stdout, finish)
    try:
        anyio.run(main)
    except BaseException:  # noqa: BLE001 - whatever ended the loop, launched games are reaped
        log.exception("server stopped by an error")
        return finish(1)
    return finish(0)
