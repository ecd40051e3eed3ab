"""A pygame game that opens its window but never flips its display (readiness must say so),
or with --flip-once flips one frame and then blocks in its own loop for good."""

import sys
import time

import pygame

pygame.init()
screen = pygame.display.set_mode((100, 100))
if "--flip-once" in sys.argv:
    screen.fill((255, 0, 0))
    pygame.display.flip()
while True:
    time.sleep(0.05)
