"""The wrappers as one family: every row of the table of wrappers (game_bridge_mcp/wrappers.py)
has its package, entry point, command line and docs, so a test names what a new wrapper
forgot; and the family's parts drive an engine that is neither pygame nor a browser (a toy
whose frame is one step and whose input is an action, the shape of a Gymnasium
environment), in-process, through the kit's real HTTP surface."""

from __future__ import annotations

import importlib
import importlib.util
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from game_bridge_mcp.cli.main import SUBCOMMANDS, USAGE, asks_version
from game_bridge_mcp.game.wrapper.frames import Schedule
from game_bridge_mcp.game.wrapper.input import Words, key_command, text_command
from game_bridge_mcp.game.wrapper.main import Cli, main
from game_bridge_mcp.game.wrapper.options import SEED, SIZE, CommandLine, Options, UsageError, declaration
from game_bridge_mcp.game.wrapper.serve import Late, add_commands, assemble, drive
from game_bridge_mcp.game.kit.outcomes import Pending
from game_bridge_mcp.wrappers import WRAPPERS, Wrapper, find
from kit_helpers import doc
from launch_helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("row", WRAPPERS, ids=lambda row: row.name)
def test_every_row_has_its_wrapper_its_command_and_its_docs(row: Wrapper) -> None:
    package = importlib.import_module(row.module)
    assert importlib.util.find_spec(f"{row.module}.__main__") is not None, \
        f"{row.module} has no __main__.py: python -m {row.module} must run it"
    cli = getattr(package, "CLI", None)
    assert isinstance(cli, Cli), f"{row.module} exports no CLI (a game/wrapper/main.py Cli): the family's main runs it"
    assert cli.row is row, f"{row.module}'s CLI is not its row of the table"
    assert set(cli.command_line.all_valued()) == set(row.valued), \
        f"the table's valued options for {row.name} ({sorted(row.valued)}) are not its command line's " \
        f"({sorted(cli.command_line.all_valued())}): the CLI reads -v past them"
    assert row.name in SUBCOMMANDS and f"game-bridge-mcp {row.name} {row.usage}  {row.summary}" in USAGE
    assert callable(package.main)
    for doc_path in ("docs/cli.md", "docs/game-side.md"):
        assert f"game-bridge-mcp {row.name}" in (ROOT / doc_path).read_text(encoding="utf-8"), \
            f"{doc_path} does not say how to use game-bridge-mcp {row.name}"
    assert f"`{row.name}/`" in (ROOT / "docs/design.md").read_text(encoding="utf-8"), \
        f"docs/design.md's table does not name game/{row.name}/"


def test_the_table_is_the_one_list_of_wrappers() -> None:
    assert len({row.name for row in WRAPPERS}) == len(WRAPPERS)
    assert find("pygame") is WRAPPERS[0] and find("nonesuch") is None
    # -v is ours before the game's name, the game's after it (pygame passes its words on).
    assert asks_version("pygame", ["--port", "7820", "-v"]) and not asks_version("pygame", ["g.py", "-v"])
    assert asks_version("browser", ["--size", "800x600", "--version", "page.html"])


# --------------------------------------------------------------------------- a toy engine
@dataclass
class ToyOptions(Options):
    level: str = ""
    seed: int | None = None
    size: tuple[int, int] = (64, 48)


def _level(opts: ToyOptions, words: list[str]) -> None:
    if words[0].startswith("-") or len(words) != 1:
        raise UsageError(f"name one level, after the options (got {' '.join(words)!r})")
    opts.level = words[0]


TOY_LINE = CommandLine(ToyOptions, _level, missing="name the level", valued={**SEED, **SIZE})


