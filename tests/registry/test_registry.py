"""The instance registry: directory resolution, the reader's rules on every bad kind of
file, and the writer's promises (atomic, never raises, removes only its own entry)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from game_bridge_mcp.paths import registry_dir, registry_home
from game_bridge_mcp.registry import reader as registry
from game_bridge_mcp.registry import (
    RegistryEntry, is_loopback_literal, pid_alive, prune_entry, read_registry, register_instance)

REPO = Path(__file__).resolve().parents[2]


def write_entry(directory: Path, doc: Any, name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if name is None:
        name = f"{doc['pid']}.json"
    path = directory / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def good(pid: int = 4242, port: int = 7820, **extra: Any) -> dict[str, Any]:
    doc = {"name": "Orbital Freight", "version": "0.9.2", "protocol": 1, "port": port,
           "pid": pid, "host": "127.0.0.1", "started": "2026-08-20T22:27:19.774Z",
           "cwd": "/home/dev/checkouts/main"}
    doc.update(extra)
    return doc


def dead_pid() -> int:
    """A pid that existed a moment ago and has been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --------------------------------------------------------------------------- directory

def test_registry_dir_precedence() -> None:
    env = {"HOME": "/home/dev", "GAME_BRIDGE_HOME": "/gb", "GAME_BRIDGE_INSTANCES": "/gbi"}
    assert registry_dir(env, "/override") == Path("/override")
    assert registry_dir(env) == Path("/gbi")
    del env["GAME_BRIDGE_INSTANCES"]
    assert registry_dir(env) == Path("/gb/instances")
    del env["GAME_BRIDGE_HOME"]
    assert registry_dir(env) == Path("/home/dev/.game-bridge/instances")


def test_registry_dir_empty_values_count_as_unset_and_tilde_expands() -> None:
    env = {"HOME": "/home/dev", "GAME_BRIDGE_INSTANCES": "", "GAME_BRIDGE_HOME": "~/gbh"}
    assert registry_dir(env) == Path("/home/dev/gbh/instances")
    assert registry_dir(env, "") == Path("/home/dev/gbh/instances")
    assert registry_dir(env, "~/x") == Path("/home/dev/x")


def test_registry_home_is_the_parent() -> None:
    assert registry_home({"HOME": "/h"}) == Path("/h/.game-bridge")
    assert registry_home({"GAME_BRIDGE_HOME": "/gb"}) == Path("/gb")
    assert registry_home({}, "/a/b/instances") == Path("/a/b")


# --------------------------------------------------------------------------- reading

def test_missing_or_unusable_directory_is_an_empty_scan(tmp_path: Path) -> None:
    scan = read_registry(tmp_path / "nope")
    assert scan.entries == [] and scan.problems == [] and "does not exist" in (scan.note or "")
    afile = tmp_path / "afile"
    afile.write_text("x")
    scan = read_registry(afile)
    assert scan.entries == [] and scan.note


def test_a_good_entry_is_read_typed(tmp_path: Path) -> None:
    path = write_entry(tmp_path, good(extra_field={"future": True}))
    scan = read_registry(tmp_path)
    assert scan.problems == [] and scan.ignored_hosts == []
    assert scan.entries == [RegistryEntry(
        path=path, port=7820, pid=4242, host="127.0.0.1", name="Orbital Freight",
        version="0.9.2", protocol=1, started="2026-08-20T22:27:19.774Z",
        cwd="/home/dev/checkouts/main")]


def test_only_port_and_pid_are_required(tmp_path: Path) -> None:
    write_entry(tmp_path, {"port": 7801, "pid": 99})
    (entry,) = read_registry(tmp_path).entries
    assert (entry.port, entry.pid, entry.host, entry.name, entry.cwd) == (7801, 99, "127.0.0.1", None, None)


