"""A minimal pygame game for the wrapper's tests: a box that moves by ``clock.tick(50)``.

It exposes what it saw through the wrapper's optional state hook (the dt of each frame
and pygame.time.get_ticks()), exits with code 3 on QUIT, and with --crash raises in its
first frame. With --sdl-sigint it leaves Ctrl-C to SDL (SIGINT back to its default before
pygame.init, as some games do), which then turns it into a QUIT event."""

import signal
import sys

import pygame

try:
    from game_bridge_mcp.game.pygame import state_hook
except ImportError:  # run without the wrapper
    def state_hook(func):
        return func

dts: list[int] = []
ticks: list[int] = []
x = 0


@state_hook
def bridge_state():
    return {"game": {"dts": dts[-50:], "ticks": ticks[-50:], "x": x, "frames": len(dts)}}


def main() -> None:
    global x
    if "--sdl-sigint" in sys.argv:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    pygame.init()
    screen = pygame.display.set_mode((160, 120))
    pygame.display.set_caption("Clocked Box")
    clock = pygame.time.Clock()
    while True:
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                pygame.quit()
                sys.exit(3)
        if "--crash" in sys.argv:
            raise RuntimeError("the game crashed in its first frame")
        dt = clock.tick(50)
        dts.append(dt)
        ticks.append(pygame.time.get_ticks())
        x += dt
        screen.fill((0, 0, 0))
        pygame.draw.rect(screen, (255, 255, 255), ((x // 10) % 150, 50, 10, 10))
        pygame.display.flip()


if __name__ == "__main__":
    main()
