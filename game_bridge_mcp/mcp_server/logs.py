"""The bridge's own log lines as MCP log notifications, at the level the client sets, queued and
sent by one thread so logging never blocks; stderr keeps its own level."""

from __future__ import annotations

import logging
import queue
import threading
import weakref
from typing import Any, Protocol

LOGGER = "game_bridge_mcp"
#: The protocol's levels (RFC 5424's, least severe first) and the Python levels they are.
MCP_LEVELS: dict[str, int] = {"debug": logging.DEBUG, "info": logging.INFO, "notice": 25,
                              "warning": logging.WARNING, "error": logging.ERROR,
                              "critical": logging.CRITICAL, "alert": 55, "emergency": 60}
#: Records waiting to be sent at most; beyond, the newest are dropped (and counted).
QUEUE_MAX = 1000
#: A record carrying this attribute (``extra={NOT_FORWARDED: True}``) goes to stderr only:
#: the forwarder's own trouble must not loop back into it.
NOT_FORWARDED = "gb_not_forwarded"


def python_level(name: str) -> int:
    """The Python level of a protocol level name (an unknown one counts as warning)."""
    return MCP_LEVELS.get(str(name).lower(), logging.WARNING)


def mcp_level(levelno: int) -> str:
    """The protocol level name for a Python level: the most severe one it reaches."""
    found = "debug"
    for name, number in MCP_LEVELS.items():
        if levelno >= number:
            found = name
    return found


class Destination(Protocol):
    def send_log(self, level: str, logger: str, message: str) -> None: ...


class LogForwarder(logging.Handler):
    """The one handler on the ``game_bridge_mcp`` logger that feeds the MCP session."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger(LOGGER).getEffectiveLevel())
        self.setFormatter(logging.Formatter("%(message)s"))
        self._queue: queue.Queue[tuple[str, str, str]] = queue.Queue(QUEUE_MAX)
        self._destination: weakref.ReferenceType[Any] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: Records dropped because the queue was full.
        self.dropped = 0
        #: Whether a client has set the level (until then it is stderr's).
        self.client_level: str | None = None

    # ------------------------------------------------------------------ the session
    def forward_to(self, destination: Destination) -> None:
        """Send from now on to ``destination`` (the server whose client last spoke)."""
        with self._lock:
            self._destination = weakref.ref(destination)
            if self._thread is None:
                self._thread = threading.Thread(target=self._drain, name="gb-mcp-log", daemon=True)
                self._thread.start()

    def set_level(self, name: str) -> None:
        """``logging/setLevel``: forward records at ``name`` and above. Stderr keeps its
        level: a root handler with none is given the root's level first, and the logger is
        opened only as far as the forwarder needs."""
        level = python_level(name)
        self.client_level = str(name).lower()
        self.setLevel(level)
        root = logging.getLogger()
        for handler in root.handlers:
            if handler.level == logging.NOTSET:
                handler.setLevel(root.getEffectiveLevel())
        logger = logging.getLogger(LOGGER)
        if level < logger.getEffectiveLevel():
            logger.setLevel(level)

    # ------------------------------------------------------------------ records
    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, NOT_FORWARDED, False) or self._destination is None:
            return
        try:
            line = self.format(record)
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is not sent
            return
        try:
            self._queue.put_nowait((mcp_level(record.levelno), record.name, line))
        except queue.Full:
            self.dropped += 1

    def _drain(self) -> None:
        while True:
            level, name, line = self._queue.get()
            ref = self._destination
            destination = ref() if ref is not None else None
            if destination is None:
                continue
            try:
                destination.send_log(level, name, line)
            except Exception:  # noqa: BLE001 - the session ended; stderr has the line anyway
                logging.getLogger(LOGGER).debug("could not send a log notification", exc_info=True,
                                                extra={NOT_FORWARDED: True})

    def pending(self) -> int:
        return self._queue.qsize()


_forwarder: LogForwarder | None = None
_forwarder_lock = threading.Lock()


def forwarder() -> LogForwarder:
    """The process's forwarder, attached to the ``game_bridge_mcp`` logger on first use."""
    global _forwarder
    with _forwarder_lock:
        if _forwarder is None:
            _forwarder = LogForwarder()
            logging.getLogger(LOGGER).addHandler(_forwarder)
        return _forwarder


__all__ = ["LOGGER", "MCP_LEVELS", "NOT_FORWARDED", "LogForwarder", "forwarder", "mcp_level", "python_level"]