BAD_DOCS: list[tuple[str, Any, str | None, str]] = [
    ("malformed", '{"port": 7820, "pid": 5,', "5.json", "not valid JSON"),
    ("empty", "", "6.json", "is empty"),
    ("array", "[1, 2]", "7.json", "not a JSON object"),
    ("string", '"hello"', "8.json", "not a JSON object"),
    ("no-port", {"pid": 9}, None, "'port' is missing"),
    ("no-pid", {"port": 7820}, "10.json", "'pid' is missing"),
    ("port-string", {"port": "7820", "pid": 11}, None, "'port' must be an integer"),
    ("port-bool", {"port": True, "pid": 12}, None, "'port' must be an integer"),
    ("port-zero", {"port": 0, "pid": 13}, None, "'port' must be an integer 1-65535"),
    ("port-high", {"port": 70000, "pid": 14}, None, "'port' must be an integer 1-65535"),
    ("port-float", {"port": 7820.0, "pid": 15}, None, "'port' must be an integer"),
    ("pid-negative", {"port": 7820, "pid": -3}, "16.json", "'pid' must be a positive integer"),
    ("pid-string", {"port": 7820, "pid": "17"}, "17.json", "'pid' must be a positive integer"),
    ("name-number", good(pid=18, name=5), None, "'name' must be a string"),
    ("version-number", good(pid=19, version=0.9), None, "'version' must be a string"),
    ("protocol-string", good(pid=20, protocol="1"), None, "'protocol' must be a positive integer"),
    ("host-list", good(pid=21, host=["127.0.0.1"]), None, "'host' must be a string"),
    ("cwd-object", good(pid=22, cwd={"a": 1}), None, "'cwd' must be a string"),
    ("pid-mismatch", good(pid=23), "24.json", "disagrees with its pid 23"),
    ("not-a-pid-name", good(pid=25), "orbital.json", "is not '<pid>.json'"),
    ("not-utf8", b"\xff\xfe{}".decode("latin-1"), "26.json", None),
    ("deep", "[" * 60_000, "27.json", "nested too deeply"),
    ("nan-port", '{"port": NaN, "pid": 28}', "28.json", "NaN"),
]


@pytest.mark.parametrize("label,doc,name,reason", BAD_DOCS, ids=[b[0] for b in BAD_DOCS])
def test_each_bad_kind_is_a_problem_with_a_reason(tmp_path: Path, label: str, doc: Any,
                                                  name: str | None, reason: str | None) -> None:
    write_entry(tmp_path, good(pid=1))  # a good neighbour keeps being read
    if label == "not-utf8":
        (tmp_path / name).write_bytes(b'{"port": 7820, "pid": 26, "name": "\xff"}')
    else:
        write_entry(tmp_path, doc, name)
    scan = read_registry(tmp_path)
    assert [e.pid for e in scan.entries] == [1]
    (problem,) = scan.problems
    assert problem.path.name == (name or f"{doc['pid']}.json")
    assert problem.reason
    if reason:
        assert reason in problem.reason
    assert "path" in problem.to_dict() and "reason" in problem.to_dict()


def test_problems_carry_port_and_pid_when_known(tmp_path: Path) -> None:
    write_entry(tmp_path, good(pid=23), "24.json")
    (problem,) = read_registry(tmp_path).problems
    assert (problem.port, problem.pid) == (7820, 23)
    assert problem.to_dict()["port"] == 7820


def test_oversize_file_is_refused_without_being_parsed(tmp_path: Path) -> None:
    write_entry(tmp_path, good(pid=30, cwd="x" * 70_000))
    (problem,) = read_registry(tmp_path).problems
    assert "over the 65536-byte limit" in problem.reason
    write_entry(tmp_path, good(pid=30, cwd="x" * 5000))
    assert "longer than" in read_registry(tmp_path).problems[0].reason
    assert read_registry(tmp_path, max_bytes=100).problems[0].reason.endswith("limit for an entry")


