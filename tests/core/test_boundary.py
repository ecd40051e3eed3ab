"""Every piece of game text reaches the agent through one sanitiser at one boundary:
a game whose every text is hostile (``peers/hostile_text.py``) is
driven through the real MCP client over every channel, and each whole answer (text
blocks, parsed and raw, structuredContent, progress notifications) is scanned for
control, bidirectional and zero-width characters.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from game_bridge_mcp.config import Config
from game_bridge_mcp.core.boundary import clean_answer, clean_error
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.errors import BridgeUsageError
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from launch_helpers import ProcessGuard, write_declaration
from mcp_harness import connect, dump, is_error
from peers.hostile import routed
from peers.hostile_text import EVIL, HostileTextGame, evil, forbidden

pytestmark = pytest.mark.timeout(120)


def strings(value: Any) -> list[str]:
    """Every string in ``value``, keys included; a string that is JSON, parsed as well."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            if item[:1] in "{[":
                try:
                    stack.append(json.loads(item))
                except ValueError:
                    pass
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


class Scanner:
    def __init__(self) -> None:
        self.seen: set[str] = set()  # channels that reached an answer
        self.answers = 0

    def scan(self, what: str, value: Any) -> None:
        self.answers += 1
        for text in strings(value):
            bad = forbidden(text)
            assert not bad, f"{what}: {bad} reached the agent in {text[:200]!r}"
            self.seen.update(re.findall(r"([A-Za-z]+):A", text))


@pytest.mark.parametrize("eager", [False, True])
def test_every_channel_of_a_game_reaches_the_agent_clean(serve: Any, eager: bool) -> None:
    game = HostileTextGame()
    peer = serve(routed(game.routes()))  # type: ignore[arg-type]
    app = BridgeServer(Bridge(Config(port=peer.port, scan=False, registry=False, eager=eager)))
    scanner = Scanner()
    calls = [
        ("list_toolsets", {}),
        ("describe_toolset", {"name": "play"}),
        ("describe_toolset", {"name": "passthrough"}),
        ("call_tool", {"name": "add"}),                                   # ok, with a result
        ("call_tool", {"name": "drop", "arguments": {"x": 1}}),           # CommandFailed
        ("call_tool", {"name": "teleport"}),                              # rejected, with the list
        ("call_tool", {"name": "get_state"}),                             # the whole /state
        ("call_tool", {"name": "get_state", "arguments": {"summary": True}}),
        ("call_tool", {"name": "get_health"}),
        ("call_tool", {"name": "wait_for", "arguments": {"event": "eventM", "timeoutMs": 2000}}),
        ("call_tool", {"name": "wait_for", "arguments": {"path": "ui.screen", "changes": True, "timeoutMs": 50}}),
        ("call_tool", {"name": "get_screenshot"}),                        # 503 with a reason
        ("list_instances", {}),
    ]
    if eager:  # the flat tools --eager adds come in by the same door
        calls += [(f"p{peer.port}_drop", {"x": 1}), (f"p{peer.port}_add", {}), ("get_state", {})]

    async def main() -> None:
        async with connect(app) as client:
            listed = await client.list_tools()
            scanner.scan("tools/list", dump(listed))
            for name, args in calls:
                result = await client.call_tool(name, args)
                scanner.scan(f"{name} {args}", dump(result))
    anyio.run(main)
    wanted = {"screen", "uiText", "label", "gameKey", "gameValue", "eventM", "failure", "rejected",
              "commandName", "resultKey", "resultValue", "healthKey", "healthValue", "nested",
              "eventField", "eventKey", "gameName", "gameDescription", "toolDescription", "screenshotReason"}
    assert wanted <= scanner.seen, f"channels that never reached an answer: {sorted(wanted - scanner.seen)}"


@pytest.mark.slow
def test_a_launched_games_name_version_log_and_progress_reach_the_agent_clean(
        tmp_path: Path, guard: ProcessGuard) -> None:
    def arg(channel: str) -> str:  # a command line cannot carry NUL; everything else it can
        return evil(channel).replace("\x00", "")

    decl = write_declaration(tmp_path, "--boot-delay", "0.7", "--name", arg("launchName"),
                             "--version", arg("launchVersion"),
                             # the log keeps what follows a carriage return, as a terminal shows it
                             "--say", arg("logLine").replace("\r", ""))
    crash = write_declaration(tmp_path / "crash", "--say", arg("crashLine").replace("\r", ""), "--crash", "3")
    scanner = Scanner()
    progress: list[Any] = []

    async def on_progress(done: float, total: Any, message: Any) -> None:
        progress.append(message)

    def session(declaration: Path, calls: list[tuple[str, dict]]) -> None:
        config = Config(environ=guard.env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                        declaration=load_declaration(declaration))
        bridge = Bridge(config)

        async def main() -> None:
            async with connect(BridgeServer(bridge)) as client:
                port = None
                for name, args in calls:
                    if port is not None and name != "list_instances":
                        args = {"port": port, **args}
                    result = await client.call_tool(name, args, progress_callback=on_progress)
                    scanner.scan(name, dump(result))
                    if name == "launch_instance" and not is_error(result):
                        port = json.loads(result.content[0].text)["port"]
        try:
            anyio.run(main)
        finally:
            bridge.shutdown()

    session(decl, [("launch_instance", {"timeoutMs": 10000}), ("instance_log", {}), ("list_instances", {}),
                   ("stop_instance", {})])
    session(crash, [("launch_instance", {"timeoutMs": 10000})])
    scanner.scan("progress", progress)
    assert {"launchName", "launchVersion", "logLine", "crashLine"} <= scanner.seen, sorted(scanner.seen)


def test_the_boundary_copies_only_what_it_must_change() -> None:
    clean = {"a": ["b", 1, 2.5, None, True], "é": {"日本": "x\ny\tz"}}
    assert clean_answer(clean) is clean
    dirty = {"k\u202e": [EVIL, float("inf"), (1, "\x07")], "n": 1e308 * 10}
    cleaned = clean_answer(dirty)
    assert cleaned == {"k": ["AB[31mCDEFGHIJK\nL\nMNOPQRST", None, [1, ""]], "n": None}
    assert dirty["n"] != dirty["n"] or dirty["n"] == float("inf")  # the original is left as it was
    deep: Any = "\x07"
    for _ in range(5000):
        deep = [deep]
    flat = clean_answer(deep)
    for _ in range(5000):
        flat = flat[0]
    assert flat == ""
    error = clean_error(BridgeUsageError(f"bad {EVIL}", answer={"error": EVIL}))
    assert not forbidden(error.message) and not forbidden(json.dumps(error.to_dict(), ensure_ascii=False))
    other = clean_error(KeyError(EVIL))
    assert not forbidden(str(other))


def test_check_shows_a_hostile_game_on_a_terminal_without_its_escapes(serve: Any) -> None:
    """``check`` quotes what the game sent (tool names, errors, bodies) to a person at a
    terminal: no escape sequence, control or invisible character of the game's gets there."""
    import io

    from game_bridge_mcp.check.runner import main as check_main

    game = HostileTextGame()
    peer = serve(routed(game.routes()))  # type: ignore[arg-type]
    out, err = io.StringIO(), io.StringIO()
    check_main(["--port", str(peer.port), "--no-close", "--command", "add"], stdout=out, stderr=err, environ={})
    text = out.getvalue() + err.getvalue()
    assert "tools:A" in text or ":AB" in text, text[:2000]  # game text is quoted, cleaned
    for line in text.splitlines():
        assert not forbidden(line), (forbidden(line), line[:200])
