"""A pygame game that raises while it is being imported (a boot failure)."""

import pygame  # noqa: F401

raise ZeroDivisionError("the game is broken at import")