def test_symlinks_fifos_and_directories_are_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text(json.dumps(good(pid=40)))
    reg = tmp_path / "instances"
    reg.mkdir()
    (reg / "40.json").symlink_to(elsewhere)
    (reg / "41.json").symlink_to(reg / "missing")
    os.mkfifo(reg / "42.json")  # opening a FIFO for reading would block: must not
    (reg / "43.json").mkdir()
    scan = read_registry(reg)
    reasons = {p.path.name: p.reason for p in scan.problems}
    assert scan.entries == []
    assert "symbolic link" in reasons["40.json"] and "elsewhere.txt" in reasons["40.json"]
    assert "symbolic link" in reasons["41.json"]
    assert "not a regular file" in reasons["42.json"]
    assert "not a regular file" in reasons["43.json"]


def test_temp_and_other_files_are_ignored_silently(tmp_path: Path) -> None:
    write_entry(tmp_path, good(pid=50))
    (tmp_path / ".50.abcd.tmp").write_text("{half")
    (tmp_path / ".51.json").write_text("{half")
    (tmp_path / "52.json.tmp").write_text("{half")
    (tmp_path / "README.txt").write_text("notes")
    scan = read_registry(tmp_path)
    assert [e.pid for e in scan.entries] == [50] and scan.problems == []


@pytest.mark.parametrize("host", ["10.255.255.1", "localhost", "2130706433", "0x7f.1",
                                  "example.com", "0.0.0.0", "", "127.1", "::ffff:10.0.0.1"])
def test_non_loopback_hosts_are_ignored_with_a_reason(tmp_path: Path, host: str) -> None:
    write_entry(tmp_path, good(pid=60, host=host))
    scan = read_registry(tmp_path)
    assert scan.entries == [] and scan.problems == []
    (ignored,) = scan.ignored_hosts
    assert ignored.host == host and ignored.port == 7820 and "no connection" in ignored.reason


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]"])
def test_loopback_literals_are_accepted(tmp_path: Path, host: str) -> None:
    assert is_loopback_literal(host)
    write_entry(tmp_path, good(pid=61, host=host))
    assert [e.host for e in read_registry(tmp_path).entries] == [host]


def test_max_files_caps_the_read_and_says_so(tmp_path: Path) -> None:
    for pid in range(1, 13):
        write_entry(tmp_path, good(pid=pid, port=7000 + pid))
    scan = read_registry(tmp_path, max_files=10)
    assert len(scan.entries) == 10
    (problem,) = scan.problems
    assert problem.path == tmp_path and "12 entry files" in problem.reason


