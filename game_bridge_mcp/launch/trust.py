"""Whether a launch declaration, and what its command runs, may be believed: it is code the
bridge runs, so it must be yours or root's and unchangeable by anyone else (docs/reliability.md,
"Who may change what the bridge runs and keeps"). The rule itself is :mod:`..ownership`'s,
shared with the home folder (:mod:`..paths`).

What the command runs (:func:`check_command`): the program it names and, when that is an
interpreter, the script it hands it, each held to the declaration's own rule; a bare name
also through the ``PATH`` folders searched for it. A shell line is read as far as it can be
without running a shell: each simple command's program (past assignments, redirections,
``exec``, ``env``, ``nohup`` and the like, with ``cd`` followed), and a script given to
``.``/``source`` or to an interpreter. A word the shell would build at run time
(``$GAME/run.sh``, a glob) cannot be known here and is not checked."""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..errors import BridgeUsageError
from ..ownership import describe_user, login, others_can_write, path_problem, way_problems
from ..ownership import my_uid as _my_uid


def my_uid() -> int | None:
    """This process's user id (None where there are no user ids)."""
    return _my_uid()


def _refuse(path: Path, problem: str, fix: str) -> BridgeUsageError:
    return BridgeUsageError(
        f"Launch declaration {path} is not used: {problem}. A declaration is a command the "
        f"bridge runs as you, so it must be yours and out of other users' reach. Fix: {fix}",
        file=str(path), refused=True)


def check_trusted(path: Path, *, uid: int | None = None) -> None:
    """Raise BridgeUsageError naming the file, its owner and the fix unless ``path`` is a
    declaration only you (or root) could have written. ``uid`` defaults to yours."""
    uid = my_uid() if uid is None else uid
    if uid is None:  # pragma: no cover - Windows: no owners to compare
        return
    try:
        info = os.stat(path)
    except OSError:
        return  # reading it reports what is wrong
    if info.st_uid not in (uid, 0):
        raise _refuse(path, f"it is owned by {describe_user(info.st_uid)}, not by you ({describe_user(uid)}) or root",
                      f"if it is yours, take it back (chown {login(uid)} {path}); if not, "
                      "delete it, or name your own with --config")
    if others_can_write(info, uid):
        raise _refuse(path, f"other users may write to it (mode {stat.filemode(info.st_mode)})",
                      f"chmod go-w {path}")
    problem = next(way_problems(path, uid), None)
    if problem is not None:
        raise _refuse(path, problem[0], f"{problem[1]}, or name your own with --config")


# --------------------------------------------------------------------------- what its command runs

#: Programs whose first argument that is not an option is a script they run.
INTERPRETER = re.compile(
    r"^(?:python[0-9.]*|pythonw|pypy[0-9.]*|sh|bash|dash|zsh|ksh|mksh|ash|fish|node|nodejs|deno|bun|ruby|"
    r"perl|php|lua[0-9.]*|luajit|Rscript|tclsh[0-9.]*)$")
#: Options of those that take the next word as their value (so it is not the script).
_VALUE_OPTIONS = {"-W", "-X", "-r", "--require", "-I", "-e", "-o", "-O"}
#: Options after which no script file follows (the code is inline or a module).
_NO_SCRIPT = {"-c", "-m", "-e", "--eval", "-p", "--print", "-"}
#: Programs that run the command that follows them (their own options skipped).
_WRAPPERS = {"nohup", "env", "setsid", "nice", "stdbuf", "xvfb-run"}
#: Shell builtins that run the command that follows them.
_SHELL_WRAPPERS = {"exec", "command"}
#: Shell words after which a command starts.
_STARTERS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time"}
#: Shell builtins and keywords that run no file.
_BUILTINS = {"cd", "echo", "printf", "true", "false", ":", "export", "set", "unset", "test", "[", "read", "exit",
             "return", "trap", "ulimit", "umask", "wait", "shift", "eval", "alias", "type", "local", "readonly",
             "fi", "done", "esac", "}", "for", "case", "in", "break", "continue", "pwd", "kill", "jobs"}
