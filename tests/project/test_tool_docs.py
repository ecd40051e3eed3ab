"""The docs that list the tools cannot drift from the tool table (core/tools/table.py): the
README's table of tools is checked in test_readme_commands.py; docs/tools.md's list of
every tool is generated from the table (scripts/tool_docs.py) and must be the generated
one; docs/contract.md's names a game's tool may not take are the bridge toolset's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from game_bridge_mcp.contract import BRIDGE_TOOLSET
from game_bridge_mcp.core.tools.table import BRIDGE_TOOLS, TOOLS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import tool_docs  # noqa: E402


def test_docs_tools_lists_every_tool_as_the_table_has_it() -> None:
    found = tool_docs.current((ROOT / "docs" / "tools.md").read_text(encoding="utf-8"))
    assert found is not None, f"docs/tools.md has lost its generated list (its markers: {tool_docs.BEGIN!r})"
    assert found == tool_docs.render(), \
        "docs/tools.md's list of every tool is not the table's: run python scripts/tool_docs.py --write"
    for tool in TOOLS + BRIDGE_TOOLS:
        assert f"**`{tool.name}`**" in found


def test_docs_contract_reserves_the_bridge_toolsets_names() -> None:
    text = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `tools[].name`"))
    listed = re.search(r"not a name of the bridge's own toolset \(([^:]*):", row)
    assert listed, "docs/contract.md's tools[].name row no longer lists the names a game's tool may not take"
    names = re.findall(r"`([a-z_]+)`", listed.group(1))
    assert names == list(BRIDGE_TOOLSET) == [tool.name for tool in BRIDGE_TOOLS], \
        f"docs/contract.md reserves {names}; the bridge toolset is {[tool.name for tool in BRIDGE_TOOLS]}"
