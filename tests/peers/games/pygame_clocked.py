"""A minimal pygame game for the wrapper's tests: a box that moves by ``clock.tick(50)``.

It exposes what it saw through the wrapper's optional state hook (the dt of each frame,
pygame.time.get_ticks(), the frames the right arrow was held in and the frames that read
a space keydown), exits with code 3 on QUIT, and with --crash raises in its
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
right = 0  # frames in which the right arrow was held
spaces: list[int] = []  # the frame (its number, from 1) in which each space keydown was read
mice: list[list] = []  # MOUSEWHEEL (x, y, precise_y) and MOUSEBUTTONDOWN (button, pos) as read


@state_hook
def bridge_state():
    return {"game": {"dts": dts[-50:], "ticks": ticks[-50:], "x": x, "frames": len(dts), "right": right,
                     "spaces": spaces[-20:],
                     "mice": mice[-10:]}}


def main() -> None:
    global x, right
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
            if event.type == pygame.KEYDOWN and event.key == pygame.K_SPACE:
                spaces.append(len(dts) + 1)
            if event.type == pygame.MOUSEWHEEL:
                mice.append(["wheel", event.x, event.y, event.precise_y])
            if event.type == pygame.MOUSEBUTTONDOWN:
                mice.append(["down", event.button, list(event.pos)])
        if "--crash" in sys.argv:
            raise RuntimeError("the game crashed in its first frame")
        if pygame.key.get_pressed()[pygame.K_RIGHT]:
            right += 1
        dt = clock.tick(50)
        dts.append(dt)
        ticks.append(pygame.time.get_ticks())
        x += dt
        screen.fill((0, 0, 0))
        pygame.draw.rect(screen, (255, 255, 255), ((x // 10) % 150, 50, 10, 10))
        pygame.display.flip()


if __name__ == "__main__":
    main()
