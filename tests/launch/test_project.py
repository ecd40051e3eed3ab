"""gamebridge.json: finding it, every field, every shape tolerated, every error naming
the file and the field."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch.declaration import (DEFAULT_PORT_RANGE, DEFAULT_READY_TIMEOUT_MS, apply_project_config,
                                                find_declaration, load_declaration, parse_declaration)


def write(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def declare(tmp_path: Path, **launch: object) -> Path:
    return write(tmp_path / "gamebridge.json", {"name": "Orbital", "launch": launch})


def test_full_declaration(tmp_path: Path) -> None:
    (tmp_path / "game").mkdir()
    path = declare(tmp_path, command="./gradlew run -PdebugPort={port} --console=plain", cwd="game",
                   portRange="7900-7909", readyTimeoutMs=5000, env={"ORBITAL_DEV": "1", "P": "{port}"},
                   extraArgs=["--level", "two words", "--port={port}"])
    decl = load_declaration(path)
    assert decl.name == "Orbital"
    assert decl.cwd == tmp_path / "game"
    assert decl.port_range == (7900, 7909)
    assert decl.ready_timeout_ms == 5000
    assert dict(decl.env) == {"ORBITAL_DEV": "1", "P": "{port}"}
    assert decl.render_env(7901) == {"ORBITAL_DEV": "1", "P": "7901"}
    command, shell = decl.render(7901)
    assert shell is True
    assert command == "./gradlew run -PdebugPort=7901 --console=plain --level 'two words' --port=7901"
    assert decl.hint() == ("cd " + shlex.quote(str(tmp_path / "game")) + " && ./gradlew run -PdebugPort={port} "
                           "--console=plain --level 'two words' --port={port}")


def test_defaults_and_argv(tmp_path: Path) -> None:
    decl = load_declaration(declare(tmp_path, argv=["./run game", "--port", "{port}"], extraArgs=["x y"]))
    assert decl.port_range == DEFAULT_PORT_RANGE == (7820, 7839)
    assert decl.ready_timeout_ms == DEFAULT_READY_TIMEOUT_MS == 180000
    assert decl.cwd == tmp_path
    assert decl.command is None and decl.argv == ("./run game", "--port", "{port}")
    assert decl.render(7820) == (["./run game", "--port", "7820", "x y"], False)
    assert decl.display(7820) == "'./run game' --port 7820 'x y'"
    assert decl.hint() == "'./run game' --port {port} 'x y'"


@pytest.mark.parametrize("value, expected", [
    ("7820-7825", (7820, 7825)), (" 7820 - 7825 ", (7820, 7825)), ([7820, 7825], (7820, 7825)),
    (["7820", "7825"], (7820, 7825)), ("7830", (7830, 7830)), (7830, (7830, 7830)), (None, (7820, 7839)),
])
def test_port_range_shapes(tmp_path: Path, value: object, expected: tuple[int, int]) -> None:
    assert load_declaration(declare(tmp_path, command="x", portRange=value)).port_range == expected


def test_cwd_is_relative_to_the_file_not_the_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "proj" / "gamebridge.json", {"launch": {"command": "x", "cwd": "../other"}})
    monkeypatch.chdir(tmp_path / "proj")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_declaration(path).cwd == tmp_path / "other"
    assert load_declaration(path).name is None


@pytest.mark.parametrize("launch, field", [
    ({"command": "x", "argv": ["x"]}, "launch.command"),
    ({}, "launch.command"),
    ({"command": 3}, "launch.command"),
    ({"command": "   "}, "launch.command"),
    ({"argv": "x"}, "launch.argv"),
    ({"argv": []}, "launch.argv"),
    ({"argv": ["x", 3]}, "launch.argv[1]"),
    ({"argv": [""]}, "launch.argv[0]"),
    ({"command": "x", "cwd": 5}, "launch.cwd"),
    ({"command": "x", "cwd": ""}, "launch.cwd"),
    ({"command": "x", "portRange": "a-b"}, "launch.portRange"),
    ({"command": "x", "portRange": "7839-7820"}, "launch.portRange"),
    ({"command": "x", "portRange": "0-10"}, "launch.portRange"),
    ({"command": "x", "portRange": [1, 2, 3]}, "launch.portRange"),
    ({"command": "x", "portRange": [7820, 70000]}, "launch.portRange"),
    ({"command": "x", "portRange": True}, "launch.portRange"),
    ({"command": "x", "readyTimeoutMs": "soon"}, "launch.readyTimeoutMs"),
    ({"command": "x", "readyTimeoutMs": 0}, "launch.readyTimeoutMs"),
    ({"command": "x", "readyTimeoutMs": True}, "launch.readyTimeoutMs"),
    ({"command": "x", "readyTimeoutMs": 1.5}, "launch.readyTimeoutMs"),
    ({"command": "x", "env": ["A=1"]}, "launch.env"),
    ({"command": "x", "env": {"A": 1}}, "launch.env.A"),
    ({"command": "x", "env": {"A=B": "1"}}, "launch.env.A=B"),
    ({"command": "x", "extraArgs": "--fast"}, "launch.extraArgs"),
    ({"command": "x", "extraArgs": ["--fast", None]}, "launch.extraArgs[1]"),
])
def test_bad_fields_name_file_and_field(tmp_path: Path, launch: dict, field: str) -> None:
    path = declare(tmp_path, **launch)
    with pytest.raises(BridgeUsageError) as info:
        load_declaration(path)
    assert str(path) in info.value.message
    assert f"'{field}'" in info.value.message
    assert info.value.fields["field"] == field
    assert '"launch"' in info.value.message  # shows a minimal example to copy


@pytest.mark.parametrize("body, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"launch": {"command": "x", "readyTimeoutMs": NaN}}', "NaN"),
    ("[" * 100_000, "nested too deeply"),
    ('{"name": "x"}', "'launch' is missing"),
    ('{"name": 3, "launch": {"command": "x"}}', "'name'"),
    ('{"launch": "make run"}', "'launch' must be an object"),
])
def test_bad_documents(tmp_path: Path, body: str, words: str) -> None:
    path = write(tmp_path / "gamebridge.json", body)
    with pytest.raises(BridgeUsageError) as info:
        load_declaration(path)
    assert str(path) in info.value.message and words in info.value.message


def test_missing_unreadable_and_directory(tmp_path: Path) -> None:
    with pytest.raises(BridgeUsageError, match="does not exist"):
        load_declaration(tmp_path / "nope.json")
    with pytest.raises(BridgeUsageError, match="is a directory"):
        load_declaration(tmp_path)
    path = tmp_path / "gamebridge.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BridgeUsageError, match="UTF-8"):
        load_declaration(path)
    if os.getuid() != 0:  # root reads anything
        locked = declare(tmp_path / "locked", command="x")
        locked.chmod(0)
        with pytest.raises(BridgeUsageError, match="cannot be read"):
            load_declaration(locked)


def test_utf8_bom_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "gamebridge.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"launch": {"command": "x"}}).encode())
    assert load_declaration(path).command == "x"


def test_parse_declaration_is_pure(tmp_path: Path) -> None:
    decl = parse_declaration(tmp_path / "gamebridge.json", {"launch": {"argv": ["a"], "cwd": "sub"}})
    assert decl.cwd == tmp_path / "sub" and decl.argv == ("a",)


def test_find_walks_up(tmp_path: Path) -> None:
    root = declare(tmp_path, command="x")
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert find_declaration(deep) == root
    nearer = declare(tmp_path / "a", command="y")
    assert find_declaration(deep) == nearer
    assert find_declaration(deep / "file-that-does-not-exist.txt") in (nearer, None)
    (tmp_path / "a" / "gamebridge.json").unlink()
    (tmp_path / "a" / "gamebridge.json").mkdir()  # a directory of that name is not a declaration
    assert find_declaration(deep) == root


def test_find_none(tmp_path: Path) -> None:
    lonely = tmp_path / "x"
    lonely.mkdir()
    found = find_declaration(lonely)
    assert found is None or not str(found).startswith(str(tmp_path))


def test_lead_apply_project_config_uses_it(tmp_path: Path) -> None:
    path = declare(tmp_path, command="run {port}")
    sub = tmp_path / "src"
    sub.mkdir()
    config = apply_project_config(Config(environ={}), cwd=sub)
    assert config.declaration is not None and config.declaration.path == path
    assert config.effective_launch_hint() == "run {port}"
    explicit = Config(environ={}, config_file=tmp_path / "missing.json")
    with pytest.raises(BridgeUsageError, match="missing.json"):
        apply_project_config(explicit)
