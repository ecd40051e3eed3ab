"""Catch the Stars: a complete game the kit makes drivable, in plain Python (no pygame, no window).

    python examples/catch_stars.py --debug-port 7841    # an agent drives it on port 7841
    python examples/catch_stars.py                      # on any free port, printed at start
"""

import random
from typing import Annotated, Literal

from game_bridge_mcp.game import GameBridge, Range, debug_port_from_argv

WIDTH, HEIGHT, FALL_EVERY = 7, 6, 10  # columns, rows, frames per row a star falls
rng = random.Random(7)
world = {"score": 0, "lives": 3, "basket": WIDTH // 2, "starColumn": rng.randrange(WIDTH), "starRow": 0}


def board() -> str:
    """The screen as text: the falling star (*) and the basket (U) on the bottom row."""
    rows = [["."] * WIDTH for _ in range(HEIGHT)]
    rows[world["starRow"]][world["starColumn"]] = "*"
    rows[-1][world["basket"]] = "U"
    return "\n".join("".join(r) for r in rows)


bridge = GameBridge("Catch the Stars", "1.0", state=lambda: {"game": dict(world), "ui": {"text": board()}},
                    description="Move the basket (U) under the falling star (*) to catch it: +1 point. "
                                "A star that reaches the ground costs a life; three misses end the round.",
                    clock=True)                      # adds pause / resume / step
bridge.toolset("play", "Play the game the way a player does.")


@bridge.command(toolset="play")
def move(direction: Literal["left", "right"], steps: Annotated[int, Range(1, WIDTH - 1)] = 1) -> dict:
    """Move the basket left or right by some columns."""
    if world["lives"] == 0:
        raise ValueError("the round is over: restart first")   # an ok:false outcome, this text
    delta = steps if direction == "right" else -steps
    world["basket"] = max(0, min(WIDTH - 1, world["basket"] + delta))
    return {"basket": world["basket"]}                       # the command's result


@bridge.command(toolset="play")
def restart() -> dict:
    """Start a new round: score 0, three lives."""
    world.update(score=0, lives=3, basket=WIDTH // 2, starColumn=rng.randrange(WIDTH), starRow=0)
    return {"lives": 3}


def update() -> None:
    """One frame: the star falls a row every FALL_EVERY frames; at the bottom it is caught or missed."""
    if world["lives"] == 0 or bridge.frame % FALL_EVERY:
        return
    column = world["starColumn"]
    if world["starRow"] < HEIGHT - 1:
        world["starRow"] += 1
        return
    if column == world["basket"]:
        world["score"] += 1
        bridge.event("catch", column=column)
    else:
        world["lives"] -= 1
        bridge.event("miss", column=column)
    world.update(starColumn=rng.randrange(WIDTH), starRow=0)


if __name__ == "__main__":
    port = debug_port_from_argv()    # --debug-port N (or GAME_BRIDGE_DEBUG_PORT); None here: any free port
    bridge.start(port or 0)          # binds 127.0.0.1, then writes the registry entry
    print(f"Catch the Stars on port {bridge.port}", flush=True)
    bridge.run(update, hz=30)        # until an agent sends close; removes the entry