def test_the_shared_command_line() -> None:
    opts = TOY_LINE.parse(["--port=7001", "--paused", "--seed", "3", "--size", "10x20", "lvl"], environ={})
    assert (opts.port, opts.paused, opts.seed, opts.size, opts.level) == (7001, True, 3, (10, 20), "lvl")
    assert TOY_LINE.parse(["lvl"], environ={"GAME_BRIDGE_DEBUG_PORT": "7002"}).port == 7002
    assert TOY_LINE.parse(["--help", "--nonsense"], environ={}).help
    for argv, message in ((["--port", "x", "l"], "port number"), (["--seed"], "--seed needs a value"),
                          (["--seed", "1.5", "l"], "whole number"), (["--seed", "-3", "l"], "from 0"), (["--size", "0x9", "l"], "WIDTHxHEIGHT"),
                          (["--paused"], "name the level"), (["--what", "l"], "name one level")):
        with pytest.raises(UsageError, match=message):
            TOY_LINE.parse(argv, environ={})
    made = declaration("game_bridge_mcp.game.toy", "lvl (toy)", ["lvl"], ready_timeout_ms=1000)
    assert made == {"name": "lvl (toy)", "launch": {"argv": ["{python}", "-m", "game_bridge_mcp.game.toy", "--port",
                                                             "{port}", "lvl"], "cwd": ".", "readyTimeoutMs": 1000}}


