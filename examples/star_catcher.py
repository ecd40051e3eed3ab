"""Star Catcher: a small pygame-ce game, made drivable and visible with the game-bridge kit.

Stars fall from the top; move the catcher (arrow keys, or the ``move`` command) under
them to score, and each star that reaches the ground costs a life. Three lives.

    python examples/star_catcher.py                      # a plain game, in a window
    python examples/star_catcher.py --debug-port 7830    # and an agent can drive and see it

Headless (SDL's dummy video driver) unless ``--window`` is given or a display is asked for
with ``SDL_VIDEODRIVER``. The lines marked ``# bridge`` are all the kit needs: the
screenshots are the game's real display Surface, captured right after its flip.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Any

if "--window" not in sys.argv:
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pygame  # noqa: E402

from game_bridge_mcp.game import GameBridge, debug_port_from_argv  # noqa: E402  # bridge

WIDTH, HEIGHT = 640, 480
CATCHER_W, CATCHER_H, CATCHER_SPEED = 80, 16, 6
STAR_RADIUS, STAR_SPEED, SPAWN_EVERY = 10, 3, 45


class World:
    """The rules, independent of pygame's display (a test can tick it directly)."""

    def __init__(self, seed: int = 1, size: tuple[int, int] = (WIDTH, HEIGHT)) -> None:
        self.rng = random.Random(seed)
        self.width, self.height = size
        self.x = self.width // 2
        self.score = 0
        self.lives = 3
        self.stars: list[list[int]] = []
        self.ticks = 0
        self.held = 0  # -1 left, +1 right (the arrow keys)

    @property
    def over(self) -> bool:
        return self.lives <= 0

    def move(self, dx: int) -> None:
        self.x = max(CATCHER_W // 2, min(self.width - CATCHER_W // 2, self.x + dx))

    def update(self) -> None:
        if self.over:
            return
        self.ticks += 1
        self.move(self.held * CATCHER_SPEED)
        if self.ticks % SPAWN_EVERY == 1:
            self.stars.append([self.rng.randrange(STAR_RADIUS, self.width - STAR_RADIUS), -STAR_RADIUS])
        top = self.height - 40
        for star in list(self.stars):
            star[1] += STAR_SPEED
            if star[1] + STAR_RADIUS >= top and abs(star[0] - self.x) <= CATCHER_W // 2 + STAR_RADIUS:
                self.stars.remove(star)
                self.score += 1
            elif star[1] - STAR_RADIUS > self.height:
                self.stars.remove(star)
                self.lives -= 1

    def draw(self, screen: Any, font: Any) -> None:
        screen.fill((12, 14, 30))
        pygame.draw.rect(screen, (40, 44, 70), (0, self.height - 24, self.width, 24))
        for x, y in self.stars:
            pygame.draw.circle(screen, (255, 220, 60), (x, y), STAR_RADIUS)
        pygame.draw.rect(screen, (80, 170, 255),
                         (self.x - CATCHER_W // 2, self.height - 40, CATCHER_W, CATCHER_H), border_radius=6)
        label = f"score {self.score}   lives {self.lives}" + ("   GAME OVER" if self.over else "")
        screen.blit(font.render(label, True, (235, 235, 240)), (12, 10))

    def state(self) -> dict[str, Any]:
        return {"ui": {"screen": "GameOverScreen" if self.over else "GameScreen"},
                "game": {"x": self.x, "score": self.score, "lives": self.lives, "over": self.over,
                         "stars": [{"x": x, "y": y} for x, y in self.stars]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--debug-port", type=int, default=None, help="serve the game-bridge surface here (0: any)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hz", type=int, default=60)
    parser.add_argument("--size", default=f"{WIDTH}x{HEIGHT}", help="window size WxH (default 640x480)")
    parser.add_argument("--window", action="store_true", help="open a real window")
    args = parser.parse_args(argv)
    try:
        size = tuple(int(n) for n in args.size.lower().split("x"))
        assert len(size) == 2 and min(size) >= 100
    except (ValueError, AssertionError):
        parser.error(f"--size must be WxH, each at least 100, not {args.size!r}")

    pygame.init()
    screen = pygame.display.set_mode(size)
    pygame.display.set_caption("Star Catcher")
    font = pygame.font.Font(None, 28)
    clock = pygame.time.Clock()
    world = World(args.seed, (size[0], size[1]))

    bridge = GameBridge("Star Catcher", "1.0", state=world.state,            # bridge
                        screenshot=lambda: screen)                            # bridge

    @bridge.command(toolset="play")                                           # bridge
    def move(dx: int) -> None:                                                # bridge
        """Move the catcher dx pixels (negative: left); it stops at the edges."""
        world.move(dx)

    port = debug_port_from_argv(argv if argv is not None else sys.argv[1:])  # bridge
    if port is not None:                                                      # bridge
        print(f"Star Catcher serving on http://127.0.0.1:{bridge.start(port)}", flush=True)  # bridge

    keys = {pygame.K_LEFT: -1, pygame.K_RIGHT: 1}
    running = True
    while running and not bridge.closing:
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                running = False
            elif event.type in (pygame.KEYDOWN, pygame.KEYUP) and event.key in keys:
                world.held = keys[event.key] if event.type == pygame.KEYDOWN else 0
        with bridge.lock:                                                     # bridge
            world.update()
        world.draw(screen, font)
        pygame.display.flip()
        bridge.pump()              # bridge: commands, and screenshots of the frame just shown
        clock.tick(args.hz)
    bridge.stop()                                                             # bridge
    pygame.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
