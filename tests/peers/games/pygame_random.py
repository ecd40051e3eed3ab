"""A pygame game whose every frame depends on what makes games differ run to run: the
``random`` module (a star falls at a random column), ``pygame.time.get_ticks()`` and a
``clock.tick()`` dt (the ship glides by time), and a ``pygame.time.set_timer`` event (a
counter ticks every 250 ms). Arrow keys steer the ship. Written as any pygame game is, with
no knowledge of the wrapper but its optional state hook."""

import random
import sys

import pygame

try:
    from game_bridge_mcp.game.pygame import state_hook
except ImportError:  # run without the wrapper
    def state_hook(func):
        return func

TICK = pygame.USEREVENT + 1
stars: list[list[int]] = []
ship = 80.0
timer_ticks = 0
last_ticks = 0
caught = 0


@state_hook
def bridge_state():
    return {"game": {"ship": round(ship, 3), "stars": len(stars), "timerTicks": timer_ticks, "ticks": last_ticks,
                     "caught": caught, "first": stars[0] if stars else None}}


def main() -> None:
    global ship, timer_ticks, last_ticks, caught
    pygame.init()
    screen = pygame.display.set_mode((160, 120))
    clock = pygame.time.Clock()
    pygame.time.set_timer(TICK, 250)
    while True:
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                pygame.quit()
                sys.exit(0)
            if event.type == TICK:
                timer_ticks += 1
        dt = clock.tick(60)
        last_ticks = pygame.time.get_ticks()
        keys = pygame.key.get_pressed()
        ship += (keys[pygame.K_RIGHT] - keys[pygame.K_LEFT]) * dt * 0.1
        if random.random() < 0.2:
            stars.append([random.randrange(160), 0])
        for star in stars:
            star[1] += 2
        caught += sum(1 for s in stars if s[1] >= 110 and abs(s[0] - ship) < 8)
        stars[:] = [s for s in stars if s[1] < 120]
        screen.fill((0, 0, 20))
        for x, y in stars:
            screen.fill((255, 255, 200), (x, y, 2, 2))
        screen.fill((80, 200, 255), (int(ship) - 6, 110, 12, 6))
        pygame.display.flip()


if __name__ == "__main__":
    main()
