"""The project's launch declaration, ``gamebridge.json``: found (walking up, never past the
repository root or the home directory), trusted (:mod:`.trust`) and validated into a frozen
:class:`LaunchDeclaration`; every problem is a :class:`BridgeUsageError` naming the file and
the field. Pure parsing: it never starts anything."""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from collections.abc import Mapping
from typing import Any

from ..config import Config
from ..errors import BridgeError, BridgeUsageError
from ..jsonio import FileProblem, load_json_file
from .trust import check_trusted

#: The file name searched for.
DECLARATION_FILE = "gamebridge.json"
#: Ports the launcher may claim when the declaration names none: clear of 7777 and
#: 7800-7810, which people hand out by hand.
DEFAULT_PORT_RANGE: tuple[int, int] = (7820, 7839)
#: How long a launch waits for ``/health`` when the declaration does not say.
DEFAULT_READY_TIMEOUT_MS = 180_000
#: Upper bound on readyTimeoutMs (a day): a larger number is a typo, not a build.
MAX_READY_TIMEOUT_MS = 86_400_000
#: A declaration is a few hundred bytes; refuse to read a megabyte of anything.
MAX_DECLARATION_BYTES = 1024 * 1024

PORT_PLACEHOLDER = "{port}"
#: Stands for the Python interpreter running the bridge (``sys.executable``), so a
#: declaration for a Python game names no path of this machine and can be committed.
PYTHON_PLACEHOLDER = "{python}"


def bridge_python() -> str:
    """The interpreter ``{python}`` stands for: the one running the bridge."""
    if not sys.executable:
        raise BridgeUsageError(
            "The launch declaration uses {python}, the Python running the bridge, but this Python "
            "does not know its own executable (sys.executable is empty, as in some embedded "
            "interpreters). Name the interpreter in launch.argv instead, e.g. \"python3\".")
    return sys.executable


def _python_in(text: str, *, quoted: bool = False) -> str:
    """``text`` with ``{python}`` replaced by the bridge's interpreter (shell-quoted when
    ``quoted``, for a shell command line); unchanged when it has no ``{python}``."""
    if PYTHON_PLACEHOLDER not in text:
        return text
    python = bridge_python()
    return text.replace(PYTHON_PLACEHOLDER, shlex.quote(python) if quoted else python)

EXAMPLE = """{
  "name": "My Game",
  "launch": {
    "command": "./run-game --debug-port {port}",
    "cwd": ".",
    "portRange": "7820-7839",
    "readyTimeoutMs": 180000
  }
}"""


@dataclass(frozen=True)
class LaunchDeclaration:
    """A validated ``gamebridge.json``. ``cwd`` is absolute (resolved against the file's
    directory); exactly one of ``command`` (a shell line) and ``argv`` (no shell) is set."""

    path: Path
    name: str | None
    command: str | None
    argv: tuple[str, ...] | None
    cwd: Path
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE
    ready_timeout_ms: int = DEFAULT_READY_TIMEOUT_MS
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    extra_args: tuple[str, ...] = ()
    #: ``launch.spare``: a launched process whose command line contains one of these is
    #: never signalled when the instance is stopped (a Gradle daemon an IDE shares).
    spare: tuple[str, ...] = ()

    def render(self, port: int) -> tuple[list[str] | str, bool]:
        """``(command, use_shell)`` for ``port``: the shell line with ``{port}`` and
        ``{python}`` substituted and ``extraArgs`` appended shell-quoted, or the argv list
        (no shell)."""
        sub = str(int(port))
        extras = [_python_in(arg).replace(PORT_PLACEHOLDER, sub) for arg in self.extra_args]
        if self.command is not None:
            line = _python_in(self.command, quoted=True).replace(PORT_PLACEHOLDER, sub)
            if extras:
                line += " " + " ".join(shlex.quote(arg) for arg in extras)
            return line, True
        assert self.argv is not None
        return [_python_in(arg).replace(PORT_PLACEHOLDER, sub) for arg in self.argv] + extras, False

    def render_env(self, port: int) -> dict[str, str]:
        """The declared extra environment, with ``{port}`` and ``{python}`` substituted in values."""
        sub = str(int(port))
        return {key: _python_in(value).replace(PORT_PLACEHOLDER, sub) for key, value in self.env.items()}

    def display(self, port: int) -> str:
        """The command for ``port`` as one line a human could paste into a shell."""
        command, use_shell = self.render(port)
        return command if isinstance(command, str) else shlex.join(command)

    def hint(self) -> str:
        """The command line as a human would type it, ``{port}`` left in and ``{python}``
        filled in (for GameOffline)."""
        marker = "GAMEBRIDGEPORTPLACEHOLDER"
        if self.command is not None:
            line = _python_in(self.command, quoted=True)
            if self.extra_args:
                line += " " + " ".join(shlex.quote(_python_in(a).replace(PORT_PLACEHOLDER, marker))
                                       for a in self.extra_args)
            line = line.replace(marker, PORT_PLACEHOLDER)
        else:
            assert self.argv is not None
            args = [_python_in(a).replace(PORT_PLACEHOLDER, marker) for a in (*self.argv, *self.extra_args)]
            line = shlex.join(args).replace(marker, PORT_PLACEHOLDER)
        if self.cwd != self.path.parent:
            line = f"cd {shlex.quote(str(self.cwd))} && {line}"
        return line


