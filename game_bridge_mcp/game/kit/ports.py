"""The debug port a game was started with (``--debug-port N`` or ``GAME_BRIDGE_DEBUG_PORT``),
the one switch that turns its debug surface on. Pure."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from ...contract import ENV_DEBUG_PORT

#: Default environment variable read by :func:`debug_port_from_argv`.
DEBUG_PORT_ENV = ENV_DEBUG_PORT


def debug_port_from_argv(argv: Sequence[str] | None = None, *, flag: str = "--debug-port",
                         env_var: str | None = DEBUG_PORT_ENV,
                         environ: Mapping[str, str] | None = None,
                         default: int | None = None) -> int | None:
    """The debug port from ``flag N`` / ``flag=N`` in ``argv`` (default ``sys.argv``),
    else from ``env_var``, else ``default`` (None: keep the debug surface off).

    ``0`` means "any free port" (the bound port is :attr:`GameBridge.port`). Raises
    ValueError naming the flag when the value is not a port number.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    text: str | None = None
    source = flag
    for index, arg in enumerate(args):
        if arg == flag:
            if index + 1 >= len(args):
                raise ValueError(f"{flag} needs a port number after it")
            text = args[index + 1]
        elif arg.startswith(flag + "="):
            text = arg[len(flag) + 1:]
    if text is None and env_var:
        env = os.environ if environ is None else environ
        if env.get(env_var, "").strip():
            text, source = env[env_var], env_var
    if text is None:
        return default
    value = text.strip()
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise ValueError(f"{source} expects a port number 0-65535, got {text!r}")
    return int(value)
