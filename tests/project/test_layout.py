"""The layout is the design: imports run downward between the subpackages, no module
imports another in a cycle (not even under TYPE_CHECKING or inside a function), the kit
reaches only what a game needs, only the adapter imports the MCP SDK (and its web stack), and no module
imports another's private names.

Read from the source with ``ast``: every import statement counts, wherever it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from game_bridge_mcp.wrappers import NAMES as WRAPPER_NAMES

PACKAGE = Path(__file__).resolve().parents[2] / "game_bridge_mcp"
ROOT = "game_bridge_mcp"

#: Each box's layer: a box may import only boxes on a lower layer (and itself).
LAYERS: dict[str, float] = {
    "cli": 5, "testing": 5,
    "mcp_server": 4,
    "trace": 3.5,
    "core": 3, "check": 3,
    "discovery": 2, "launch": 2,
    "terminal": 2,
    "wire": 1, "manifest": 1, "registry": 1,
    "contract": 0, "errors": 0, "config": 0, "paths": 0, "jsonio": 0, "polling": 0, "listeners": 0, "_version": 0,
    "wrappers": 0,
    "ownership": 0,
}
#: What the game kit may import besides itself: a game needs no HTTP client or bridge.
GAME_MAY_IMPORT = {"contract", "registry", "jsonio", "paths", "config", "errors", "_version", "wrappers"}
#: The game side's folders, each on a layer: a folder imports only folders on a lower layer
#: (and itself). The kit's HTTP server and the images know nothing of the kit; the demo
#: and what every wrapper shares (wrapper/) are built on the kit; each wrapper of the
#: table (game_bridge_mcp/wrappers.py) on those, and nothing on a wrapper.
GAME_LAYERS: dict[str, int] = {
    **{name: 3 for name in WRAPPER_NAMES},
    "demo": 2, "wrapper": 2,
    "kit": 1,
    "server": 0, "image": 0, "snapshot": 0,
}
#: The game package's front door, which re-exports the kit's public names.
GAME_FACADE = f"{ROOT}.game.__init__"
#: The tools' families (core/tools/): each a module of tool units, standing alone.
TOOLS = f"{ROOT}.core.tools"
FAMILIES = {f"{TOOLS}.{name}" for name in ("instances", "toolsets", "calls", "state", "clock", "events", "screenshots", "states")}
#: What the families share: the unit and its argument checks, the answer shapes, the command path.
TOOLS_SHARED = {f"{TOOLS}.unit", f"{TOOLS}.shapes", f"{TOOLS}.commands"}
#: The package's front doors, which re-export public names lazily from everywhere.
FACADES = {f"{ROOT}.__init__", f"{ROOT}.__main__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts)


def box_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def resolve(package: list[str], node: ast.ImportFrom) -> list[str]:
    """The absolute module names an ImportFrom in ``package`` brings in (an imported name
    may itself be a module)."""
    if node.level == 0:
        base = node.module or ""
    else:
        parts = package[: len(package) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    targets = [base]
    for alias in node.names:
        candidate = PACKAGE.parent / Path(*f"{base}.{alias.name}".split("."))
        if candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists():
            targets.append(f"{base}.{alias.name}")
    return targets


def imports() -> dict[str, list[tuple[str, int, list[str]]]]:
    """module -> [(imported module, line, names imported from it)], every import
    statement counted (top level, in functions, under TYPE_CHECKING)."""
    found: dict[str, list[tuple[str, int, list[str]]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        package = list(path.parent.relative_to(PACKAGE.parent).parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        entries: list[tuple[str, int, list[str]]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                entries += [(alias.name, node.lineno, []) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [alias.name for alias in node.names]
                entries += [(target, node.lineno, names) for target in resolve(package, node)]
        found[name] = entries
    return found


def internal(target: str) -> str | None:
    if target == ROOT or target.startswith(ROOT + "."):
        return target
    return None


@pytest.mark.slow
def test_imports_run_downward_between_boxes() -> None:
    bad = []
    for module, entries in imports().items():
        if module in FACADES:
            continue
        source = box_of(module)
        for target, line, _names in entries:
            target = internal(target) or ""
            dest = box_of(target)
            if not target or dest == source or target == ROOT:
                continue
            if source == "game":
                if dest not in GAME_MAY_IMPORT:
                    bad.append(f"{module}:{line} imports {target} (the kit reaches only {sorted(GAME_MAY_IMPORT)})")
                continue
            assert source in LAYERS, f"{module}: box {source!r} has no layer in this test; add it"
            assert dest in LAYERS or dest == "game", f"{target}: box {dest!r} has no layer in this test; add it"
            if dest == "game" or LAYERS[dest] > LAYERS[source] or LAYERS[dest] == LAYERS[source] != 0:
                bad.append(f"{module}:{line} imports {target} ({source} may not import {dest})")
    assert not bad, "\n".join(bad)


def game_folder(module: str) -> str:
    """The folder of game/ that ``module`` (or package) is in, "" for game/ itself."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] != "__init__" else ""


