"""Each extension is named once, in ``contract.FEATURES``, and none is forgotten: each has its
check (``check/runner.py``'s ``EXTENSION_CHECKS``), an implementation in the kit (a kit game
with everything on advertises it), one in the hand-made reference game
(``tests/peers/handmade.py``, which spells the contract by hand so that kit and bridge cannot
agree on a mistake) and its row in docs/contract.md's table of extensions; and no code spells
a feature's name instead of its constant. Each test names what is missing."""

from __future__ import annotations

import ast
import http.client
import json
import re
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.check.runner import EXTENSION_CHECKS
from game_bridge_mcp.contract import CLOCK, FEATURES, INPUT
from game_bridge_mcp.game import GameBridge, Pixels
from peers import handmade

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "game_bridge_mcp"


def health(port: int) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/health")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def test_every_extension_has_its_check() -> None:
    lacking = [name for name in FEATURES if name not in EXTENSION_CHECKS]
    assert not lacking, f"check/runner.py's EXTENSION_CHECKS has no check for {lacking}"
    extra = [name for name in EXTENSION_CHECKS if name not in FEATURES]
    assert not extra, f"EXTENSION_CHECKS checks {extra}, which contract.FEATURES does not name"


def test_every_extension_is_implemented_by_the_kit() -> None:
    """A kit game with all it offers on (its clock, a screenshot, the input toolset a wrapper
    serves) advertises every extension."""

    def key(key: str) -> None:
        """A key."""

    def mouse(x: int, y: int) -> None:
        """A pointer."""

    def text(text: str) -> None:
        """Text."""

    bridge = GameBridge("Everything", "1", clock=True, register=False, screenshot=lambda: Pixels(bytes(12), 2, 2, "RGB"))
    for func in (key, mouse, text):
        bridge.command(func, toolset=INPUT)
    bridge.advertise(INPUT)
    try:
        advertised = health(bridge.start(0)).get("features", [])
    finally:
        bridge.stop()
    lacking = [name for name in FEATURES if name not in advertised]
    assert not lacking, f"the kit (game/kit/) does not implement {lacking}: a kit game with everything on " \
                        f"advertises only {advertised}"
    assert CLOCK in advertised


def test_every_extension_is_implemented_by_the_hand_made_game() -> None:
    lacking = [name for name in FEATURES if name not in handmade.FEATURES]
    assert not lacking, f"tests/peers/handmade.py does not implement {lacking} (its FEATURES)"
    with handmade.HandmadeGame() as game:
        advertised = health(game.port).get("features", [])
    assert advertised == list(FEATURES), f"the hand-made game advertises {advertised}, the contract names {FEATURES}"


def test_every_extension_has_its_row_in_docs_contract() -> None:
    text = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    table = text.split("| feature | what the game serves |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z]+)` \|", table, re.M)
    lacking = [name for name in FEATURES if name not in rows]
    assert not lacking, f"docs/contract.md's table of extensions has no row for {lacking}"
    assert rows == list(FEATURES), f"docs/contract.md lists {rows}; contract.FEATURES is {FEATURES}, in that order"


#: Calls whose first argument is a feature's name.
FEATURE_CALLS = {"uses", "has_feature", "broken", "advertise", "_needs_harmless"}
#: Keyword arguments that take a feature's name.
FEATURE_KEYWORDS = {"toolset", "feature"}


@pytest.mark.slow
def test_no_code_spells_a_features_name() -> None:
    """A feature's name in a test of features (``"clock" in features``), in a call about one
    (``uses("after")``) or as a toolset is its constant from contract.py, so that renaming
    or adding one is one place."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "contract.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            spelled: list[ast.expr] = []
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                spelled.append(node.left)
            elif isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in FEATURE_CALLS:
                    spelled += node.args
                spelled += [kw.value for kw in node.keywords if kw.arg in FEATURE_KEYWORDS]
            for expr in spelled:
                for leaf in ast.walk(expr):
                    if isinstance(leaf, ast.Constant) and leaf.value in FEATURES:
                        found.append(f"{where}:{leaf.lineno} spells {leaf.value!r}")
    assert not found, "use contract.py's constant:\n" + "\n".join(found)
