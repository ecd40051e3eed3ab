"""The README's and docs/' commands work as written, top to bottom, so the docs cannot drift;
and the README's tools and docs/cli.md's options are the code's.

The pages are README.md, then every docs/*.md by name. The convention: the line right
above a ```` ```bash ```` fence says what this test does with the block:

* ``<!-- runnable -->``: run as it stands;
* ``<!-- runnable: demo game on 7820 -->``: run while the demo game serves (this test
  starts ``python -m game_bridge_mcp.game.demo --start`` on a free port, in a round, as the
  blocks before it leave the game, and puts that port where the block says 7820);
* ``<!-- not run: REASON -->``: not run, and why (a real MCP client, Claude Code, pipx).

Every ``bash`` block has one, except in docs/performance.md: those are the benchmarks
(``scripts/bench.py``; the tests in tests/bench/ run them in ``--quick`` mode).

How the blocks run: a scratch directory holds ``game-bridge-mcp/``, a copy of this
checkout's files (git's tracked and untracked-but-not-ignored ones, what a clone of this
working tree would hold), so ``cd game-bridge-mcp`` reads as it does for a newcomer. Each
block is one ``bash -e`` (it stops at the first command that fails), run in the scratch
directory, in page order, with ``GAME_BRIDGE_HOME`` inside it, no ``GAME_BRIDGE_*`` of the
caller's, and the process guard's token, so anything a block leaves running is found.

* The install block makes a fresh venv and installs from the package indexes pip is set up
  with: nothing is faked or skipped (about 30 s here).
* The blocks after it run with that venv's ``bin`` first on PATH and ``VIRTUAL_ENV`` set,
  as ``. .venv/bin/activate`` would.
* The test block reuses that ``.venv`` (``python3 -m venv .venv`` keeps an existing one), so
  only the test extra is installed on top, as for a reader who ran both blocks; every
  package of the extra is then imported with that venv's Python. Its ``pytest -q`` is
  narrowed with ``PYTEST_ADDOPTS`` to two quick files: the whole suite is what .ci/run runs,
  with the same command (checked below), and here it would run this test inside itself.
* The demo, ``check --launch`` and the launcher claim a port as they do for a user, but find
  the demo declaration's range (7820-7839) taken: this test holds the range's port locks in
  the blocks' home, as another bridge of the same user would, so the launcher takes a port
  the OS gives (its own fallback) and two runs of the suite never meet on a fixed port.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from game_bridge_mcp.launch.declaration import DEFAULT_PORT_RANGE
from game_bridge_mcp.launch.portlock import PortLock
from game_bridge_mcp.paths import locks_dir, make_dirs
from launch_helpers import ProcessGuard
from ports import free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The pages whose blocks run: the README first, then docs/ by name.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*(runnable(?::\s*(?P<kind>[^>]*?))?|not run:\s*(?P<why>[^>]+?))\s*-->")
DEMO_GAME = "demo game on 7820"
#: Pages whose bash blocks are benchmarks, run by the tests in tests/bench/ instead.
EXEMPT_PAGES = {"docs/performance.md"}
#: What the test block's pytest runs here (the whole suite is .ci/run's).
INNER_TESTS = "tests/project/test_layout.py tests/cli/test_cli_help.py"
#: The test extra's packages, as imported.
TEST_EXTRA_MODULES = ("pytest", "pytest_timeout", "xdist", "mypy", "pygame", "PIL", "playwright", "gymnasium",
                      "ale_py", "minigrid", "nle", "crafter", "jsonschema", "uv")


@dataclass
class Block:
    page: str  # relative to the checkout: README.md, docs/clock.md
    line: int  # of the fence
    section: str  # the "## " heading it is under
    marker: str | None  # None, "runnable", "not run"
    kind: str  # the runnable kind ("" or DEMO_GAME), or the reason not run
    text: str


def readme_blocks() -> list[Block]:
    """Every bash block of the README and docs/, in page order."""
    return [block for page in PAGES for block in page_blocks(page)]


def page_blocks(path: Path) -> list[Block]:
    page = path.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if line.strip() == "```bash":
            found = MARKER.fullmatch(lines[i - 1].strip()) if i else None
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            marker = kind = None
            if found:
                marker = "not run" if found.group("why") else "runnable"
                kind = found.group("why") or found.group("kind") or ""
            blocks.append(Block(page, i + 1, section.split(":")[0].split(" (")[0], marker, (kind or "").strip(),
                                "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        i += 1
    return blocks


def test_every_bash_block_is_run_or_says_why_not() -> None:
    blocks = readme_blocks()
    assert any(b.page.startswith("docs/") and b.marker == "runnable" for b in blocks)  # docs/ is read
    unmarked = [f"{b.page} line {b.line} ({b.section})" for b in blocks if b.marker is None and b.page not in EXEMPT_PAGES]
    assert not unmarked, f"bash blocks with no <!-- runnable --> or <!-- not run: why --> above: {unmarked}"
    kinds = {b.kind for b in blocks if b.marker == "runnable"}
    assert kinds <= {"", DEMO_GAME}, kinds
    runnable = [b for b in blocks if b.marker == "runnable"]
    assert "pip install -e .\n" in runnable[0].text and "game-bridge-mcp demo" in runnable[0].text  # install first
    assert any(".venv/bin/python -m pytest -q" in b.text for b in runnable)
    assert all(b.kind for b in blocks if b.marker == "not run")


def test_the_kit_example_on_the_page_is_the_example_file() -> None:
    """docs/game-side.md shows examples/catch_stars.py whole, so what a reader copies runs
    (the bash block after it launches the file and checks it)."""
    text = (ROOT / "docs" / "game-side.md").read_text(encoding="utf-8")
    shown = text.split("## Make your Python game drivable", 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]
    assert shown + "\n" == (ROOT / "examples" / "catch_stars.py").read_text(encoding="utf-8")
    assert "cp game-bridge-mcp/examples/catch_stars.py" in text


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs, in each of its venvs, the pytest command the README's test block runs."""
    block = next(b for b in readme_blocks() if b.marker == "runnable" and "pytest" in b.text)
    command = next(line for line in block.text.splitlines() if "-m pytest" in line)
    assert command.startswith(".venv/bin/python ")
    in_ci = '"$venv/bin/python" ' + command[len(".venv/bin/python "):]
    assert in_ci in (ROOT / ".ci" / "run").read_text(), f"{in_ci!r} is not what .ci/run runs"