#: A directory holding one of these is a repository root: the walk-up stops there.
REPOSITORY_MARKERS = (".git", ".hg")


def _is_repository_root(directory: Path) -> bool:
    for name in REPOSITORY_MARKERS:
        try:
            if os.path.lexists(directory / name):
                return True
        except OSError:
            continue
    return False


def find_declaration(start: Path, *, home: str | Path | None = None) -> Path | None:
    """The nearest ``gamebridge.json`` in ``start`` or a directory above it, or None.

    The walk stops at the repository root (a directory holding ``.git`` or ``.hg``) and
    at the home directory (``home``, default the user's): a file above either is not the
    project's own, and is never read."""
    try:
        here = Path(start).expanduser().resolve()
    except (OSError, RuntimeError):
        return None
    if here.is_file():
        here = here.parent
    try:
        top = Path(home).expanduser().resolve() if home else Path.home().resolve()
    except (OSError, RuntimeError):
        top = None
    for directory in (here, *here.parents):
        candidate = directory / DECLARATION_FILE
        try:
            if candidate.is_file():
                return candidate
        except OSError:  # an unreadable directory on the way up is not an answer
            pass
        if directory == top or _is_repository_root(directory):
            return None
    return None


def _fail(path: Path, field_name: str | None, problem: str) -> BridgeUsageError:
    where = f"field '{field_name}' " if field_name else ""
    return BridgeUsageError(
        f"Launch declaration {path}: {where}{problem}.\nA minimal gamebridge.json:\n{EXAMPLE}",
        file=str(path), field=field_name)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {json.dumps(value[:60])}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _read_document(path: Path) -> Any:
    try:
        return load_json_file(path, MAX_DECLARATION_BYTES)
    except FileProblem as exc:
        if exc.kind == "missing":
            raise _fail(path, None, "the file does not exist (check --config / GAME_BRIDGE_CONFIG)") from None
        if exc.kind == "too-large":
            raise _fail(path, None, f"is larger than {MAX_DECLARATION_BYTES} bytes; that is not a launch declaration") from None
        raise _fail(path, None, str(exc)) from None


