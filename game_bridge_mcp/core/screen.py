"""The picture beside a state, for a condition on the picture (``{screen: ...}``): each state a
wait looks at is fetched with the picture's hash (``wire/screen.py``), carried on the state
as ``screen`` for ``Watch`` to compare, and never shown in an answer."""

from __future__ import annotations

from typing import Any

from ..contract import SCREENSHOT_FEATURE
from ..errors import BridgeUsageError
from ..wire.client import GameClient
from ..wire.screen import ScreenHash, screen_hash
from .waiting import Condition


class Seen(dict):  # type: ignore[type-arg]
    """A state, with the picture's hash taken right after it (``screen``)."""

    screen: ScreenHash | None = None


def check_screen(client: GameClient, condition: Condition) -> None:
    """A picture condition needs the game's pictures: BridgeUsageError naming the feature
    when its ``/health`` does not list ``screenshot``."""
    if condition.screen is None:
        return
    features = client.features if client.features is not None else client.learn_features()
    if SCREENSHOT_FEATURE not in features:
        shown = ", ".join(sorted(features)) or "none"
        raise BridgeUsageError(
            f"{condition.what}: the game on port {client.port} does not serve screenshots (its /health features: "
            f"{shown}), so its picture cannot be watched. Wait on its state instead ({{path, changes: true}} or "
            "{event}), or give it the screenshot feature.", port=client.port, feature=SCREENSHOT_FEATURE)


def with_screen(client: GameClient, condition: Condition, state: dict[str, Any], *,
                timeout_ms: int | None = None) -> dict[str, Any]:
    """``state`` as it is, or (a picture condition) with the picture's hash beside it."""
    if condition.screen is None:
        return state
    seen = Seen(state)
    seen.screen = screen_hash(client, condition.region, timeout_ms=timeout_ms)
    return seen
