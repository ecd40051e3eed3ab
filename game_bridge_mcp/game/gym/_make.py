"""Finding and making the environment: which package registers an id (imported first, as
Gymnasium 1.x asks), the render mode that gives a picture or a text, and each failure said
in one line that names what to install or change. Imports Gymnasium when called."""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Any

#: The render modes the wrapper can show: a picture, then a text; "human" draws where
#: nobody looks (a window, or the wrapper's stdout).
PICTURE_MODE = "rgb_array"
TEXT_MODE = "ansi"
UNSHOWABLE_MODES = ("human",)
#: Close matches listed in an unknown id's error, at most.
MAX_MATCHES = 8


class MakeError(Exception):
    """The environment cannot be made (the message says why and what to do)."""


@dataclass(frozen=True)
class Provider:
    """A package that registers environments when imported."""

    pattern: str  # a regular expression an id of it matches
    module: str
    package: str

    def provides(self, env_id: str) -> bool:
        return re.match(self.pattern, env_id) is not None


PROVIDERS = (
    Provider(r"ALE/|[A-Z][A-Za-z0-9]*(NoFrameskip|Deterministic)?-v[045]$", "ale_py", "ale-py"),
    Provider(r"(MiniGrid|BabyAI)-", "minigrid", "minigrid"),
    Provider(r"NetHack", "nle", "nle"),
    Provider(r"MiniHack-", "minihack", "minihack"),
    Provider(r"Vizdoom", "vizdoom.gymnasium_wrapper", "vizdoom"),
    Provider(r"MiniWorld-", "miniworld", "miniworlds"),
    Provider(r"Crafter", "game_bridge_mcp.game.gym._crafter", "crafter"),  # registered here: Crafter knows only gym
)


def _gym() -> Any:
    try:
        import gymnasium
    except ImportError:
        raise MakeError("Gymnasium is not installed here: pip install 'game-bridge-mcp[gym]' "
                        "(and the environments' own packages, e.g. ale-py, minigrid, nle)") from None
    return gymnasium


def _import(module: str) -> None:
    importlib.import_module(module)


def resolve(env_id: str) -> str:
    """The registered id ``env_id`` names, its package imported first; MakeError saying
    which package to install, or listing close matches and who provides them."""
    gym = _gym()
    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        try:
            _import(module)
        except ImportError as exc:
            raise MakeError(f"cannot import {module!r} to register {env_id}: {exc}") from None
    if env_id in gym.registry:
        return env_id
    for provider in PROVIDERS:
        if provider.provides(env_id):
            try:
                _import(provider.module)
            except ImportError as exc:
                if getattr(exc, "name", None) and str(exc.name).split(".")[0] == provider.module.split(".")[0]:
                    raise MakeError(f"{env_id} comes from the package {provider.package}, which is not installed "
                                    f"here: pip install {provider.package}") from None
                raise MakeError(f"{provider.package} is installed but cannot be imported: {exc}") from None
            if env_id in gym.registry:
                return env_id
    for provider in PROVIDERS:  # what every installed package registers, for the matches
        try:
            _import(provider.module)
        except Exception:  # noqa: BLE001 - not installed, or broken: its ids are not offered
            pass
    if env_id in gym.registry:
        return env_id
    raise MakeError(unknown_id(env_id, list(gym.registry), gym.registry))


def unknown_id(env_id: str, ids: list[str], registry: Any) -> str:
    """The error for an id nobody registered: close matches, each with its package."""
    matches = difflib.get_close_matches(env_id, ids, n=MAX_MATCHES, cutoff=0.6)
    wanted = re.sub(r"-v\d+$", "", env_id.split("/")[-1]).lower()
    if len(wanted) >= 3:
        matches += [i for i in ids if wanted in i.lower() and i not in matches]
    matches = matches[:MAX_MATCHES]
    text = f"no environment {env_id!r} is registered"
    if matches:
        shown = ", ".join(f"{m} ({provider_of(registry[m])})" for m in matches)
        text += f"; close matches: {shown}"
    hints = [p.package for p in PROVIDERS if p.provides(env_id)]
    if hints:
        text += f". {env_id} looks like an id of {hints[0]}"
    elif not matches:
        text += (". Gymnasium registers an environment when its package is imported: install it (ale-py, "
                 "minigrid, nle, ...) or name it as MODULE:ID")
    return text


