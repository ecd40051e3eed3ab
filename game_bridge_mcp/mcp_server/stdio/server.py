"""The stdio transport: private protocol streams (nothing else can reach stdout), stdin read by
threads that run the calls they read, and a client that is gone noticed; run, with its signals
and the one shutdown path, by ``serving.run``."""

from __future__ import annotations

import gc
import io
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.abc
from mcp.server.stdio import stdio_server

from ...config import Config
from ...core.bridge import Bridge
from ...core.composites import Composite
from ..adapter import BridgeServer
from .fastpath import DISABLE_ENV, FastPath
from .pipes import LineReader, Writer, hung_up, loop_streams
from .reader import ThreadedReader
from ..serving import Transport, run

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


class StdioTransport(Transport):
    """MCP over the process's stdin and stdout (the default transport)."""

    name = "stdio"

    def __init__(self, config: Config, *, composites: Sequence[Composite] = ()) -> None:
        super().__init__(config, composites=composites)
        self.bridge: Bridge | None = None
        self.fast: FastPath | None = None
        self._streams: tuple[Any, Any] | None = None

    def start(self) -> None:
        bridge = self.bridge = Bridge(self.config, composites=self.composites)
        app = self.app = BridgeServer(bridge)
        stdin, stdout = _claim_stdio()
        protocol_in = stdin.fileno() if isinstance(stdin, LineReader) else None
        if isinstance(stdin, LineReader) and isinstance(stdout, Writer) \
                and self.config.environ.get(DISABLE_ENV) != "1":
            fast = self.fast = FastPath(app, stdout)  # tools/call lines answered without the SDK's machinery
            stdout.observe = fast.outgoing
            # stdin is read on threads that run the calls they read; the SDK reads the rest
            reader = ThreadedReader(stdin.fileno(), fast, max_calls=fast.max_calls)
            stdin = LineReader(reader.sdk_fd)
            reader.hold = _hold(stdout, fast)
            reader.start()
        if isinstance(stdin, LineReader) and isinstance(stdout, Writer):
            stdin.hold = _hold(stdout, None)
        self._streams = stdin, stdout
        # The start-up heap (the SDK, pydantic's schemas: tens of thousands of objects) lives
        # as long as the process: keep it out of the collector's full passes, which otherwise
        # rescan it while a large /state is parsed and digested.
        gc.freeze()
        if protocol_in is not None and isinstance(stdout, Writer):
            _watch_for_a_gone_client(protocol_in, stdout, lambda code: self.finish(code))

    async def serve(self, tasks: anyio.abc.TaskGroup) -> None:
        assert self._streams is not None, "start() first"
        stdin, stdout = self._streams

        async def tune_allocator() -> None:
            await anyio.sleep(ALLOCATOR_TUNING_DELAY_S)
            return_large_blocks_to_the_system()

        tasks.start_soon(tune_allocator)
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await self.app.run(read_stream, write_stream)

    def shutdown(self) -> None:
        if self.fast is not None:
            self.fast.close()  # its calls are cancelled and end (within about 100 ms)
        if self.bridge is not None:
            self.bridge.shutdown()


def start_stdio_server(config: Config, *, composites: Sequence[Composite] = (), exit_process: bool = True) -> int:
    """Serve over stdio until stdin closes or SIGINT/SIGTERM/SIGHUP arrives, then reap what
    was launched. A signal always ends the process (exit code 128 + the signal number);
    stdin EOF ends it with 0, or returns 0 when ``exit_process`` is False."""
    return run(StdioTransport(config, composites=composites), exit_process=exit_process)


TRANSPORT = StdioTransport