def test_unreadable_file_is_a_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_entry(tmp_path, good(pid=70))
    real_open = os.open

    def failing_open(path: Any, flags: int, *args: Any) -> int:
        if str(path).endswith("70.json"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(registry.os, "open", failing_open)
    (problem,) = read_registry(tmp_path).problems
    assert "cannot be read (Permission denied)" in problem.reason


# --------------------------------------------------------------------------- writing

def test_register_instance_writes_a_readable_entry(tmp_path: Path) -> None:
    env = {"GAME_BRIDGE_HOME": str(tmp_path / "gb")}
    reg = register_instance(port=7820, name="Orbital Freight", version="0.9.2", environ=env,
                            remove_at_exit=False)
    assert reg is not None and reg.path == tmp_path / "gb" / "instances" / f"{os.getpid()}.json"
    assert stat.S_IMODE(os.stat(reg.path.parent).st_mode) == 0o700
    doc = json.loads(reg.path.read_text())
    assert list(doc) == ["name", "version", "protocol", "port", "pid", "host", "started", "cwd"]
    assert doc["started"].endswith("Z") and doc["cwd"] == os.getcwd()
    (entry,) = read_registry(reg.path.parent).entries
    assert (entry.name, entry.version, entry.port, entry.pid) == ("Orbital Freight", "0.9.2", 7820, os.getpid())
    assert sorted(os.listdir(reg.path.parent)) == [reg.path.name]  # no temp left behind
    assert reg.remove() is True and not reg.path.exists()
    assert reg.remove() is False  # idempotent


def test_register_instance_honours_instances_env_and_explicit_pid(tmp_path: Path) -> None:
    reg = register_instance(port=7821, name="G", version="1", pid=777, cwd="/w",
                            environ={"GAME_BRIDGE_INSTANCES": str(tmp_path / "i"),
                                     "GAME_BRIDGE_HOME": str(tmp_path / "ignored")},
                            remove_at_exit=False)
    assert reg is not None and reg.path == tmp_path / "i" / "777.json"
    assert json.loads(reg.path.read_text())["cwd"] == "/w"


@pytest.mark.parametrize("make_env", [
    lambda tmp: {"GAME_BRIDGE_INSTANCES": str(tmp / "afile" / "instances")},  # under a file
    lambda tmp: {"GAME_BRIDGE_HOME": str(tmp / "afile")},
    lambda tmp: {"GAME_BRIDGE_INSTANCES": str(tmp / "afile")},  # the dir is a file
])
def test_register_instance_never_raises_on_an_unwritable_directory(
        tmp_path: Path, make_env: Any, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "afile").write_text("not a directory")
    assert register_instance(port=7820, name="G", version="1", environ=make_env(tmp_path)) is None
    assert "could not write the instance entry" in caplog.text
    assert (tmp_path / "afile").read_text() == "not a directory"


@pytest.mark.parametrize("kwargs", [{"port": 0}, {"port": "7820"}, {"port": 7820, "pid": -1},
                                    {"port": 7820, "protocol": object()}])
def test_register_instance_never_raises_on_bad_arguments(tmp_path: Path, kwargs: dict) -> None:
    env = {"GAME_BRIDGE_INSTANCES": str(tmp_path)}
    assert register_instance(name="G", version="1", environ=env, remove_at_exit=False, **kwargs) is None
    assert os.listdir(tmp_path) == []


def test_a_failed_rename_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_replace(*_a: Any) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(registry.os, "replace", broken_replace)
    assert register_instance(port=7820, name="G", version="1",
                             environ={"GAME_BRIDGE_INSTANCES": str(tmp_path)}) is None
    assert os.listdir(tmp_path) == []


def test_writes_are_atomic_for_a_concurrent_reader(tmp_path: Path) -> None:
    env = {"GAME_BRIDGE_INSTANCES": str(tmp_path)}
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            scan = read_registry(tmp_path)
            seen.extend(p.reason for p in scan.problems)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(300):
            reg = register_instance(port=7820, name="G" * (i % 50 + 1), version=str(i),
                                    cwd="/x" * (i % 200), environ=env, remove_at_exit=False)
            assert reg is not None
    finally:
        stop.set()
        thread.join()
    assert seen == []
    assert [p.name for p in tmp_path.iterdir()] == [f"{os.getpid()}.json"]


def test_remove_leaves_a_file_that_is_no_longer_ours(tmp_path: Path) -> None:
    reg = register_instance(port=7820, name="G", version="1", pid=900,
                            environ={"GAME_BRIDGE_INSTANCES": str(tmp_path)}, remove_at_exit=False)
    assert reg is not None
    reg.path.write_text(json.dumps(good(pid=901)))  # someone else's content under our name
    assert reg.remove() is False and reg.path.exists()


def test_remove_never_raises_when_the_file_is_gone_or_unreadable(tmp_path: Path) -> None:
    reg = register_instance(port=7820, name="G", version="1", pid=902,
                            environ={"GAME_BRIDGE_INSTANCES": str(tmp_path)}, remove_at_exit=False)
    assert reg is not None
    reg.path.unlink()
    assert reg.remove() is False
    reg2 = register_instance(port=7820, name="G", version="1", pid=903,
                             environ={"GAME_BRIDGE_INSTANCES": str(tmp_path)}, remove_at_exit=False)
    assert reg2 is not None
    reg2.path.write_text("{broken")
    assert reg2.remove() is False and reg2.path.exists()


def _run_game_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent("""
        import os, sys, signal
        sys.path.insert(0, {repo!r})
        from game_bridge_mcp.registry import register_instance
        reg = register_instance(port=7820, name="G", version="1",
                                environ={{"GAME_BRIDGE_INSTANCES": {dir!r}}})
        assert reg is not None
        print(reg.path, flush=True)
    """).format(repo=str(REPO), dir=str(tmp_path)) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)


