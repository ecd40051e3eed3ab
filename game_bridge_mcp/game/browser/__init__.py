"""Play any web game through the bridge, unmodified: ``game-bridge-mcp browser``.

``game-bridge-mcp browser [--port N] [--paused] [--size WxH] [--browser PATH] (URL | FILE | DIR)``
(or ``python -m game_bridge_mcp.game.browser ...``) opens the page in headless Chromium
through the browsing library (Playwright, the ``[browser]`` extra) and serves the kit's
HTTP surface: each animation frame (1/60 s of page time) is a frame; ``pause``,
``resume`` and ``step`` hold the page's clock (:mod:`._page`); ``key``, ``mouse`` and
``text`` are real browser input (:mod:`._input`); ``/screenshot`` shows the page;
``/state`` shows what it shows; its console and errors are events. Importing this
package imports neither the library nor a browser.

A page may add its own state and commands without depending on the wrapper::

    window.gameBridge = {
      state: () => ({ game: { score, lives } }),
      commands: { restart: { description: "Start a new round.", run: () => restart() } },
    };
"""

from __future__ import annotations

from ._runner import main

__all__ = ["main"]
