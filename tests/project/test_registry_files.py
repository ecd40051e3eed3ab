"""The MCP Registry's files: ``server.json`` valid against the registry's own schema (kept in
``registry_schema/``, see its SOURCE.md) and agreeing with the package, and the README's
``mcp-name`` marker, by which the registry checks that the PyPI package is this server's."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import game_bridge_mcp

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).resolve().parent / "registry_schema" / "server.schema.json"


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def problems(doc: Any) -> list[str]:
    schema = load(SCHEMA)
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(doc)]


def test_server_json_is_valid_against_the_registry_schema_it_names() -> None:
    doc = load(ROOT / "server.json")
    assert doc["$schema"] == load(SCHEMA)["$id"]
    assert problems(doc) == []


@pytest.mark.parametrize("change, expected", [
    (lambda d: d.pop("description"), "'description' is a required property"),
    (lambda d: d.update(description="x" * 101), "is too long"),
    (lambda d: d.update(name="game-bridge-mcp"), "does not match"),
    (lambda d: d["packages"][0].update(version="latest"), "should not be valid"),
    (lambda d: d["packages"][0].update(transport={"type": "carrier-pigeon"}), "is not valid under any"),
])
def test_the_schema_check_catches_what_the_registry_would_refuse(change: Any, expected: str) -> None:
    doc = copy.deepcopy(load(ROOT / "server.json"))
    change(doc)
    found = problems(doc)
    assert any(expected in p for p in found), found


def test_server_json_says_what_the_package_is() -> None:
    doc = load(ROOT / "server.json")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # (no tomllib on 3.10)
    name = re.search(r'^name = "([^"]+)"$', pyproject, re.M)
    assert name is not None
    [package] = doc["packages"]
    assert doc["version"] == package["version"] == game_bridge_mcp.__version__
    assert (package["registryType"], package["identifier"]) == ("pypi", name.group(1))
    assert package["registryBaseUrl"] == "https://pypi.org"  # the only PyPI the registry accepts
    assert (package["runtimeHint"], package["transport"]) == ("uvx", {"type": "stdio"})
    assert f'\n{name.group(1)} = "game_bridge_mcp.' in pyproject  # the console script `uvx game-bridge-mcp` runs
    documented = set(re.findall(r"`(GAME_BRIDGE_[A-Z_]+)`", (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")))
    for variable in package["environmentVariables"]:
        assert variable["name"] in documented, variable["name"]


def test_the_readme_carries_the_registrys_mcp_name_marker() -> None:
    """The registry reads ``mcp-name: NAME`` in the package's description on PyPI (the
    README) to tie the package to ``server.json``'s name; scripts/check_dist.py checks the
    built wheel's metadata holds it too."""
    name = load(ROOT / "server.json")["name"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"mcp-name: (\S+)", readme) == [name]
    assert f"<!-- mcp-name: {name} -->" in readme.split("\n## ", 1)[0]  # at the top, and not shown