def test_main_runs_help_init_usage_errors_and_the_game(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[ToyOptions] = []
    row = Wrapper("toy", "LEVEL", "play a toy level")
    cli = Cli(row=row, usage="usage: toy LEVEL\n", command_line=TOY_LINE,
              declaration=lambda o: declaration(row.module, o.level, [o.level], ready_timeout_ms=1000),
              run=lambda o: ran.append(o) or 5, target=lambda o: o.level)
    monkeypatch.chdir(tmp_path)
    assert main(cli, ["--bogus"]) == 2 and "game-bridge-mcp toy: name one level" in capsys.readouterr().err
    assert main(cli, ["-h"]) == 0 and capsys.readouterr().out == "usage: toy LEVEL\n"
    assert main(cli, ["--init", "one"]) == 0 and "launch_instance starts one" in capsys.readouterr().out
    assert json.loads((tmp_path / "gamebridge.json").read_text())["launch"]["argv"][-1] == "one"
    assert main(cli, ["--init", "two"]) == 2 and "pass --force" in capsys.readouterr().err
    assert main(cli, ["--init", "--force", "two"]) == 0
    assert main(cli, ["--seed", "4", "two"]) == 5 and ran[0].seed == 4


def test_the_schedule_delivers_now_before_the_next_frame_and_after_frames() -> None:
    seen: list[str] = []
    later = Schedule(at_once=False, name="toy")
    later.soon(lambda: seen.append("a"))
    later.after_frames(2, lambda: seen.append("c"))
    later.after_frames(1, lambda: seen.append("b"))
    assert seen == [] and later.frames_to_due(99) == 1
    later.deliver(lambda exc: seen.append(f"error {exc}"))
    later.frame_ended()
    assert seen == ["a", "b"] and later.frames_to_due(99) == 1
    later.after_frames(1, lambda: 1 / 0)  # logged, and the rest still runs
    later.frame_ended()
    assert seen == ["a", "b", "c"] and later.frames_to_due(99) == 99
    later.soon(lambda: 1 / 0)
    later.deliver(lambda exc: seen.append(type(exc).__name__))
    assert seen[-1] == "ZeroDivisionError"
    now = Schedule(at_once=True, name="toy")
    now.soon(lambda: seen.append("now"))
    assert seen[-1] == "now"


ACTIONS = {"left": -1, "right": 1}


class Toy:
    """An engine with no loop of its own: each frame is one step by the held action."""

    def __init__(self, bridge: Any) -> None:
        self.bridge = bridge
        self.schedule = Schedule(at_once=True, name="toy")
        self.position = 0
        self.steps = 0
        self.typed = ""
        self.gone: str | None = None
        self.held: dict[int, str] = {}
        self.pointer: tuple[int, int] | None = None

    # the engine, for drive()
    def frames(self, count: int) -> None:
        for _ in range(count):
            self.position += sum(self.held)
            self.steps += 1
            self.bridge.end_sim_frame()
            self.schedule.frame_ended()

    def deliver(self) -> None:
        self.schedule.deliver(lambda exc: None)

    def frames_to_due(self) -> int:
        return self.schedule.frames_to_due(100)

    def idle(self) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return {"toy": {"position": self.position, "steps": self.steps, "typed": self.typed,
                        "held": sorted(self.held.values())}}

    # the devices, for key and text
    def key_code(self, name: str) -> int:
        if name not in ACTIONS:
            raise ValueError(f"unknown key name {name!r}; valid names: {', '.join(ACTIONS)}")
        return ACTIONS[name]

    def key(self, code: int, name: str, down: bool) -> None:
        if down:
            self.held[code] = name
        else:
            self.held.pop(code, None)

    def move(self, x: int, y: int, shown: tuple[int, int]) -> None:
        raise AssertionError("the toy offers no mouse")

    def button(self, button: int, down: bool) -> None:
        raise AssertionError("the toy offers no mouse")

    def text(self, text: str) -> None:
        self.typed += text

    # the frames, for key and text
    def window_size(self) -> tuple[int, int] | None:
        return None

    def pointer_origin(self) -> tuple[int, int]:
        return 0, 0

    def soon(self, action: Callable[[], None]) -> None:
        self.schedule.soon(action)

    def after_frames(self, frames: int, action: Callable[[], None]) -> None:
        self.schedule.after_frames(frames, action)

    def defer(self) -> Pending:
        return self.bridge.defer()  # type: ignore[no-any-return]


TOY_WORDS = Words(key_names="left or right.", frames="steps", key="Hold an action by its key.", mouse="",
                  text="Type text.", area="grid", x_more="", no_area="no grid")


@contextmanager
def toy_served() -> Iterator[tuple[int, Toy]]:
    late = Late()
    bridge = assemble("toy", "1", description="A toy engine.", input_help="Its actions, as keys.", paused=True,
                      state=late.state, on_close=lambda: bridge.request_stop(), register=False)
    toy = Toy(bridge)
    late.engine = toy

    def reset(seed: int = 0) -> dict[str, int]:
        """Start again."""
        toy.position = seed
        return {"position": toy.position}

    add_commands(bridge, [key_command(toy, toy, TOY_WORDS), text_command(toy, toy, TOY_WORDS)])
    add_commands(bridge, [reset], toolset="episode")
    port = bridge.start(0)
    loop = threading.Thread(target=drive, args=(toy, bridge), kwargs={"hz": 200.0, "max_chunk": 50},
                            name="toy-loop", daemon=True)
    loop.start()
    try:
        yield port, toy
    finally:
        bridge.request_stop()
        loop.join(5)
        bridge.stop()
        assert not loop.is_alive()


def send(port: int, query: str) -> int:
    answer = doc(port, "/command?" + query)
    assert answer.get("accepted"), answer
    return int(answer["commandId"])


def outcome(port: int, command_id: int) -> dict[str, Any]:
    state = doc(port, f"/state?after={command_id}&waitMs=10000")
    return next(entry for entry in state["commandResults"] if entry["id"] == command_id)


def test_an_engine_whose_frame_is_a_step_and_whose_input_is_an_action_fits_the_family() -> None:
    with toy_served() as (port, toy):
        tools = doc(port, "/tools")
        names = {tool["name"]: tool for toolset in tools["toolsets"] for tool in toolset["tools"]}
        assert {"key", "text", "reset", "pause", "resume", "step"} <= set(names) and "mouse" not in names
        assert names["key"]["description"] == "Hold an action by its key."
        start = doc(port, "/state")
        assert start["paused"] is True and start["toy"]["steps"] == 0
        bad = outcome(port, send(port, "cmd=key&key=up"))
        assert bad["ok"] is False and "valid names: left, right" in bad["error"]
        press = send(port, "cmd=key&key=right&frames=3")
        assert wait_until(lambda: doc(port, "/state")["toy"]["held"] == ["right"], 10)  # held; its steps owed
        assert doc(port, "/state")["toy"]["steps"] == 0
        send(port, "cmd=step&frames=5")
        done = outcome(port, press)
        assert done["ok"] is True and done["result"] == {"key": "right", "action": "press", "frames": 3}
        assert wait_until(lambda: doc(port, "/state")["toy"]["steps"] == 5, 10)
        state = doc(port, "/state")
        assert state["toy"]["position"] == 3 and state["toy"]["held"] == [] and state["simFrame"] == 5
        typed = send(port, "cmd=text&text=hi")
        send(port, "cmd=step&frames=1")
        assert outcome(port, typed) == {**outcome(port, typed), "ok": True, "result": {"characters": 2}}
        assert doc(port, "/state")["toy"]["typed"] == "hi" and toy.steps == 6
        assert outcome(port, send(port, "cmd=reset&seed=9"))["result"] == {"position": 9}
