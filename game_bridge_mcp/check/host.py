"""``check``: what the game does on the machine: its registry entry, whether it listens beyond
loopback or answers a rebinding page, and whether it exits on ``close``."""

from __future__ import annotations

import http.client
import ipaddress
import time
from pathlib import Path
from collections.abc import Mapping

from .base import FAIL, PASS, SKIP, WARN, CheckSession, show_value
from ..wire.transport import HEALTH_MAX_BYTES, TransportError


class HostChecks(CheckSession):
    """The registry, loopback-only, Host/Origin and close checks."""

    # ------------------------------------------------------------------ registry
    def check_registry(self) -> None:
        from ..paths import registry_dir
        from ..registry import is_loopback_literal, read_registry

        directory = registry_dir(self.environ, self.registry_override)
        scan = read_registry(directory)
        mine = [e for e in scan.entries if e.port == self.port]
        for bad in scan.problems + scan.ignored_hosts:
            if bad.port == self.port or (self.target.pid is not None and bad.pid == self.target.pid):
                self.report(FAIL, f"registry entry {bad.path.name} for this game is unusable", bad.reason)
        if not mine:
            self.report(WARN, f"no registry entry for port {self.port} in {directory}",
                        "Optional, but with an entry list_instances finds the game without scanning and "
                        "shows its pid and working directory. Write <pid>.json after binding the port.")
            return
        listener = self.target.pid or _listener_pid(self.port)
        live = [e for e in mine if listener is None or e.pid == listener]
        stale = [e for e in mine if e not in live]
        if not live:
            entry = mine[0]
            self.report(FAIL, f"registry entry {entry.path.name} names pid {entry.pid}, but pid {listener} "
                              f"listens on port {self.port}",
                        "Write the entry from the process that serves the port, named <its pid>.json.")
            return
        entry = self.entry = live[0]
        problems: list[str] = []
        if entry.path.name != f"{entry.pid}.json":
            problems.append(f"the file is called {entry.path.name}, not {entry.pid}.json")
        if not is_loopback_literal(entry.host):
            problems.append(f"host {entry.host!r} is not 127.0.0.1 or ::1")
        actual_cwd = self.target.cwd or _process_cwd(entry.pid)
        if entry.cwd is None:
            problems.append("it has no cwd (which checkout is this build?)")
        elif actual_cwd is not None and not _same_path(entry.cwd, actual_cwd):
            problems.append(f"cwd says {entry.cwd}, but the game runs in {actual_cwd}")
        if problems:
            self.report(FAIL, f"registry entry {entry.path.name} is wrong", *problems)
        else:
            known = "the process listening on the port" if listener else "a live process"
            self.report(PASS, f"registry entry {entry.path.name}: port {entry.port}, pid {entry.pid} "
                              f"({known}), cwd {entry.cwd}")
        for old in stale:
            self.report(WARN, f"registry entry {old.path.name} also claims port {self.port} (pid {old.pid})",
                        "Probably left by a crashed run; list_instances reports it as stale.")
        if self.target.entry_seen_before_bind is True:
            self.report(FAIL, "registry entry was written before the port was bound",
                        "Write it only after the debug port is listening: an entry for a port that was "
                        "never claimed is worse than none.")
        elif self.target.entry_seen_before_bind is False:
            self.report(PASS, "registry entry was written after the port was bound")
        elif not self.target.launched:
            self.report(SKIP, "registry entry written after bind: checked only with --launch")

    # ------------------------------------------------------------------ network exposure
    def check_loopback_only(self) -> None:
        """Read the game's listening sockets instead of connecting to the machine's other
        addresses: no traffic leaves loopback, and 0.0.0.0 is caught on any machine."""
        listening = listening_addresses(self.port)
        if listening is None:
            self.report(SKIP, "loopback-only binding: cannot see this machine's listening sockets "
                              "(psutil is missing or not permitted)")
            return
        if not listening:
            self.report(SKIP, f"loopback-only binding: no listening socket found for port {self.port}")
            return
        exposed = [ip for ip in listening if not _is_loopback(ip)]
        if exposed:
            shown = ", ".join(f"{ip} (every interface)" if _is_unspecified(ip) else ip for ip in exposed)
            self.report(FAIL, f"port {self.port} listens on {shown}",
                        "The debug surface is reachable from the network. Bind 127.0.0.1 only.")
        else:
            self.report(PASS, f"bound to loopback only (listening on {', '.join(listening)})")

    def _raw_status(self, headers: Mapping[str, str]) -> int | None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=min(self.timeout_s, 3.0))
        try:
            conn.putrequest("GET", "/health", skip_host=True, skip_accept_encoding=True)
            for key, value in headers.items():
                conn.putheader(key, value)
            conn.endheaders()
            response = conn.getresponse()
            response.read(HEALTH_MAX_BYTES)
            return response.status
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def check_hardening(self) -> None:
        host_status = self._raw_status({"Host": f"attacker.example:{self.port}"})
        origin_status = self._raw_status({"Host": f"127.0.0.1:{self.port}", "Origin": "http://attacker.example"})
        if host_status is not None and 200 <= host_status < 300:
            self.report(WARN, "a request with Host: attacker.example is answered",
                        "DNS rebinding lets a web page read and drive the game. Refuse (403) any Host "
                        "that is not 127.0.0.1, localhost or [::1] with this port (the Python kit does).")
        else:
            self.report(PASS, f"a foreign Host header is refused (HTTP {host_status or 'closed'})")
        if origin_status is not None and 200 <= origin_status < 300:
            self.report(WARN, "a request with an Origin header is answered",
                        "Any web page open in the developer's browser can send GET /command. Refuse (403) "
                        "requests that carry an Origin header (the Python kit does).")
        else:
            self.report(PASS, f"a request with an Origin header is refused (HTTP {origin_status or 'closed'})")

    # ------------------------------------------------------------------ close
    def _port_quiet(self) -> bool:
        try:
            self.get("/health", max_bytes=HEALTH_MAX_BYTES, timeout_s=0.5)
        except TransportError as exc:
            return exc.kind in ("refused", "reset")
        return False

    def check_close(self) -> None:
        started = time.monotonic()
        try:
            response, doc, _problem, _ms = self._command("close")
            if response.status != 200 or not isinstance(doc, dict) or doc.get("accepted") is not True:
                self.report(WARN, f"close was not accepted (HTTP {response.status}: {show_value(doc)})",
                            "A close command that shuts the game down through its normal teardown lets "
                            "an agent end an instance without killing a process.")
                return
        except TransportError:
            pass  # a game that drops the connection while closing is closing
        deadline = started + self.grace_s
        while not self._port_quiet():
            if time.monotonic() >= deadline:
                self.report(FAIL, f"close was accepted but port {self.port} still answers after "
                                  f"{self.grace_s * 1000:.0f} ms",
                            "close should run the game's teardown and stop serving.")
                return
            time.sleep(0.02)
        quiet_ms = (time.monotonic() - started) * 1000
        pid = self.target.pid or (self.entry.pid if self.entry is not None else None)
        exited = _wait_exit(pid, max(0.5, deadline - time.monotonic())) if pid else None
        detail = "" if exited is None else ("The process exited." if exited else
                                            f"But process {pid} is still running.")
        self.report(PASS if exited is not False else WARN,
                    f"close shuts the game down (port quiet after {quiet_ms:.0f} ms)", detail)
        if self.entry is not None:
            entry_deadline = time.monotonic() + 1.0
            while self.entry.path.exists() and time.monotonic() < entry_deadline:
                time.sleep(0.02)
            if self.entry.path.exists():
                self.report(FAIL, f"registry entry {self.entry.path.name} is left behind after a clean close",
                            "Delete it on clean shutdown.")
            else:
                self.report(PASS, f"registry entry {self.entry.path.name} removed on close")


# --------------------------------------------------------------------------- machine facts

def _listener_pid(port: int) -> int | None:
    """The pid listening on 127.0.0.1:port, when psutil can tell."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        return None
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return int(conn.pid)
    except (psutil.Error, OSError):
        return None
    return None


def _process_cwd(pid: int) -> Path | None:
    try:
        import psutil

        return Path(psutil.Process(pid).cwd())
    except Exception:
        return None


def _same_path(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):
        return str(a) == str(b)


def _wait_exit(pid: int, timeout_s: float) -> bool | None:
    """True when ``pid`` is gone (or a zombie) within the timeout, False if it is still
    running, None if that cannot be told. Never reaps: the process may be the
    launcher's child, which it reaps itself."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        return None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            return None
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def listening_addresses(port: int) -> list[str] | None:
    """The local addresses of the TCP sockets listening on ``port`` (None when psutil
    cannot tell)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        return None
    try:
        found = {str(conn.laddr.ip).split("%")[0] for conn in psutil.net_connections(kind="tcp")
                 if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port}
    except (psutil.Error, OSError):
        return None
    return sorted(found)


def _is_loopback(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def _is_unspecified(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).is_unspecified
    except ValueError:
        return False


__all__ = ["HostChecks", "listening_addresses"]