def _parse_port(path: Path, field_name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise _fail(path, field_name, f"must name ports between 1 and 65535, not {_kind(value)}")
    return value


def _parse_port_range(path: Path, value: Any) -> tuple[int, int]:
    name = "launch.portRange"
    if isinstance(value, str):
        low_text, dash, high_text = value.strip().partition("-")
        low = _parse_port(path, name, low_text.strip())
        high = _parse_port(path, name, high_text.strip()) if dash else low
    elif isinstance(value, list) and len(value) == 2:
        low = _parse_port(path, name, value[0])
        high = _parse_port(path, name, value[1])
    elif isinstance(value, int) and not isinstance(value, bool):
        low = high = _parse_port(path, name, value)
    else:
        raise _fail(path, name, f'must be a range like "7820-7839" or [7820, 7839], not {_kind(value)}')
    if high < low:
        raise _fail(path, name, f"runs backwards ({low} to {high})")
    return low, high


def _string_list(path: Path, field_name: str, value: Any, *, non_empty: bool) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(path, field_name, f"must be an array of strings, not {_kind(value)}")
    if non_empty and not value:
        raise _fail(path, field_name, "must not be empty: it names the program to run")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _fail(path, f"{field_name}[{index}]", f"must be a string, not {_kind(item)}")
        if "\x00" in item:
            raise _fail(path, f"{field_name}[{index}]", "contains a NUL character")
    if non_empty and not value[0].strip():
        raise _fail(path, f"{field_name}[0]", "is empty: it names the program to run")
    return tuple(value)


def parse_declaration(path: Path, document: Any) -> LaunchDeclaration:
    """Validate a decoded ``gamebridge.json`` (pure; ``path`` locates ``cwd`` and errors)."""
    path = Path(path)
    if not isinstance(document, dict):
        raise _fail(path, None, f"must hold a JSON object, not {_kind(document)}")
    name = document.get("name")
    if name is not None and not isinstance(name, str):
        raise _fail(path, "name", f"must be a string, not {_kind(name)}")
    if "launch" not in document:
        raise _fail(path, "launch", "is missing: it says how to start the game")
    launch = document["launch"]
    if not isinstance(launch, dict):
        raise _fail(path, "launch", f"must be an object, not {_kind(launch)}")

    command = launch.get("command")
    argv_value = launch.get("argv")
    if command is not None and argv_value is not None:
        raise _fail(path, "launch.command", "and 'launch.argv' are both set; use one of them "
                    "(command for a shell line, argv for a program and its arguments)")
    if command is None and argv_value is None:
        raise _fail(path, "launch.command", "is missing (or give 'launch.argv'): the bridge needs to "
                    "know how to start the game, with {port} where the debug port goes")
    argv: tuple[str, ...] | None = None
    if command is not None:
        if not isinstance(command, str):
            raise _fail(path, "launch.command", f"must be a string (a shell command line), not {_kind(command)}")
        if not command.strip():
            raise _fail(path, "launch.command", "is empty")
        if "\x00" in command:
            raise _fail(path, "launch.command", "contains a NUL character")
    else:
        argv = _string_list(path, "launch.argv", argv_value, non_empty=True)

    cwd_value = launch.get("cwd", ".")
    if not isinstance(cwd_value, str) or not cwd_value.strip() or "\x00" in cwd_value:
        raise _fail(path, "launch.cwd", f"must be a directory path (relative to this file), not {_kind(cwd_value)}")
    base = path.parent if path.parent != Path("") else Path(".")
    cwd = Path(os.path.normpath(Path(base, os.path.expanduser(cwd_value)).absolute()))

    port_range = (DEFAULT_PORT_RANGE if launch.get("portRange") is None
                  else _parse_port_range(path, launch["portRange"]))

    timeout = launch.get("readyTimeoutMs", DEFAULT_READY_TIMEOUT_MS)
    if isinstance(timeout, float) and timeout.is_integer():
        timeout = int(timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= MAX_READY_TIMEOUT_MS:
        raise _fail(path, "launch.readyTimeoutMs",
                    f"must be a whole number of milliseconds between 1 and {MAX_READY_TIMEOUT_MS}, not {_kind(timeout)}")

    env_value = launch.get("env", {})
    if env_value is None:
        env_value = {}
    if not isinstance(env_value, dict):
        raise _fail(path, "launch.env", f"must be an object of string values, not {_kind(env_value)}")
    env: dict[str, str] = {}
    for key, value in env_value.items():
        if not key or "=" in key or "\x00" in key:
            raise _fail(path, f"launch.env.{key}", "is not a valid environment variable name")
        if not isinstance(value, str):
            raise _fail(path, f"launch.env.{key}", f"must be a string, not {_kind(value)} (quote it)")
        if "\x00" in value:
            raise _fail(path, f"launch.env.{key}", "contains a NUL character")
        env[key] = value

    extra_value = launch.get("extraArgs", [])
    extra = () if extra_value is None else _string_list(path, "launch.extraArgs", extra_value, non_empty=False)

    spare_value = launch.get("spare", [])
    spare = () if spare_value is None else _string_list(path, "launch.spare", spare_value, non_empty=False)
    for index, pattern in enumerate(spare):
        if len(pattern.strip()) < 3:
            raise _fail(path, f"launch.spare[{index}]", "must name a process by a distinctive part of its "
                        "command line (3 characters or more), e.g. \"GradleDaemon\"")

    return LaunchDeclaration(path=path, name=name, command=command, argv=argv, cwd=cwd,
                             port_range=port_range, ready_timeout_ms=timeout,
                             env=MappingProxyType(env), extra_args=extra, spare=spare)


def load_declaration(path: Path) -> LaunchDeclaration:
    """Read and validate a ``gamebridge.json``; BridgeUsageError names the file and field,
    or (:func:`.trust.check_trusted`) why a file another user could have written is refused."""
    path = Path(path).expanduser()
    try:
        path = path.absolute()
    except OSError:  # a vanished working directory; keep the path as given
        pass
    check_trusted(path)
    return parse_declaration(path, _read_document(path))


def apply_project_config(config: Config, *, cwd: Path | None = None, defer: bool = False) -> Config:
    """Find and read the project's ``gamebridge.json`` into ``config.declaration``.

    ``--config`` / ``GAME_BRIDGE_CONFIG`` names the file (an error if it is wrong);
    otherwise the nearest ``gamebridge.json`` walking up from ``cwd`` (to the repository
    root or the home directory, no further). Either way a file another user could have
    written is refused (:mod:`.trust`): never run, never a launch hint. No file is not an
    error: ``launch_instance`` explains what to write when it is called. With ``defer``, a
    broken file that was found by walking up is kept in ``config.declaration_error`` (to be
    reported when something is launched) instead of raised.
    """
    if config.config_file is not None:
        return _use(config, load_declaration(config.config_file))
    found = find_declaration(cwd or Path.cwd(), home=config.environ.get("HOME") or None)
    if found is None:
        return config
    try:
        return _use(config, load_declaration(found))
    except BridgeError as exc:
        if not defer:
            raise
        config.declaration_error = exc
        return config


def _use(config: Config, declaration: LaunchDeclaration) -> Config:
    config.declaration = declaration
    config.declaration_error = None
    try:
        config.declaration_hint = declaration.hint()
    except Exception:  # a declaration that cannot render a hint is not worth a crash
        config.declaration_hint = None
    return config


def required_declaration(config: Config) -> LaunchDeclaration:
    """The Config's launch declaration, or the BridgeUsageError saying what to write."""
    decl = declaration_of(config)
    if decl is None:
        raise BridgeUsageError(
            "launch_instance needs a launch declaration, and none was found: put a "
            "gamebridge.json in your project root (the bridge looks in its working "
            "directory and the directories above it, up to the repository root or your "
            "home directory), or point --config / "
            "GAME_BRIDGE_CONFIG at one. It says how to start the game, with {port} where "
            "the debug port goes:\n" + EXAMPLE + "\nUse \"argv\": [\"./run-game\", "
            "\"--port\", \"{port}\"] instead of \"command\" to run without a shell.")
    return decl


def declaration_of(config: Config) -> LaunchDeclaration | None:
    """The Config's launch declaration, if it has one."""
    decl = config.declaration
    return decl if isinstance(decl, LaunchDeclaration) else None


__all__ = ["DECLARATION_FILE", "DEFAULT_PORT_RANGE", "DEFAULT_READY_TIMEOUT_MS", "EXAMPLE", "PYTHON_PLACEHOLDER",
           "LaunchDeclaration", "apply_project_config", "bridge_python", "declaration_of", "find_declaration",
           "load_declaration", "parse_declaration", "required_declaration"]
