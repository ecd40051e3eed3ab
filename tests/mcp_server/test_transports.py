"""Transports behind one interface: every row of the table names a module whose TRANSPORT
implements serving.Transport under the row's name, and whatever else a transport needs is
there (its option in the parser and the Config, its environment variable in the help, its
documentation); the configuration chooses exactly one. The one shutdown path runs a
transport's shutdown once, whatever ends it."""

from __future__ import annotations

import importlib
import inspect
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from game_bridge_mcp.cli.main import ENVIRONMENT_HELP
from game_bridge_mcp.config import Config, build_parser, parse_cli
from game_bridge_mcp.mcp_server import serving
from game_bridge_mcp.mcp_server.transports import TRANSPORTS, chosen

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # importing the HTTP transport (uvicorn, starlette) takes a second
@pytest.mark.parametrize("row", TRANSPORTS, ids=[row.name for row in TRANSPORTS])
def test_every_row_is_a_whole_transport(row: Any) -> None:
    module = importlib.import_module(f"game_bridge_mcp.mcp_server.{row.module}")
    implementation = getattr(module, "TRANSPORT", None)
    assert implementation is not None, f"game_bridge_mcp.mcp_server.{row.module} has no TRANSPORT (its serving.Transport class)"
    assert inspect.isclass(implementation) and issubclass(implementation, serving.Transport), \
        f"{row.module}.TRANSPORT is not a serving.Transport"
    assert not inspect.isabstract(implementation), \
        f"{row.module}.TRANSPORT does not implement {sorted(implementation.__abstractmethods__)}"
    assert implementation.name == row.name, f"{row.module}.TRANSPORT.name is {implementation.name!r}, its row {row.name!r}"
    docs = (ROOT / "docs" / "cli.md").read_text() + (ROOT / "README.md").read_text()
    if row.option is None:
        return
    assert row.field in Config.__dataclass_fields__, f"Config has no field {row.field!r} for {row.option}"
    assert row.option in build_parser().format_help(), f"the parser has no {row.option}"
    assert row.environment and row.environment in ENVIRONMENT_HELP, f"--help's environment lists no {row.environment}"
    assert row.option in docs, f"neither docs/cli.md nor the README documents {row.option}"


def test_the_configuration_chooses_one_transport() -> None:
    assert [row for row in TRANSPORTS if row.option is None] == [TRANSPORTS[-1]], "one default, last"
    assert len({row.name for row in TRANSPORTS}) == len(TRANSPORTS)
    assert chosen(parse_cli([], {}).config).name == "stdio"
    assert chosen(parse_cli(["--http", "0"], {}).config).name == "http"
    assert chosen(parse_cli([], {"GAME_BRIDGE_HTTP": "127.0.0.1:0"}).config).name == "http"


class Recorded(serving.Transport):
    """A transport that records what the runner does with it."""

    name = "recorded"

    def __init__(self, config: Config, *, fail: bool = False) -> None:
        super().__init__(config)
        self.fail = fail
        self.calls: list[str] = []
        self.serving = threading.Event()

    def start(self) -> None:
        self.calls.append("start")

    async def serve(self, tasks: anyio.abc.TaskGroup) -> None:
        self.calls.append("serve")
        self.serving.set()
        if self.fail:
            raise RuntimeError("broken")
        await anyio.sleep_forever()

    def shutdown(self) -> None:
        self.calls.append("shutdown")


def test_stop_ends_serving_through_the_one_shutdown_path() -> None:
    transport = Recorded(Config(environ={}))
    outcome: list[int] = []
    thread = threading.Thread(target=lambda: outcome.append(serving.run(transport, exit_process=False)))
    thread.start()
    assert transport.serving.wait(30)
    transport.stop()  # from another thread
    thread.join(30)
    assert outcome == [0] and transport.calls == ["start", "serve", "shutdown"]


def test_an_error_while_serving_still_shuts_down(monkeypatch: Any) -> None:
    exits: list[int] = []

    def no_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(serving.os, "_exit", no_exit)
    transport = Recorded(Config(environ={}), fail=True)
    with pytest.raises(SystemExit):
        serving.run(transport, exit_process=False)
    assert exits == [1] and transport.calls == ["start", "serve", "shutdown"]
