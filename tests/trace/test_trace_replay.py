"""Record and replay, end to end: a session recorded over MCP (the real client) against the
demo game, replayed with ``game-bridge-mcp replay`` against a fresh instance (the same),
a changed build (a readable divergence), a build that crashes (an error, not a hang), a
different game (refused, then ``--force``), and broken traces; the report opened in a
real browser."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest

from game_bridge_mcp.cli.main import main as cli_main
from game_bridge_mcp.cli.replay import main as replay_main
from game_bridge_mcp.config import Config
from game_bridge_mcp.core.bridge import Bridge
from game_bridge_mcp.launch.declaration import load_declaration
from game_bridge_mcp.mcp_server.adapter import BridgeServer
from game_bridge_mcp.trace.format import FORMAT, VERSION
from game_bridge_mcp.trace.reader import read_trace
from browser import count_colour, dump_dom, read_png, screenshot
from launch_helpers import GAME, PYTHON, VARIANT, ProcessGuard, declaration
from mcp_harness import connect, data

pytestmark = pytest.mark.timeout(120)

MOVES = [0, 0, 1, -1]
RED, GREEN = (198, 40, 40), (46, 125, 50)


class Session:
    """One recording of an agent's session, shared by the tests of this module."""

    def __init__(self, root: Path, guard: ProcessGuard) -> None:
        self.root = root
        self.guard = guard
        self.env = dict(guard.env, GAME_BRIDGE_HOME=str(root / "home"))
        self.project = root / "project"
        self.decl = declaration(self.project)
        self.trace = root / "session.trace"
        self.answers: list[Any] = []

    def record(self) -> None:
        config = Config(environ=self.env, registry_dir=self.root / "home" / "instances", scan_range=(1,),
                        declaration=load_declaration(self.decl), record=self.trace)
        bridge = Bridge(config)

        async def agent() -> None:
            async with connect(BridgeServer(bridge)) as client:
                async def call(tool: str, args: dict[str, Any]) -> Any:
                    answer = data(await client.call_tool(tool, args))
                    self.answers.append(answer)
                    return answer

                port = (await call("launch_instance", {}))["port"]
                await call("list_toolsets", {"port": port})
                await call("call_tool", {"port": port, "name": "click", "arguments": {"label": "Start"}})
                for x in MOVES:
                    # the answer when the fruit has come to rest: the game runs free, and a fruit in
                    # flight is wherever the machine's speed had it (a loaded run replayed it a row lower)
                    await call("call_tool", {"port": port, "name": "drop", "arguments": {"x": x},
                                             "until": {"path": "game.moving", "equals": 0, "timeoutMs": 15000}})
                    await call("call_tool", {"port": port, "name": "wait_for",
                                             "arguments": {"path": "game.moving", "equals": 0, "timeoutMs": 15000}})
                await call("call_tool", {"port": port, "name": "get_state", "arguments": {"summary": True}})
                await call("call_tool", {"port": port, "name": "get_state"})
                await call("stop_instance", {"port": port})
        try:
            anyio.run(agent)
        finally:
            bridge.shutdown()

    def replay(self, *args: str, decl: Path | None = None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        argv = [str(args[0]) if args and args[0].endswith(".trace") else str(self.trace)]
        argv += [a for a in args if not a.endswith(".trace")]
        if "--port" not in args:
            argv += ["--launch", "--config", str(decl or self.decl)]
        code = replay_main(argv, stdout=out, stderr=err, environ=self.env)
        return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    root = tmp_path_factory.mktemp("replay")
    guard = ProcessGuard(root)
    recorded = Session(root, guard)
    recorded.record()
    yield recorded
    guard.check()


def step_of(session: Session, name: str, nth: int = 1) -> int:
    """The step number of the ``nth`` call_tool ``name`` in the recording."""
    calls = [c for c in read_trace(session.trace).calls if c.name == name]
    return calls[nth - 1].step


# ----------------------------------------------------------------------------- recording

@pytest.mark.slow
def test_the_recording_has_a_header_and_one_line_per_call(session: Session) -> None:
    lines = [json.loads(x) for x in session.trace.read_text().splitlines()]
    assert lines[0]["format"] == FORMAT and lines[0]["version"] == VERSION and lines[0]["recorder"] == "serve"
    calls = lines[1:]
    assert len(calls) == len(session.answers) == 3 + 2 * len(MOVES) + 3
    assert [c["tool"] for c in calls[:3]] == ["launch_instance", "list_toolsets", "call_tool"]
    assert calls[-1]["tool"] == "stop_instance"
    port = session.answers[0]["port"]
    drop = calls[3]
    assert (drop["name"], drop["port"], drop["arguments"]) == ("drop", port, {"x": 0})
    assert drop["answer"] == session.answers[3]  # what the agent got, exactly
    assert isinstance(drop["durationMs"], float) and drop["time"].endswith("Z")
    game = drop["game"]
    assert (game["name"], game["version"]) == ("Fruit Merge", session.answers[0]["version"])
    assert game["cwd"] == str(session.project) and game["paused"] is False
    assert game["declaration"]["path"] == str(session.decl) and game["declaration"]["argv"][1] == str(VARIANT)
    assert calls[0]["answer"]["port"] == port and calls[0]["port"] == port
    full = calls[-2]
    assert full["name"] == "get_state" and "board" in full["answer"]["game"]


def test_call_records_with_the_environment_variable_too(session: Session, tmp_path: Path) -> None:
    trace = tmp_path / "call.trace"
    env = dict(session.env, GAME_BRIDGE_RECORD=str(trace))
    # nothing listens on port 1: the call fails, and the failure is what gets recorded
    import game_bridge_mcp.cli.call as call_cli

    err = io.StringIO()
    code = call_cli.main(["get_health", "--port", "1"], stdout=io.StringIO(), stderr=err, environ=env)
    assert code == 3
    code = call_cli.main(["drop", '{"x": 1}', "--port", "1", "--record", str(trace)], stdout=io.StringIO(),
                         stderr=io.StringIO(), environ=session.env)
    assert code == 3
    calls = read_trace(trace).calls
    assert [(c.tool, c.name, c.port) for c in calls] == [("call_tool", "get_health", 1), ("call_tool", "drop", 1)]
    assert calls[0].error is not None and calls[0].error["error"] == "GameOffline" and calls[0].error["exitCode"] == 3
    assert calls[1].arguments == {"x": 1} and json.loads(trace.read_text().splitlines()[0])["recorder"] == "call"


def test_a_trace_that_cannot_be_written_never_breaks_a_call(session: Session, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = Config(environ=session.env, record=blocker / "x.trace", scan_range=(1,))
    bridge = Bridge(config)
    app = BridgeServer(bridge)

    async def agent() -> list[Any]:
        async with connect(app) as client:
            return [data(await client.call_tool("list_instances", {"scan": False})) for _ in range(3)]

    try:
        answers = anyio.run(agent)
    finally:
        bridge.shutdown()
    assert len(answers) == 3 and all("live" in a for a in answers)
    assert capsys.readouterr().err.count("not recording to") == 1


# ----------------------------------------------------------------------------- replay

@pytest.mark.slow
def test_a_fresh_instance_replays_the_same(session: Session) -> None:
    report = session.root / "same.html"
    code, out, err = session.replay("--report", str(report))
    assert code == 0, out + err
    assert "SAME: every replayed answer matches the recording." in out
    assert f"{2 * len(MOVES) + 3} of {2 * len(MOVES) + 3} replayed calls matched" in out
    assert "3 session call(s)" in out and report.is_file()


def test_a_changed_build_diverges_where_the_rules_changed(session: Session) -> None:
    report = session.root / "diverged.html"
    code, out, err = session.replay("--report", str(report),
                                    decl=declaration(session.root / "double", variant="double-score"))
    assert code == 1, out + err
    # the second cherry merges with the first: that drop's result (docs/contract.md, results)
    # already says what it scores, so the divergence is found at the move that caused it
    step = step_of(session, "drop", 2)
    assert f'DIVERGED at step {step} of {len(session.answers)}: drop {{"x": 0}}' in out
    assert "  result.scoreGained\n    recorded: 3\n    replayed: 6\n" in out
    assert "not run after the divergence" in out


@pytest.mark.slow
def test_ignore_paths_make_the_changed_build_pass(session: Session) -> None:
    decl = declaration(session.root / "double2", variant="double-score")
    ignored = ["**.score", "**.best", "**.scoreGained", "**.elements", "**.events", "ui.text", "text"]  # text: the digest's ui.text
    code, out, err = session.replay(*[w for path in ignored for w in ("--ignore", path)], decl=decl)
    assert code == 0, out + err
    assert "Ignored paths: **.frame," in out and ", ".join(ignored) in out


@pytest.mark.slow
def test_a_game_that_dies_mid_replay_is_an_error_with_its_output(session: Session) -> None:
    code, out, err = session.replay(decl=declaration(session.root / "crash", variant="crash-on-drop:3"))
    assert code == 3, out + err
    step = step_of(session, "drop", 3)
    assert f'FAILED at step {step} of {len(session.answers)}: drop {{"x": 1}}' in out
    assert "segmentation fault" in out  # the game's own last words, from its log
    assert err.startswith("GameOffline:")


def test_a_different_game_is_refused_unless_forced(session: Session) -> None:
    other = declaration(session.root / "other", game=[PYTHON, str(GAME), "--port", "{port}", "--name", "Other Game"])
    code, out, err = session.replay(decl=other)
    assert code == 2
    assert "the recording was made against game 'Fruit Merge', this instance is 'Other Game'" in err
    assert "--force" in err
    code, out, err = session.replay("--force", decl=other)
    assert code == 1, out + err
    assert "replaying anyway (--force)" in out and "DIVERGED at step" in out


@pytest.mark.slow
def test_replay_against_a_running_instance_by_port(session: Session) -> None:
    config = Config(environ=session.env, registry_dir=session.root / "home" / "instances",
                    declaration=load_declaration(session.decl))
    bridge = Bridge(config)
    try:
        port = bridge.run_tool("launch_instance", {})["port"]
        code, out, err = session.replay("--port", str(port))
        assert code == 0, out + err
        code, out, err = session.replay("--port", str(port), "--port", "9")
        assert code == 2 and "give --port once for each" in err
    finally:
        bridge.shutdown()


@pytest.mark.slow
def test_update_writes_a_new_recording_that_then_replays_the_same(session: Session) -> None:
    copy = session.root / "update.trace"
    copy.write_bytes(session.trace.read_bytes())
    double = declaration(session.root / "double3", variant="double-score")
    code, out, err = session.replay(str(copy), "--update", decl=double)
    assert code == 0, out + err
    assert "UPDATED at step" in out and f"Wrote the replay's answers to {copy}" in out
    assert read_trace(copy).header["recorder"] == "replay --update"
    code, out, err = session.replay(str(copy), decl=double)
    assert code == 0, out + err
    code, out, err = session.replay(str(copy))  # and now the shipped rules are the change
    assert code == 1


# ----------------------------------------------------------------------------- bad input

def test_broken_traces_are_usage_errors_that_say_what_is_wrong(session: Session) -> None:
    text = session.trace.read_text()
    cases = {
        "truncated": (text[: len(text) - 40], "is truncated"),
        "garbage": (text.replace("\n", "\nnot json at all\n", 1), "not JSON: line 2"),
        "newer": (text.replace(f'"version":{VERSION}', f'"version":{VERSION + 5}', 1), "Upgrade game-bridge-mcp"),
    }
    for name, (content, expected) in cases.items():
        path = session.root / f"{name}.trace"
        path.write_text(content)
        code, out, err = session.replay(str(path))
        assert code == 2, (name, out, err)
        assert expected in err and out == "", (name, err)


def test_usage_errors(session: Session) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert replay_main([str(session.trace)], stdout=out, stderr=err, environ=session.env) == 2
    assert "--port N (a running game) or --launch" in err.getvalue()
    assert replay_main([], stdout=out, stderr=err, environ=session.env) == 2
    assert replay_main(["--help"], stdout=out, stderr=err, environ=session.env) == 0
    assert "exit codes: 0 same, 1 diverged" in out.getvalue()
    nothing = session.root / "nothing.trace"
    nothing.write_text(session.trace.read_text().splitlines()[0] + "\n")
    assert replay_main([str(nothing), "--port", "1"], stdout=out, stderr=err, environ=session.env) == 2
    assert "nothing to replay" in err.getvalue()
    # and through the top-level command line
    sys_argv_code = cli_main(["replay", "--help"])
    assert sys_argv_code == 0


# ----------------------------------------------------------------------------- the report, in a browser

@pytest.mark.slow
def test_the_reports_render_in_a_real_browser(session: Session, tmp_path: Path) -> None:
    same, diverged = session.root / "same.html", session.root / "diverged.html"
    if not same.is_file() or not diverged.is_file():  # run on its own: make them
        assert session.replay("--report", str(same))[0] == 0
        assert session.replay("--report", str(diverged),
                              decl=declaration(tmp_path / "d", variant="double-score"))[0] == 1
    for page in (same, diverged):
        html = page.read_text()
        assert "default-src 'none'" in html
        for attr in ("src=", "href="):
            for chunk in html.split(attr)[1:]:
                assert chunk[1:].startswith(("data:", "#")), f"{page.name} refers outside itself: {chunk[:60]}"
        assert "<script" not in html and "@import" not in html and "url(" not in html
    dom = dump_dom(diverged, tmp_path / "profile")
    step = step_of(session, "drop", 2)
    assert '<span class="verdict diverged" id="verdict">DIVERGED</span>' in dom
    assert f'<li class="step diverged" id="step-{step}">' in dom
    assert "<td>result.scoreGained</td><td>3</td><td>6</td>" in dom
    assert dom.count('<li class="step same"') == step - 3  # the calls before it but launch and list_toolsets
    assert dom.count('<li class="step not-run"') == len(session.answers) - step - 1
    assert '<span class="verdict same" id="verdict">SAME</span>' in dump_dom(same, tmp_path / "profile")
    shot = screenshot(diverged, tmp_path / "profile", tmp_path / "diverged.png", size="900,900")
    width, height, rows = read_png(shot)
    assert (width, height) == (900, 900)
    assert count_colour(rows, RED) > 2000  # the banner and the divergence's frame: drawn, not only in the DOM
    assert count_colour(rows, GREEN) > 100  # the steps that matched, on the strip
    os.replace(shot, session.root / "diverged.png")  # kept for a person to look at


# ----------------------------------------------------------------------------- a paused game

@pytest.mark.slow
def test_a_session_on_a_paused_game_replays_frame_for_frame(tmp_path: Path, guard: ProcessGuard) -> None:
    """The clock stopped from the start: the simulation frame is deterministic, so it is
    compared, and a replay must start paused too."""
    env = dict(guard.env, GAME_BRIDGE_HOME=str(tmp_path / "home"))
    decl = declaration(tmp_path / "paused")
    doc = json.loads(decl.read_text())
    doc["launch"]["env"] = {"GAME_BRIDGE_START_PAUSED": "1"}
    decl.write_text(json.dumps(doc))
    trace = tmp_path / "paused.trace"
    config = Config(environ=env, registry_dir=tmp_path / "home" / "instances", scan_range=(1,),
                    declaration=load_declaration(decl), record=trace)
    bridge = Bridge(config)

    async def agent() -> list[Any]:
        async with connect(BridgeServer(bridge)) as client:
            port = data(await client.call_tool("launch_instance", {}))["port"]

            async def play(name: str, arguments: dict[str, Any]) -> Any:
                return data(await client.call_tool("call_tool", {"port": port, "name": name, "arguments": arguments}))

            seen = [await play("click", {"label": "Start"})]
            for x in (0, 0):
                seen.append(await play("drop", {"x": x}))
                seen.append(await play("step", {"frames": 40}))
                seen.append(await play("get_state", {"summary": True}))
            await client.call_tool("stop_instance", {"port": port})
            return seen
    try:
        seen = anyio.run(agent)
    finally:
        bridge.shutdown()
    assert seen[-1]["paused"] is True and seen[-1]["simFrame"] == 80 and seen[-1]["game"]["merges"] == 1
    calls = read_trace(trace).calls
    assert calls[1].game["paused"] is True and read_trace(trace).started_paused(calls[1].port or 0)

    def replay(*args: str, declaration_file: Path = decl) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = replay_main([*args, "--config", str(declaration_file)], stdout=out, stderr=err, environ=env)
        return code, out.getvalue(), err.getvalue()

    code, out, err = replay(str(trace), "--launch")
    assert code == 0, out + err
    assert "paused (recorded on" in out and "**.simFrame" not in out  # compared, not ignored
    # a recorded simulation frame that a replay cannot reproduce is a divergence
    edited = tmp_path / "edited.trace"
    edited.write_text(trace.read_text().replace('"simFrame":80', '"simFrame":81'))
    code, out, err = replay(str(edited), "--launch")
    # (the first difference is the step's own result, {"simFrame": ...}, or the digest's)
    assert code == 1 and "simFrame\n    recorded: 81\n    replayed: 80\n" in out, out + err
    # the same game from a declaration that does not start it paused: the replay launches it
    # with launch_instance {paused: true}, so its frames line up all the same (a game found
    # running is refused: test_trace_compare.py)
    running = declaration(tmp_path / "running")
    code, out, err = replay(str(trace), "--launch", declaration_file=running)
    assert code == 0 and "paused (recorded on" in out and "SAME" in out, out + err
