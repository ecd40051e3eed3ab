"""Files the launcher writes cannot be planted: whatever sits at a port's lock path (a
symlink, a directory, a FIFO, a hard link to a file of yours) makes that port skipped
with a note, never an InternalError, and is never followed, truncated or written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from game_bridge_mcp.errors import BridgeUsageError
from launch_helpers import LauncherFactory, free_range, write_declaration

pytestmark = pytest.mark.timeout(60)


def lock_path(launchers: LauncherFactory, port: int) -> Path:
    locks = launchers.registry_dir.parent / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return locks / f"port-{port}.lock"


def test_planted_lock_paths_are_skipped_with_a_note_and_never_touched(tmp_path: Path, launchers: LauncherFactory) -> None:
    low, high = free_range(5)
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")
    before = os.stat(victim)
    lock_path(launchers, low).symlink_to(victim)
    lock_path(launchers, low + 1).mkdir()
    os.mkfifo(lock_path(launchers, low + 2))
    os.link(victim, lock_path(launchers, low + 3))
    launcher = launchers(write_declaration(tmp_path / "game", port_range=(low, high)))
    result = launcher.launch()
    assert result["port"] == high
    notes = " | ".join(result["notes"])
    for port, what in ((low, "symbolic link"), (low + 1, "directory"), (low + 2, "not a regular file"),
                       (low + 3, "hard link")):
        assert f"port {port} skipped" in notes and what in notes, notes
    assert victim.read_text() == "precious\n" and os.stat(victim).st_mtime_ns == before.st_mtime_ns
    assert lock_path(launchers, low).is_symlink() and lock_path(launchers, low + 1).is_dir()
    launcher.stop(result["port"], grace_ms=1000)


def test_an_explicit_port_with_a_planted_lock_path_is_a_usage_error(tmp_path: Path, launchers: LauncherFactory) -> None:
    low, high = free_range(2)
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")
    lock_path(launchers, low).symlink_to(victim)
    launcher = launchers(write_declaration(tmp_path / "game", port_range=(low, high)))
    with pytest.raises(BridgeUsageError) as info:
        launcher.launch(port=low)
    assert "symbolic link" in info.value.message and str(lock_path(launchers, low)) in info.value.message
    assert victim.read_text() == "precious\n"
