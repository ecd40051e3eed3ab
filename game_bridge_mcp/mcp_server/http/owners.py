"""Who launched what when several MCP sessions share one bridge process: one
:class:`SharedLauncher`, and each session's :class:`SessionLaunches`, which sees and stops its
own instances only."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, Callable

from ...errors import BridgeUsageError

log = logging.getLogger(__name__)

#: How long a session's instances get to close cleanly when the session ends.
SESSION_END_GRACE_MS = 3000


class SharedLauncher:
    """The process's one Launcher (made on the first launch) and which session owns each port."""

    def __init__(self, make_launcher: Callable[[], Any]) -> None:
        self._make = make_launcher
        self._launcher: Any = None
        self._lock = threading.Lock()
        #: port -> the id of the session that launched the instance there.
        self._owners: dict[int, str] = {}
        #: port -> the session that launched there last, kept after it stopped: the launcher
        #: keeps a stopped instance's output until the next launch there, for that session.
        self._last: dict[int, str] = {}

    def launcher(self) -> Any:
        with self._lock:
            if self._launcher is None:
                self._launcher = self._make()
            return self._launcher

    def started(self) -> Any:
        """The Launcher if one was made (nothing launched yet: None)."""
        with self._lock:
            return self._launcher

    def view(self, session: str) -> "SessionLaunches":
        return SessionLaunches(self, session)

    def owner(self, port: int) -> str | None:
        """The session whose instance runs on ``port`` (None: none of this process's)."""
        launcher = self.started()
        with self._lock:
            session = self._owners.get(port)
        if session is not None and (launcher is None or not launcher.is_launched(port)):
            with self._lock:  # it exited and the launcher let it go
                if self._owners.get(port) == session:
                    del self._owners[port]
            return None
        return session

    def ports_of(self, session: str) -> list[int]:
        with self._lock:
            ports = sorted(p for p, s in self._owners.items() if s == session)
        return [p for p in ports if self.owner(p) == session]

    def all_ports(self) -> list[int]:
        launcher = self.started()
        return list(launcher.launched_ports()) if launcher is not None else []

    def claim(self, port: int, session: str) -> None:
        with self._lock:
            self._owners[port] = session
            self._last[port] = session

    def launched_last(self, port: int) -> str | None:
        """The session that launched the newest instance on ``port``, running or stopped."""
        with self._lock:
            return self._last.get(port)

    def release(self, port: int, session: str) -> None:
        with self._lock:
            if self._owners.get(port) == session:
                del self._owners[port]

    def shutdown(self) -> None:
        """Stop every instance of every session (the server is exiting). Idempotent."""
        launcher = self.started()
        if launcher is not None:
            launcher.shutdown()


class SessionLaunches:
    """The Launcher's interface as one session sees it (what ``Bridge`` calls): launches
    are recorded as this session's; only this session's instances are listed, stopped,
    read or reaped through it."""

    def __init__(self, shared: SharedLauncher, session: str) -> None:
        self.shared = shared
        self.session = session
        self._closed = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ what Bridge reads
    def is_launched(self, port: int) -> bool:
        return self.shared.owner(port) == self.session

    def launched_ports(self) -> list[int]:
        return self.shared.ports_of(self.session)

    def launched_elsewhere(self, port: int) -> bool:
        """Whether another session of this bridge launched the instance on ``port``."""
        owner = self.shared.owner(port)
        return owner is not None and owner != self.session

    def all_launched_ports(self) -> list[int]:
        """Every session's instances (list_instances probes and flags them all)."""
        return self.shared.all_ports()

    def mark_listing(self, report: Mapping[str, Any]) -> None:
        """Mark each live record of a list_instances report with ``launchedByThisSession``
        (and, for another session's instance, a ``launchNote`` saying it cannot be stopped here)."""
        live = report.get("live")
        for record in live if isinstance(live, list) else ():
            port = record.get("port") if isinstance(record, dict) and "host" not in record else None
            if not isinstance(port, int):
                continue
            mine = self.is_launched(port)
            record["launchedByThisSession"] = mine
            if not mine and self.launched_elsewhere(port) and "launchNote" not in record:
                record["launchNote"] = ("launched by another MCP session of this bridge: only that session can "
                                        "stop it (its instances stop when it ends)")

    def has_output(self, port: int) -> bool:
        """Whether ``log`` reads output for ``port``: this session launched the newest instance
        there (running, or stopped and its output kept by the launcher)."""
        launcher = self.shared.started()
        return (launcher is not None and self.shared.launched_last(port) == self.session
                and launcher.has_output(port))

    def info(self, port: int) -> dict[str, Any] | None:
        launcher = self.shared.started()
        return None if launcher is None else launcher.info(port)

    # ------------------------------------------------------------------ what Bridge does
    def launch(self, **kwargs: Any) -> dict[str, Any]:
        with self._lock:
            if self._closed:
                raise BridgeUsageError("This MCP session has ended; connect again to launch instances.")
        launcher = self.shared.launcher()
        result: dict[str, Any] = launcher.launch(**kwargs)
        port = int(result["port"])
        self.shared.claim(port, self.session)
        with self._lock:
            ended = self._closed
        if ended:  # the session ended while its launch was booting: nothing may outlive it
            self._stop_quietly(port)
            raise BridgeUsageError("This MCP session ended while the instance booted; it was stopped again.")
        return result

    def stop(self, port: int, *, grace_ms: int = 3000) -> dict[str, Any]:
        self._own(port)
        result: dict[str, Any] = self.shared.launcher().stop(port, grace_ms=grace_ms)
        self.shared.release(port, self.session)
        return result

    def log(self, port: int, **kwargs: Any) -> dict[str, Any]:
        if not self.has_output(port):
            self._own(port)
        result: dict[str, Any] = self.shared.launcher().log(port, **kwargs)
        return result

    def _own(self, port: int) -> None:
        if not self.is_launched(port):  # Bridge checks first; this holds for any other caller
            raise BridgeUsageError(f"Port {port} was not launched by this MCP session.", port=port)

    def shutdown(self) -> None:
        """The session ended: stop its instances at once, each as stop_instance would
        (close, then terminate, then kill). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        ports = self.launched_ports()
        threads = [threading.Thread(target=self._stop_quietly, args=(port,), name=f"session-stop-{port}", daemon=True)
                   for port in ports]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _stop_quietly(self, port: int) -> None:
        try:
            self.shared.launcher().stop(port, grace_ms=SESSION_END_GRACE_MS)
        except Exception:  # noqa: BLE001 - one instance's failure must not keep the others running
            log.exception("stopping port %s at the end of its session failed", port)
        finally:
            self.shared.release(port, self.session)