_SOURCE = {".", "source"}
_OPERATOR_CHARS = set(";&|()<>\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _unknowable(word: str) -> bool:
    """A word the shell builds at run time: not checked."""
    return any(c in word for c in "$`*?[") or word == ""


def _words(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell reports it when it runs
        return None


def _simple_commands(line: str) -> Iterator[list[str]]:
    """The words of each simple command of a shell line (redirections dropped)."""
    words = _words(line)
    if words is None:
        return
    current: list[str] = []
    skip_next = False
    comment = False
    for word in words:
        if comment:
            comment = word != "\n"
            continue
        if skip_next:
            skip_next = False
            continue
        if word and set(word) <= _OPERATOR_CHARS:
            if set(word) <= set("<>&") and "&" != word and "&&" != word:
                skip_next = True  # a redirection's target
                if current and current[-1].isdigit():
                    current.pop()  # 2>...: the number belongs to the redirection
                continue
            if current:
                yield current
            current = []
            continue
        if word.startswith("#") and not current:
            comment = True
            continue
        current.append(word)
    if current:
        yield current


def _program_and_args(words: list[str]) -> tuple[str, list[str]] | None:
    """The program a simple command runs and its arguments, past assignments, keywords
    that start a command and wrappers that run the rest; None when it runs none."""
    index = 0
    while index < len(words):
        word = words[index]
        if _ASSIGNMENT.match(word) or word in _STARTERS:
            index += 1
            continue
        return word, words[index + 1:]
    return None


def _wrapped(args: list[str]) -> list[str]:
    """What a wrapper (``env -i X=1 game``, ``nice -n 5 game``) runs: its arguments past its
    own options and assignments."""
    index = 0
    while index < len(args):
        word = args[index]
        if word in ("-u", "-n", "-C", "-S", "--unset", "--chdir", "-i", "-o", "-e"):
            index += 1 if word in ("-i",) else 2
            continue
        if word.startswith("-") or _ASSIGNMENT.match(word):
            index += 1
            continue
        break
    return args[index:]


def _script(args: list[str]) -> str | None:
    """The script an interpreter is handed: its first argument that is not an option."""
    index = 0
    while index < len(args):
        word = args[index]
        if word in _NO_SCRIPT:
            return None
        if word == "--":
            return args[index + 1] if index + 1 < len(args) else None
        if word in _VALUE_OPTIONS:
            index += 2
            continue
        if word.startswith("-"):
            index += 1
            continue
        return word
    return None


class _Resolver:
    """Turns a command's words into the files they name, as the launched process would."""

    def __init__(self, cwd: Path, env: Mapping[str, str]) -> None:
        self.cwd = cwd
        self.env = env

    def file(self, word: str) -> Path | None:
        """A path word (``./run.sh``, ``~/bin/x``, ``/opt/game``) as a path from the cwd."""
        if _unknowable(word):
            return None
        if word == "~" or word.startswith("~/"):
            home = self.env.get("HOME") or os.path.expanduser("~")
            word = home + word[1:]
        return Path(os.path.normpath(self.cwd / word))

    def program(self, word: str) -> tuple[Path | None, list[Path]]:
        """Where ``word`` runs from, and the ``PATH`` folders searched for it on the way
        (each could take a planted file of that name)."""
        if "/" in word or word.startswith("~"):
            return self.file(word), []
        if _unknowable(word):
            return None, []
        searched: list[Path] = []
        for entry in self.env.get("PATH", os.defpath).split(os.pathsep):
            folder = self.cwd / (entry or ".")
            searched.append(folder)
            candidate = folder / word
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate, searched
        return None, searched


def _targets(rendered: list[str] | str, use_shell: bool, cwd: Path,
             env: Mapping[str, str]) -> Iterator[tuple[str, Path]]:
    """``(what it is, path)`` for every file the command runs that can be known beforehand."""
    resolver = _Resolver(cwd, env)
    commands = list(_simple_commands(rendered)) if isinstance(rendered, str) else [list(rendered)]
    for words in commands:
        found = _program_and_args(words)
        while found is not None:
            program, args = found
            if use_shell and program in _SHELL_WRAPPERS:
                rest = _wrapped(args)
                found = (rest[0], rest[1:]) if rest else None
                continue
            if use_shell and program == "cd":
                target = resolver.file(args[0]) if args else None
                if target is not None:
                    resolver.cwd = target
                break
            if use_shell and program in _SOURCE:
                sourced = resolver.file(args[0]) if args else None
                if sourced is not None:
                    yield "the script its command sources", sourced
                break
            if use_shell and program in _BUILTINS:
                break
            path, searched = resolver.program(program)
            for folder in searched:
                yield f"the folder on PATH searched for {program!r}", folder
            if path is None:
                break  # not found: starting it reports that
            yield "the program its command runs", path
            if path.name in _WRAPPERS:
                rest = _wrapped(args)
                found = (rest[0], rest[1:]) if rest else None
                continue
            if INTERPRETER.match(path.name):
                handed = _script(args)
                given = resolver.file(handed) if handed is not None else None
                if given is not None and given.is_file():
                    yield f"the script {path.name} runs", given
            break


def check_command(declaration: Path, rendered: list[str] | str, use_shell: bool, cwd: Path,
                  env: Mapping[str, str]) -> None:
    """Raise BridgeUsageError naming the declaration, the file, why and the fix unless every
    file its command (``rendered``, a shell line or an argv, run in ``cwd``) runs, as far as
    can be known beforehand, is out of other users' reach. ``env`` is the launched process's
    environment (its ``PATH`` and ``HOME``)."""
    field = "launch.command" if use_shell else "launch.argv"
    seen: set[Path] = set()
    for what, path in _targets(rendered, use_shell, cwd, env):
        if path in seen:
            continue
        seen.add(path)
        problem = path_problem(path)
        if problem is not None:
            raise BridgeUsageError(
                f"Launch declaration {declaration}: {what}, {path}, is refused: {problem[0]}. Whatever a "
                "declaration runs runs as you, so it must be yours and out of other users' reach, like the "
                f"declaration itself. Fix: {problem[1]}. Nothing was started.",
                file=str(declaration), field=field, path=str(path), refused=True)


__all__ = ["check_command", "check_trusted", "my_uid"]