@pytest.mark.slow
def test_the_game_sides_folders_import_downward() -> None:
    """game/ is folders, not modules side by side: each folder is on a layer of GAME_LAYERS,
    and nothing lies loose beside them but the package's front door."""
    found = imports()
    game = {m for m in found if box_of(m) == "game"}
    loose = sorted(m for m in game if len(m.split(".")) == 3 and m != GAME_FACADE)
    assert not loose, f"modules loose in game/ (put each in a folder of GAME_LAYERS): {loose}"
    folders = {game_folder(m) for m in game} - {""}
    assert folders <= set(GAME_LAYERS), f"game/ folders with no layer in this test: {sorted(folders - set(GAME_LAYERS))}"
    bad = []
    for module in sorted(game - {GAME_FACADE}):
        source = game_folder(module)
        for target, line, _names in found[module]:
            target = internal(target) or ""
            if box_of(target) != "game" or target == f"{ROOT}.game":
                continue
            dest = game_folder(target)
            if dest != source and (not dest or GAME_LAYERS[dest] >= GAME_LAYERS[source]):
                bad.append(f"{module}:{line} imports {target} (game/{source}/ may not import game/{dest or '__init__'})")
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_the_contract_imports_nothing_of_the_package() -> None:
    """contract.py is the bottom: pure data that the kit, the bridge and check all import."""
    found = [f"{target} (line {line})" for target, line, _names in imports()[f"{ROOT}.contract"] if internal(target)]
    assert not found, found


@pytest.mark.slow
def test_no_import_cycles_at_all() -> None:
    graph: dict[str, set[str]] = {}
    for module, entries in imports().items():
        if module in FACADES:
            continue
        here = module[: -len(".__init__")] if module.endswith(".__init__") else module
        graph.setdefault(here, set())
        for target, _line, _names in entries:
            target = internal(target) or ""
            if target and target != here and target != ROOT:
                graph[here].add(target)
    # A package's __init__ imports its children; a child importing its own package's
    # __init__ (``from . import x``) is not a cycle through that package's other children.
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + "."):
                continue  # a package importing its own submodule
            if node.startswith(nxt + ".") and nxt in graph:
                continue  # a submodule's relative import resolves through its package
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif state.get(nxt) is None:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if state.get(node) is None:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.slow
def test_only_the_adapter_imports_the_mcp_sdk() -> None:
    bad = [f"{module}:{line} imports {target}"
           for module, entries in imports().items() if box_of(module) != "mcp_server"
           for target, line, _ in entries
           if target.split(".")[0] in ("mcp", "anyio", "pydantic", "starlette", "uvicorn", "httpx", "httpx2")]
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_no_module_imports_another_modules_private_names() -> None:
    bad = []
    for module, entries in imports().items():
        for target, line, names in entries:
            if not internal(target):
                continue
            same_box_private_module = target.rsplit(".", 1)[-1].startswith("_") and box_of(target) == box_of(module)
            for name in names:
                if name.startswith("_") and not name.startswith("__") and not same_box_private_module:
                    if (PACKAGE.parent / Path(*f"{target}.{name}".split("."))).with_suffix(".py").exists():
                        continue  # a private module of this box (game/pygame/_hooks.py), not a private name
                    bad.append(f"{module}:{line} imports {name} from {target}")
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_each_tool_family_stands_alone() -> None:
    """A tool is one unit in its family's module: a family imports no other family and not
    the table, nothing under core/tools/ imports the Bridge (a handler is given it as a
    Host), and of the rest of core/ only the Bridge (the table) and host.py (the unit's
    type) import the tools."""
    found = imports()
    modules = {m[: -len(".__init__")] if m.endswith(".__init__") else m for m in found}
    assert FAMILIES | TOOLS_SHARED | {f"{TOOLS}.table"} <= modules, "core/tools/ lost a module this test names"
    assert {m for m in modules if m.startswith(TOOLS + ".")} == FAMILIES | TOOLS_SHARED | {f"{TOOLS}.table"}, \
        "a module under core/tools/ this test does not know: a family goes in FAMILIES, shared code in TOOLS_SHARED"
    bad = []
    for module, entries in found.items():
        for target, line, _names in entries:
            if module in FAMILIES and (target in FAMILIES - {module} or target == f"{TOOLS}.table"):
                bad.append(f"{module}:{line} imports {target} (a family stands alone)")
            if module.startswith(TOOLS + ".") and target == f"{ROOT}.core.bridge":
                bad.append(f"{module}:{line} imports {target} (a tool sees the Bridge as a Host)")
            outside = box_of(module) == "core" and not module.startswith(TOOLS + ".")
            if outside and target.startswith(TOOLS + ".") and (module, target) not in {
                    (f"{ROOT}.core.bridge", f"{TOOLS}.table"), (f"{ROOT}.core.bridge", f"{TOOLS}.unit"),
                    (f"{ROOT}.core.host", f"{TOOLS}.unit")}:
                bad.append(f"{module}:{line} imports {target} (core reaches the tools through the table)")
    assert not bad, "\n".join(bad)


def test_every_tool_is_defined_in_a_family() -> None:
    from game_bridge_mcp.core.tools.table import BRIDGE_TOOLS, TOOLS as ADVERTISED

    for tool in ADVERTISED + BRIDGE_TOOLS:
        assert tool.handler.__module__ in FAMILIES, f"{tool.name}: served from {tool.handler.__module__}, not a family"


def test_no_box_holds_more_than_about_a_dozen_modules() -> None:
    for directory in [PACKAGE, *[p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()]]:
        modules = [p for p in directory.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 13, f"{directory.name}/ holds {len(modules)} modules: split it into boxes"
