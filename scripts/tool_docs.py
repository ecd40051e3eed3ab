#!/usr/bin/env python3
"""docs/tools.md's list of every tool, generated from the tool table
(``game_bridge_mcp/core/tools/table.py``): each tool's title, its arguments (optional ones
marked ``?``) and the fields of its answer (from its ``outputSchema``).

    python scripts/tool_docs.py           # print the list
    python scripts/tool_docs.py --write   # put it into docs/tools.md, between its markers

``tests/project/test_tool_docs.py`` fails while docs/tools.md's list is not this one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from game_bridge_mcp.core.tools.table import BRIDGE_TOOLS, TOOLS  # noqa: E402
from game_bridge_mcp.core.tools.unit import ToolDef  # noqa: E402

DOC = ROOT / "docs" / "tools.md"
BEGIN = "<!-- every tool: generated from core/tools/table.py by scripts/tool_docs.py --write; not edited by hand -->"
END = "<!-- end of every tool -->"


def marked(names: list[str], required: set[str]) -> str:
    return ", ".join(f"`{name}`" if name in required else f"`{name}?`" for name in names) or "none"


def resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return resolve(defs[ref.rsplit("/", 1)[1]], defs)
    return schema


def fields(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The properties of an object schema, its ``allOf`` parts' included, in order, and
    which of them are required."""
    schema = resolve(schema, defs)
    names = list(schema.get("properties", {}))
    required = set(schema.get("required", ()))
    for part in schema.get("allOf", ()):
        more, more_required = fields(part, defs)
        names += [name for name in more if name not in names]
        required |= more_required
    return names, required


def answer(tool: ToolDef) -> list[str]:
    schema = tool.output
    defs = schema.get("$defs", {})
    alternatives = schema.get("anyOf")
    if not alternatives:
        names, required = fields(schema, defs)
        return [f"- answer: {marked(names, required)}"]
    lines = ["- answer, one of:"]
    for alternative in alternatives:
        alternative = resolve(alternative, defs)
        names, required = fields(alternative, defs)
        title = str(alternative.get("title", "")).replace("|", "/")
        lines.append(f"  - {title}: {marked(names, required)}" if names else f"  - {title}")
    return lines


def describe(tool: ToolDef) -> list[str]:
    arguments = list(tool.input_schema.get("properties", {}))
    return [f"**`{tool.name}`**: {tool.title}.", "",
            f"- arguments: {marked(arguments, set(tool.input_schema.get('required', ())))}",
            *answer(tool), ""]


def render() -> str:
    """The list, markers included."""
    lines = [BEGIN, "", "The advertised tools:", ""]
    for tool in TOOLS:
        lines += describe(tool)
    lines += ["The bridge's own toolset, reached through `call_tool`:", ""]
    for tool in BRIDGE_TOOLS:
        lines += describe(tool)
    return "\n".join(lines) + END


def current(text: str) -> str | None:
    """docs/tools.md's list as it stands, markers included (None when it has none)."""
    if BEGIN not in text or END not in text:
        return None
    start = text.index(BEGIN)
    return text[start:text.index(END, start) + len(END)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the list into docs/tools.md")
    args = parser.parse_args(argv)
    block = render()
    if not args.write:
        print(block)
        return 0
    text = DOC.read_text(encoding="utf-8")
    found = current(text)
    if found is None:
        print(f"{DOC} has no markers ({BEGIN!r} ... {END!r}); add them where the list goes", file=sys.stderr)
        return 1
    DOC.write_text(text.replace(found, block), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