def test_clean_exit_removes_the_entry_and_a_kill_leaves_it(tmp_path: Path) -> None:
    clean = _run_game_script(tmp_path, "sys.exit(0)\n")
    assert clean.returncode == 0, clean.stderr
    assert not Path(clean.stdout.strip()).exists()
    killed = _run_game_script(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)\n")
    assert killed.returncode == -9
    assert Path(killed.stdout.strip()).exists()  # the stale file readers must expect


def test_a_forked_child_exiting_does_not_remove_the_parents_entry(tmp_path: Path) -> None:
    result = _run_game_script(tmp_path, """
        child = os.fork()
        if child == 0:
            sys.exit(0)          # runs the inherited atexit handlers in the child
        os.waitpid(child, 0)
        print(os.path.exists(reg.path), flush=True)
        os._exit(0)              # skip our own atexit so the file survives for the check
    """)
    assert result.returncode == 0, result.stderr
    path, still_there = result.stdout.split()
    assert still_there == "True" and Path(path).exists()


# --------------------------------------------------------------------------- liveness and pruning

def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(dead_pid())
    assert not pid_alive(0) and not pid_alive(-5)


def test_prune_entry_deletes_only_a_dead_unchanged_entry(tmp_path: Path) -> None:
    gone = dead_pid()
    write_entry(tmp_path, good(pid=gone))
    write_entry(tmp_path, good(pid=os.getpid(), port=7821))
    entries = {e.pid: e for e in read_registry(tmp_path).entries}
    assert prune_entry(entries[os.getpid()]) is False  # alive: kept
    assert (tmp_path / f"{os.getpid()}.json").exists()
    # rewritten since it was read (e.g. a new game reusing the pid on another port): kept
    write_entry(tmp_path, good(pid=gone, port=7999))
    assert prune_entry(entries[gone]) is False and (tmp_path / f"{gone}.json").exists()
    write_entry(tmp_path, good(pid=gone))
    assert prune_entry(entries[gone]) is True and not (tmp_path / f"{gone}.json").exists()
    assert prune_entry(entries[gone]) is False  # already gone: no error


# --------------------------------------------------------------------------- a directory full of junk

@pytest.mark.slow
def test_ten_thousand_junk_files_do_not_hide_a_live_game(tmp_path: Path) -> None:
    from game_bridge_mcp.config import Config
    from game_bridge_mcp.discovery.report import discover
    from peers.fakegame import FakeGame

    junk = json.dumps(good(pid=999_999_999, port=1))
    for index in range(10_000):  # sorts before any real pid's name
        (tmp_path / f"{index:010d}.json").write_text(junk)
    with FakeGame() as game:
        write_entry(tmp_path, good(pid=os.getpid(), port=game.port))  # named <pid>.json, as writers do
        scan = read_registry(tmp_path)
        assert any(e.port == game.port for e in scan.entries)
        report = discover(Config(environ={}, registry_dir=tmp_path, scan=False))
    assert [r["port"] for r in report["live"]] == [game.port]
    if scan.cut_short:  # on a slow machine the time bound ends the read: then it says so
        assert "cut short" in report["registryNote"]


def test_a_read_cut_short_by_time_or_count_says_so(tmp_path: Path) -> None:
    for pid in range(2, 40):
        write_entry(tmp_path, good(pid=pid + 4_000_000, port=7000 + pid))
    scan = read_registry(tmp_path, time_budget_s=0.0)
    assert scan.cut_short and "cut short" in (scan.note or "") and "38 entry files" in scan.note  # type: ignore[operator]
    assert any(p.path == tmp_path and "read 0 of them" in p.reason for p in scan.problems)
    scan = read_registry(tmp_path, max_files=5)
    assert scan.cut_short and len(scan.entries) == 5 and "the first 5 files" in (scan.note or "")
    assert not read_registry(tmp_path).cut_short
