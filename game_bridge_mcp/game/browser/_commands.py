"""A page's own commands (``window.gameBridge.commands``) as the kit's commands.

A web game may offer the agent commands of its own without depending on the wrapper::

    window.gameBridge = { commands: {
      restart: { description: "Start a new round.", run: () => restart() },
      jump: { description: "Jump to a level.", args: { level: { type: "integer", minimum: 1 } },
              run: ({ level }) => goTo(level) },
      hint: () => bestMove(),                       // a bare function: no arguments
    } };

Those the page defines once it has loaded are published in ``/tools`` (toolset ``page``)
with their arguments (``type`` integer, number, boolean or string; ``description``;
``default``, which makes one optional; ``enum``, ``minimum``, ``maximum``; a plain string
is a string argument's description). Each runs in the page between frames, outside the
kit's lock, and its return value (JSON) is the command's result; a command that returns a
promise completes at once, saying so, and goes on with the page's clock.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Annotated, Any, Callable

from ..kit.args import Arg
from ..kit.outcomes import Pending
from . import _scripts

log = logging.getLogger(__name__)

TOOLSET = "page"
TYPES: dict[str, type] = {"integer": int, "number": float, "boolean": bool, "string": str}
#: Commands taken from one page, at most.
MAX_COMMANDS = 64


def _parameters(args: Mapping[str, Any]) -> list[inspect.Parameter]:
    params = []
    for name, spec in list(args.items())[:32]:
        if isinstance(spec, str):
            spec = {"type": "string", "description": spec}
        if not isinstance(spec, Mapping):
            raise ValueError(f"argument {name!r} is described by a {type(spec).__name__}, not an object")
        kind = TYPES.get(str(spec.get("type", "string")))
        if kind is None:
            raise ValueError(f"argument {name!r} has type {spec.get('type')!r}; the types are {', '.join(TYPES)}")
        choices = spec.get("enum")
        declared = Arg(description=str(spec.get("description") or "") or None,
                       minimum=low if isinstance(low := spec.get("minimum"), (int, float)) else None,
                       maximum=high if isinstance(high := spec.get("maximum"), (int, float)) else None,
                       choices=tuple(choices) if isinstance(choices, list) and choices else None)
        default = spec["default"] if "default" in spec else inspect.Parameter.empty
        params.append(inspect.Parameter(str(name), inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[kind, declared]))
    return params


def register(bridge: Any, driver: Any, described: Any) -> list[str]:
    """Register the page's commands (``described``: what ``snapshot`` saw of them) on the
    kit's ``bridge``, run through ``driver`` (the Page: its ``soon``, ``look`` and
    ``page``); returns the names taken. One that cannot be is logged and left out."""
    if not isinstance(described, Mapping):
        return []
    taken: list[str] = []
    existing = set(bridge.commands())
    for name, entry in list(described.items())[:MAX_COMMANDS]:
        if name in existing:
            log.warning("game-bridge browser: the page's command %r has the name of one of the wrapper's; left out", name)
            continue
        try:
            func = _command(str(name), driver, bridge)
            func.__signature__ = inspect.Signature(_parameters(entry.get("args") or {}))  # type: ignore[attr-defined]
            func.__annotations__ = {p.name: p.annotation for p in func.__signature__.parameters.values()}  # type: ignore[attr-defined]
            description = str(entry.get("description") or "") or f"The page's own {name!r} command."
            bridge.command(func, name=str(name), description=description[:500], toolset=TOOLSET)
        except (ValueError, TypeError) as exc:
            log.warning("game-bridge browser: the page's command %r cannot be published: %s", name, exc)
            continue
        taken.append(str(name))
    if taken:
        bridge.toolset(TOOLSET, "The page's own commands (window.gameBridge.commands), run in the page between frames.")
    return taken


def _command(name: str, driver: Any, bridge: Any) -> Callable[..., Any]:
    def command(**kwargs: Any) -> Pending:
        pending: Pending = bridge.defer()

        def run() -> None:
            try:
                answer = driver.page.evaluate(_scripts.COMMAND, [name, kwargs])
            except Exception as exc:  # noqa: BLE001 - what the page's function threw
                message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                pending.fail(message.removeprefix("Page.evaluate: ").removeprefix("Error: ")[:500])
                return
            driver.look()  # what the command changed, before it is seen to complete
            if isinstance(answer, Mapping) and answer.get("promise"):
                pending.complete("(the command returned a promise; it goes on as the page's clock runs)")
            else:
                pending.complete(answer.get("value") if isinstance(answer, Mapping) else None)

        driver.soon(run)
        return pending

    command.__name__ = name
    return command