def provider_of(spec: Any) -> str:
    """The distribution that provides a registered environment ("gymnasium", "ale-py")."""
    entry = spec.entry_point
    module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "") or ""
    top = "crafter" if module.endswith("gym._crafter") else module.split(".")[0]  # (registered here for Crafter)
    from importlib import metadata

    for guess in (top.replace("_", "-"), top):  # (ale_py is ale-py's: found without reading every package)
        try:
            return str(metadata.distribution(guess).metadata["Name"])
        except metadata.PackageNotFoundError:
            continue
    try:
        names = metadata.packages_distributions().get(top) or [top]
    except Exception:  # noqa: BLE001 - metadata unreadable: the module's name will do
        names = [top]
    return names[0]


def render_modes(env_id: str) -> list[str]:
    """The render modes the environment's class declares (empty when it declares none)."""
    gym = _gym()
    spec = gym.spec(env_id)
    try:
        from gymnasium.envs.registration import load_env_creator

        creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
        modes = (getattr(creator, "metadata", None) or {}).get("render_modes") or []
    except Exception:  # noqa: BLE001 - the class cannot be read before making it
        modes = []
    return [str(mode) for mode in modes]


def choose_render_mode(modes: list[str]) -> str | None:
    """A picture where there is one (rgb_array), else a text (ansi), else none."""
    for mode in (PICTURE_MODE, TEXT_MODE):
        if mode in modes:
            return mode
    return None


def _as_declared(gym: Any, env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """JSON has no tuples: an array given for a keyword the environment's constructor
    declares a tuple (ALE's ``frameskip: tuple[int, int] | int``, a frame skip drawn per
    step) is passed as one; everything else as it came."""
    if not any(isinstance(value, list) for value in kwargs.values()):
        return kwargs
    try:
        entry = gym.spec(env_id).entry_point
        creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
        parameters = inspect.signature(creator).parameters
    except Exception:  # noqa: BLE001 - no signature to read: the arguments go as given
        return kwargs
    out = dict(kwargs)
    for name, value in kwargs.items():
        declared = str(parameters[name].annotation).lower() if name in parameters else ""
        if isinstance(value, list) and "tuple" in declared and "list" not in declared and "sequence" not in declared:
            out[name] = tuple(value)
    return out


def make(env_id: str, kwargs: dict[str, Any]) -> Any:
    """``gymnasium.make(env_id, **kwargs)``, each failure a MakeError that says what to do."""
    gym = _gym()
    mode = kwargs.get("render_mode")
    if mode in UNSHOWABLE_MODES:
        raise MakeError(f"render_mode {mode!r} draws in a window or on the terminal, where the wrapper cannot "
                        f"show it; use {PICTURE_MODE!r} or {TEXT_MODE!r} (or leave it out)")
    shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())[:300]
    try:
        return gym.make(env_id, **_as_declared(gym, env_id, kwargs))
    except gym.error.DependencyNotInstalled as exc:
        raise MakeError(f"{env_id} needs a package that is not installed here: {_line(exc)}") from None
    except ModuleNotFoundError as exc:
        raise MakeError(f"{env_id} needs the Python package {exc.name!r}, which is not installed here "
                        f"({_line(exc)})") from None
    except TypeError as exc:
        raise MakeError(f"{env_id} could not be made with {shown or 'no keyword arguments'}: {_line(exc)}; "
                        "check --make-kwargs") from None
    except Exception as exc:  # noqa: BLE001 - the environment's own constructor failed
        raise MakeError(f"{env_id} could not be made: {type(exc).__name__}: {_line(exc)}") from None


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()).split(" was raised from the environment creator")[0]
    return text[:400] or type(exc).__name__
