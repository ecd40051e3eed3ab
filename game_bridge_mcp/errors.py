"""The errors the bridge reports, each carrying its fields and a message written for its
reader: what happened, what did not, the next thing to try. The first word of its rendering
is its name, which exit codes and agents key on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class BridgeError(Exception):
    """Base of every error the bridge reports to a caller."""

    #: The CLI's exit code for this error type (documented in docs/cli.md).
    exit_code: int = 1

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields: dict[str, Any] = fields

    @property
    def name(self) -> str:
        return type(self).__name__

    def render(self) -> str:
        """``Name: message``: the text an agent sees."""
        return f"{self.name}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.name, "message": self.message, **self.fields}


class BridgeUsageError(BridgeError):
    """The caller asked for something that cannot be done as asked (bad arguments,
    a missing or wrong launch declaration, a boot failure)."""

    exit_code = 2


#: What comes before a launch hint in GameOffline's message (the bridge says more before it
#: when the hint is a launch declaration's: core/ports.with_launch_advice).
START_ONE_WITH = "\nStart one with:\n  "


class GameOffline(BridgeError):
    """Nothing (or nothing responsive) is answering on the port.

    ``cause`` says why, for code that must tell the cases apart (never its message):
    ``refused`` (nothing listens), ``timeout`` (something accepted the connection and did
    not answer in time: frozen, stopped in a debugger, or busy) or ``reset`` (the
    connection broke mid-request: crashed or restarting). ``endpoint`` is the request that
    failed; ``detail`` the low-level reason, when there is one."""

    exit_code = 3
    CAUSES = ("refused", "timeout", "reset")

    def __init__(self, port: int, message: str | None = None, *, cause: str = "refused",
                 endpoint: str = "/health", detail: str | None = None, timeout_ms: float | None = None,
                 launch_hint: str | None = None) -> None:
        if cause not in self.CAUSES:
            raise ValueError(f"GameOffline cause must be one of {self.CAUSES}, not {cause!r}")
        url = f"http://127.0.0.1:{port}"
        if message is not None:
            text = message
        elif cause == "timeout":
            text = (f"Port {port} accepted the connection but GET {endpoint} did not complete "
                    f"within {timeout_ms or 0:.0f}ms: the game is frozen, stopped in a debugger, or "
                    "too busy to answer. Try again, or raise --timeout.")
        elif cause == "reset":
            text = (f"The connection to port {port} broke during GET {endpoint} ({detail}): "
                    "the game may have crashed or be restarting.")
        else:
            text = f"No game is answering on {url}."
            if detail:
                text = f"{text} ({detail})"
        if cause != "timeout":  # a frozen game needs no second copy started
            if launch_hint:
                text += START_ONE_WITH + launch_hint.replace("{port}", str(port))
            else:
                text += ("\nStart one with launch_instance (needs a gamebridge.json), or find a "
                         "running one with list_instances.")
        super().__init__(text, port=port, cause=cause)
        self.port = port
        self.cause = cause
        self.endpoint = endpoint
        self.detail = detail


class NotAGameSurface(BridgeError):
    """Something answers on the port, but not as a game speaking the contract."""

    exit_code = 4

    def __init__(self, port: int, detail: str, *, path: str = "/health") -> None:
        url = f"http://127.0.0.1:{port}"
        if path == "/health":
            text = (f"Something is listening on {url}, but it is not a debuggable game: "
                    f"{detail}.\nA drivable game must answer GET /health with "
                    '{"ok":true,"frame":N}. Check whether another process has taken this port.')
        else:
            text = (f"The game on {url} broke the contract: GET {path} {detail}.\n"
                    "The bridge ignored that answer and keeps serving; check the game's "
                    "debug endpoint (or whether another process has taken this port).")
        super().__init__(text, port=port, path=path, detail=detail)
        self.port = port
        self.detail = detail


class CommandTimeout(BridgeError):
    """A command was accepted but not confirmed as applied within its deadline."""

    exit_code = 5

    def __init__(self, port: int, command: str, timeout_ms: int, *,
                 message: str | None = None, **fields: Any) -> None:
        text = message or (
            f"Command '{command}' was queued on port {port} but was not applied within "
            f"{timeout_ms}ms. The game accepted it, so it is probably blocked, frozen, or "
            "on a screen that ignores this command.")
        super().__init__(text, port=port, command=command, timeoutMs=timeout_ms, **fields)
        self.port = port


class CommandRejected(BridgeUsageError):
    """The game refused a command at ``/command`` (``accepted: false`` or an HTTP error):
    an unknown name or arguments it will not take. Rendered as the BridgeUsageError it is
    to the agent; its own type lets the Bridge tell it from other usage errors. ``answer``
    is the game's answer (it may list the commands it accepts)."""

    def __init__(self, port: int, command: str, reason: str, answer: Any) -> None:
        super().__init__(f"The game on port {port} rejected command '{command}': {reason}.",
                         port=port, command=command, rejected=True, answer=answer)
        self.port = port
        self.command = command
        self.answer = answer

    @property
    def name(self) -> str:
        return "BridgeUsageError"


