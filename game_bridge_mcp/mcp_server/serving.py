"""What every way of serving MCP implements (:class:`Transport`: start, serve, stop, shut
down) and the one way each is run (:func:`run`): its signals, and the one shutdown path that
reaps what was launched and ends the process. Which transport serves is the table's
(``transports.py``)."""

from __future__ import annotations

import abc
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..config import Config, configure_logging
from ..core.composites import Composite
from ..launch.guarantees import warn_once
from ..launch.parent import restore_sigchld

log = logging.getLogger("game_bridge_mcp")

#: The signals that end a server (each through the one shutdown path, exit code 128 + it).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Transport(abc.ABC):
    """One way of serving the bridge over MCP. :func:`run` calls :meth:`start` on the
    calling thread, then :meth:`serve` on the event loop until it returns (the client is
    done) or is stopped (:meth:`stop`, a signal), then :meth:`shutdown` once, whatever
    ended it."""

    #: The name of its row in the table of transports.
    name: ClassVar[str]

    def __init__(self, config: Config, *, composites: Sequence[Composite] = ()) -> None:
        self.config = config
        self.composites = tuple(composites)
        self._scope: anyio.CancelScope | None = None
        self._loop: Any = None
        self._stop_asked = False
        #: The one shutdown path (set by :func:`run`), for a transport's own watchers to end
        #: the server by (stdio's, when the client is gone).
        self.finish: Callable[[int], int] = _not_running

    @abc.abstractmethod
    def start(self) -> None:
        """Before serving: what can fail with a clear error (a port to bind, the standard
        streams to claim) and what says where it serves. Nothing is launched yet."""

    @abc.abstractmethod
    async def serve(self, tasks: anyio.abc.TaskGroup) -> None:
        """Serve until the client is done (return) or this is cancelled; ``tasks`` runs
        what must run beside it (and is cancelled when it returns)."""

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Stop every instance launched through it and let go of what it holds. Called
        once, by the one shutdown path, on any thread."""

    def stop(self) -> None:
        """Ask :meth:`serve` to end (from any thread): the one shutdown path follows."""
        self._stop_asked = True
        scope, loop = self._scope, self._loop
        if scope is None or loop is None:
            return
        try:
            anyio.from_thread.run_sync(scope.cancel, token=loop)
        except RuntimeError:  # on the loop's own thread
            scope.cancel()

    async def _serve_until_stopped(self, tasks: anyio.abc.TaskGroup) -> None:
        self._loop = anyio.lowlevel.current_token()
        with anyio.CancelScope() as scope:
            self._scope = scope
            if not self._stop_asked:
                await self.serve(tasks)
        self._scope = None


def _not_running(code: int) -> int:
    raise RuntimeError("the transport is not running: serve it with serving.run()")


def run(transport: Transport, *, exit_process: bool = True) -> int:
    """Serve with ``transport`` until the client is done, :meth:`Transport.stop` is called,
    or SIGINT/SIGTERM/SIGHUP arrives; then the one shutdown path: reap what was launched,
    flush, end the process (a signal: exit code 128 + its number; an error: 1; else 0, or
    return 0 when ``exit_process`` is False)."""
    config = transport.config
    configure_logging(config.environ)
    restore_sigchld()  # before anything is launched (the subreaper is the entry point's: cli/main.py)
    warn_once(sys.stderr)  # psutil missing: say what cannot be guaranteed (once; cli/main.py may have)
    finished = threading.Lock()

    def finish(code: int) -> int:
        """The one shutdown path: reap what was launched, flush, exit."""
        with finished:
            try:
                transport.shutdown()
            except Exception:  # noqa: BLE001 - the process still ends, and says why
                log.exception("shutdown failed")
            finally:
                sys.stderr.flush()
                if exit_process or code != 0:
                    os._exit(code)
        return code

    transport.finish = finish
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # Until the loop listens for them (watch_signals), a signal ends the server the same way.
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, lambda number, _frame: finish(128 + number))
    try:
        transport.start()
    except BaseException:
        with finished:  # nothing is served: the caller reports the error (a port in use, a bad token)
            transport.shutdown()
        _restore(previous)
        raise

    async def watch_signals() -> None:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async for signum in signals:
                log.info("signal %s: shutting down", signum)
                # A transport may hold a thread that cannot be cancelled (the SDK's stdin
                # reader): do not unwind, finish from here (in a thread, so the loop stays
                # responsive meanwhile).
                await anyio.to_thread.run_sync(finish, 128 + int(signum), abandon_on_cancel=True)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            if threading.current_thread() is threading.main_thread():
                tasks.start_soon(watch_signals)
            await transport._serve_until_stopped(tasks)
            tasks.cancel_scope.cancel()

    try:
        anyio.run(main)
    except BaseException:  # noqa: BLE001 - whatever ended the loop, launched games are reaped
        log.exception("server stopped by an error")
        return finish(1)
    finally:
        _restore(previous)
    return finish(0)


def _restore(handlers: dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
