"""The demo game as a changed build would change it, for the replay tests.

    demo_variant.py [demo options]        with DEMO_VARIANT in the environment:

- ``""`` (unset): the demo exactly as shipped;
- ``double-score``: every merge scores twice the points (a rules change that shows only
  once something merges, so a replay matches for a while and then diverges);
- ``slow-boot:S``: the game starts serving S seconds later (a launch long enough to report
  progress);
- ``crash-on-drop:N``: the process dies (exit 70, after a line on stderr) when the N-th
  drop is applied, the way a game crashes mid-session.

The shipped demo carries no test hooks; the variants patch it from outside.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from game_bridge_mcp.game import demo  # noqa: E402
from game_bridge_mcp.game.demo import fruit as _fruit  # noqa: E402


def apply(variant: str) -> None:
    if variant == "double-score":
        _fruit.POINTS = tuple(2 * p for p in _fruit.POINTS)  # where the rules read them
        _fruit.POP_POINTS *= 2
    elif variant.startswith("crash-on-drop:"):
        limit = int(variant.split(":", 1)[1])
        original = _fruit.FruitMerge.drop
        count = [0]

        def drop(self: Any, x: float) -> Any:
            count[0] += 1
            if count[0] >= limit:
                sys.stderr.write(f"Fruit Merge: fatal error in drop #{count[0]} (x={x}): segmentation fault\n")
                sys.stderr.flush()
                os._exit(70)
            return original(self, x)

        _fruit.FruitMerge.drop = drop  # type: ignore[method-assign]
    elif variant.startswith("slow-boot:"):
        time.sleep(float(variant.split(":", 1)[1]))
    elif variant:
        raise SystemExit(f"unknown DEMO_VARIANT {variant!r}")


if __name__ == "__main__":
    apply(os.environ.get("DEMO_VARIANT", ""))
    sys.exit(demo.main(sys.argv[1:]))