class ScreenshotUnavailable(BridgeUsageError):
    """The game serves screenshots but said it cannot render now (``503`` with its
    reason: headless, minimised). Rendered as the BridgeUsageError it is to the agent;
    its own type lets code tell it apart. ``reason`` is the game's text."""

    def __init__(self, port: int, reason: str) -> None:
        super().__init__(f"The game on port {port} cannot show its screen right now: {reason}. Its state is still "
                         "readable: get_state {summary: true} (ui.text, if the game draws one, is a text picture).",
                         port=port, reason=reason)
        self.port = port
        self.reason = reason


class GamePaused(BridgeUsageError):
    """A wait on a game whose clock is paused (``/state.paused``): nothing would move.
    Rendered as BridgeUsageError; its own type lets callers tell it apart."""

    @property
    def name(self) -> str:
        return "BridgeUsageError"


class CommandFailed(BridgeError):
    """The game applied a command and reported that it failed: its ``commandResults``
    entry (docs/contract.md, ``results``) says ``ok: false``. ``reason`` is the game's text,
    already sanitised and capped by the caller; ``after`` the state digest after the
    command, which the rendering carries too (an agent reads the text)."""

    exit_code = 6

    def __init__(self, port: int, tool: str, reason: str, *, command: str | None = None,
                 command_id: int | None = None, after: Mapping[str, Any] | None = None) -> None:
        reason = reason.strip() or "it gave no reason"
        end = "" if reason.endswith((".", "!", "?")) else "."
        fields: dict[str, Any] = {"port": port, "tool": tool}
        if command is not None and command != tool:
            fields["command"] = command
        if command_id is not None:
            fields["commandId"] = command_id
        fields["reason"] = reason
        if after is not None:
            fields["after"] = dict(after)
        super().__init__(f"'{tool}' was applied on port {port}, but the game refused it: {reason}{end}", **fields)
        self.port = port
        self.reason = reason
        self.after = dict(after) if after is not None else None

    def render(self) -> str:
        text = super().render()
        if self.after:
            text += "\nState after it: " + json.dumps(self.after, ensure_ascii=False, separators=(",", ":"), default=str)
        return text


class ClockBroken(NotAGameSurface):
    """A game advertises ``clock`` but its clock does not do what docs/contract.md says
    (``simFrame`` runs on while paused, ``step`` completes early or short). Rendered as
    NotAGameSurface (it broke the contract); ``detail`` says how."""

    def __init__(self, port: int, detail: str, *, frames_advanced: int = 0) -> None:
        BridgeError.__init__(
            self, f"The game on port {port} advertises clock but broke it: {detail}. advance stopped "
            f"after {frames_advanced} frames, since it cannot stop at an exact frame on this game. "
            f"`game-bridge-mcp check --port {port}` tests the clock; fix the game's pause and step.",
            port=port, detail=detail, framesAdvanced=frames_advanced)
        self.port = port
        self.detail = detail

    @property
    def name(self) -> str:
        return "NotAGameSurface"


#: Every error type, in the order the CLI documents them.
ERROR_TYPES: tuple[type[BridgeError], ...] = (
    BridgeUsageError, GameOffline, NotAGameSurface, CommandTimeout, CommandFailed)


def exit_codes_text() -> str:
    """The exit codes on one line, from the error types (help texts print this)."""
    codes = ", ".join(f"{e.exit_code} {e.__name__}" for e in sorted(ERROR_TYPES, key=lambda e: e.exit_code))
    return f"0 ok, 1 internal error, {codes}"