def section(path: Path, heading: str) -> str:
    """The text under ``## heading`` of a page, up to the next ``## ``."""
    text = path.read_text(encoding="utf-8")
    assert f"\n## {heading}\n" in text, f"{path.name} has no '## {heading}'"
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_every_environment_variable_the_package_reads_is_documented() -> None:
    names: set[str] = set()
    for path in (ROOT / "game_bridge_mcp").rglob("*.py"):
        names.update(re.findall(r"\bGAME_BRIDGE_[A-Z][A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    options = section(ROOT / "docs" / "cli.md", "Options")
    missing = sorted(name for name in names if f"`{name}`" not in options)
    assert not missing, f"not in docs/cli.md's Options section: {missing}"


def test_every_option_of_every_command_is_documented() -> None:
    from game_bridge_mcp.check.runner import build_parser as check_parser
    from game_bridge_mcp.cli.demo import build_parser as demo_parser
    from game_bridge_mcp.cli.replay import build_parser as replay_parser
    from game_bridge_mcp.config import build_parser as server_parser

    options = section(ROOT / "docs" / "cli.md", "Options")
    missing = []
    for parser in (server_parser(), check_parser(), demo_parser(), replay_parser()):
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", options):
                    missing.append(f"{parser.prog} {flag}")
    assert not missing, f"not in docs/cli.md's Options section: {missing}"


def test_the_readmes_tools_are_the_tool_table() -> None:
    """The README's table of tools and its list of the bridge toolset are the code's, with
    every argument (optional ones marked ``?``), in the table's order."""
    from game_bridge_mcp.core.tools.table import BRIDGE_TOOLS, TOOLS

    tools = section(README, "The tools")
    rows = [line.split("|")[1:3] for line in tools.splitlines() if line.startswith("| `")]
    assert [name.strip().strip("`") for name, _ in rows] == [tool.name for tool in TOOLS]
    for (_, documented), tool in zip(rows, TOOLS):
        required = set(tool.input_schema.get("required", ()))
        expected = [f"`{name}`" if name in required else f"`{name}?`" for name in tool.input_schema["properties"]]
        assert [arg.strip() for arg in documented.split(",") if arg.strip()] == expected, tool.name
    listing = tools.split("The bridge's own toolset", 1)[1].split("\n\n", 1)[0]
    found = [m.start() for tool in BRIDGE_TOOLS for m in [re.search(rf"`{tool.name}`", listing)] if m]
    assert len(found) == len(BRIDGE_TOOLS) and found == sorted(found), "the bridge toolset, in the table's order"
    for tool, start, end in zip(BRIDGE_TOOLS, found, [*found[1:], len(listing)]):
        about = listing[start:end]
        for name in tool.input_schema["properties"]:
            if name != "port":
                assert f"`{name}" in about, f"{tool.name}: {name} is not listed"


# --------------------------------------------------------------------------- running them

def copy_checkout(target: Path) -> None:
    """The checkout's files as a clone of this working tree would have them."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True, timeout=60).stdout
        names = [name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        names = []
    if not names:  # not a git checkout: everything but environments and build leftovers
        shutil.copytree(ROOT, target, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", ".venv*", "__pycache__", "*.egg-info", "build", "dist", ".pytest_cache"))
        return
    for name in names:
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def base_env(scratch: Path, guard: ProcessGuard) -> dict[str, str]:
    """A newcomer's shell: no venv active, none of the caller's GAME_BRIDGE_ settings."""
    own_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in guard.env.items()
           if not k.startswith("GAME_BRIDGE_") and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME",
                                                               "PYTEST_ADDOPTS", "PYTHONDONTWRITEBYTECODE")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != own_bin)
    env["GAME_BRIDGE_HOME"] = str(scratch / "gb")
    return env


def run_block(block: Block, scratch: Path, env: dict[str, str], text: str | None = None) -> str:
    try:
        out = subprocess.run(["bash", "-e", "-c", text or block.text], cwd=str(scratch), env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=400)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.page} line {block.line} ({block.section}) did not finish: {exc}")
    both = out.stdout + out.stderr
    assert out.returncode == 0, (f"{block.page} line {block.line} ({block.section}) failed with {out.returncode}:\n"
                                 f"{block.text}\n--- output (last 4000 characters) ---\n{both[-4000:]}")
    return both


def health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def run_with_demo_game(block: Block, scratch: Path, env: dict[str, str], python: Path) -> str:
    port = free_port()
    game = subprocess.Popen([str(python), "-m", "game_bridge_mcp.game.demo", "--port", str(port), "--start"],
                            cwd=str(scratch), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not health(port):
            assert game.poll() is None and time.monotonic() < deadline, "the demo game did not come up"
            time.sleep(0.02)
        return run_block(block, scratch, env, re.sub(r"\b7820\b", str(port), block.text))
    finally:
        if game.poll() is None:  # a block that ends with a close has ended it already
            game.terminate()
        game.wait(timeout=30)


@contextmanager
def default_range_taken(env: dict[str, str]) -> Iterator[None]:
    """Hold the port locks of the demo declaration's range in the blocks' home, as another
    bridge of this user launching there would: what the blocks launch goes to a port the OS
    gives, never to one another run of the suite (or the developer's own game) may be on."""
    directory = locks_dir(env)
    make_dirs(directory)
    held = [PortLock.try_acquire(directory, port) for port in range(DEFAULT_PORT_RANGE[0], DEFAULT_PORT_RANGE[1] + 1)]
    try:
        assert all(lock is not None for lock in held), "a fresh home's port locks were taken"
        yield
    finally:
        for lock in held:
            if lock is not None:
                lock.release()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_top_to_bottom(tmp_path: Path, guard: ProcessGuard) -> None:
    scratch = tmp_path
    checkout = scratch / "game-bridge-mcp"
    copy_checkout(checkout)
    env = base_env(scratch, guard)
    with default_range_taken(env):
        run_the_blocks(scratch, checkout, env)


def run_the_blocks(scratch: Path, checkout: Path, env: dict[str, str]) -> None:
    runnable = [b for b in readme_blocks() if b.marker == "runnable"]
    venv = checkout / ".venv"
    ran: list[str] = []
    for block in runnable:
        block_env = dict(env)
        if venv.is_dir():  # installed by the blocks before: as if activated
            block_env["VIRTUAL_ENV"] = str(venv)
            block_env["PATH"] = os.pathsep.join([str(venv / "bin"), env["PATH"]])
        if "-m pytest" in block.text:
            block_env["PYTEST_ADDOPTS"] = INNER_TESTS
        if block.kind == DEMO_GAME:
            assert venv.is_dir(), "a block that needs the demo game comes before the install"
            output = run_with_demo_game(block, scratch, block_env, venv / "bin" / "python")
        else:
            output = run_block(block, scratch, block_env)
        if "game-bridge-mcp demo" in block.text and "--init" not in block.text:
            assert "stopped: closed cleanly" in output and "Done in" in output, output[-3000:]
            up = re.search(r"is up on port (\d+)", output)
            assert up and not DEFAULT_PORT_RANGE[0] <= int(up.group(1)) <= DEFAULT_PORT_RANGE[1], output[-3000:]
        if "check --launch" in block.text:
            assert "0 failed" in output and "The game conforms." in output, output[-3000:]
        if "-m pytest" in block.text:
            assert re.search(r"\b\d+ passed\b", output) and " failed" not in output, output[-3000:]
            imported = subprocess.run([str(venv / "bin" / "python"), "-c",
                                       f"import {', '.join(TEST_EXTRA_MODULES)}"], env=block_env,
                                      capture_output=True, text=True, timeout=120)
            assert imported.returncode == 0, imported.stderr
        ran.append(f"{block.page}:{block.line}")
    assert len(ran) == len(runnable) >= 5
    # What the blocks said they would leave behind, they did:
    assert (scratch / "gamebridge.json").is_file()  # demo --init, here
    assert (scratch / "board.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # call get_screenshot --out
    assert '"game-bridge-trace"' in (scratch / "run.trace").read_text()  # GAME_BRIDGE_RECORD=run.trace call


def test_every_page_the_code_and_docs_cite_exists() -> None:
    """A ``docs/<page>.md`` named in the package, the tests, the scripts or the docs is a page
    of this checkout, and nothing cites a contract page the checkout does not have."""
    cited: dict[str, str] = {}
    stale: list[str] = []
    for path in [README, *(ROOT / "docs").glob("*.md"), *(ROOT / "game_bridge_mcp").rglob("*.py"),
                 *(ROOT / "tests").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT).as_posix()
        for page in re.findall(r"\bdocs/([a-z-]+\.md)", text) + (
                re.findall(r"\]\(([a-z-]+\.md)", text) if where.startswith("docs/") else []):
            cited.setdefault(page, where)
        if where != "tests/project/test_readme_commands.py" and re.search(r"extensions\.md|the extensions page", text):
            stale.append(where)
    missing = {page: where for page, where in cited.items() if not (ROOT / "docs" / page).is_file()}
    assert not missing, f"cited but not in docs/: {missing}"
    assert not stale, f"cite a contract page this checkout does not have (use docs/contract.md): {stale}"


def test_the_contract_page_names_every_extension() -> None:
    from game_bridge_mcp import contract

    text = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z]+)` \|", section(ROOT / "docs" / "contract.md", "Any engine: the optional extensions on the wire"), re.M)
    assert tuple(rows) == contract.FEATURES
    for name in (contract.ENV_START_PAUSED, contract.ENV_DEBUG_PORT, contract.FRAME_HEADER, contract.WINDOW_HEADER,
                 contract.CONFIRMED_BY_FRAMES, *contract.DIGEST_KEEPS, *contract.CLOCK_COMMANDS, *contract.INPUT_ARGS):
        assert name in text, name
