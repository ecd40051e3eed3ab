"""What a web page may read and where it may go (issue 38, items 1 and 4): the game's files
answered inside the browser from a fixed address, without dotfiles, listings or links, a
FILE's folder only where the page needs it; every navigation under the rule the page was
opened with. The rules on their own first, then a real page asking in headless Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from game_bridge_mcp.game.browser._files import ORIGIN, Files, folder_served
from game_bridge_mcp.game.browser._network import Network
from launch_helpers import ProcessGuard, wait_until
from web_helpers import PAGES, frames_until, wrapped


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A game folder with what must not leave it, and things outside it to reach for."""
    (tmp_path / "outside.txt").write_text("SECRET OUTSIDE")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.txt").write_text("SECRET ELSEWHERE")
    game = tmp_path / "game"
    shutil.copytree(PAGES / "files", game)
    (game / ".secret").write_text("SECRET DOTFILE")
    (game / "sub" / ".git").mkdir()
    (game / "sub" / ".git" / "config").write_text("SECRET GIT")
    os.symlink(tmp_path / "outside.txt", game / "link")
    os.symlink(tmp_path / "elsewhere", game / "linkdir")
    os.mkfifo(game / "pipe")
    return game


def get(files: Files, path: str) -> tuple[int, bytes]:
    answer = files.get(f"{ORIGIN}/{path}")
    return answer.status, answer.body


def test_the_files_served_are_only_what_the_page_needs(tree: Path) -> None:
    files = Files(tree)
    try:
        assert get(files, "data.json") == (200, b'{"ok": true}\n')
        assert files.get(f"{ORIGIN}/data.json").content_type == "application/json"
        assert get(files, "") [1].startswith(b"<!doctype html>")  # the folder: its index.html
        assert get(files, "sub/page.html")[0] == 200
        for refused in (".secret", "sub/.git/config", "%2e%2e/outside.txt", "..%2foutside.txt", "sub/",
                        "link", "linkdir/x.txt", "pipe", "nosuch", "sub/page.html%00.js"):
            status, body = get(files, refused)
            assert status == 404 and b"SECRET" not in body, (refused, status, body)
        assert b"symbolic links" in get(files, "link")[1]
    finally:
        files.close()
    alone = Files(tree, only="index.html")
    try:
        assert get(alone, "index.html")[0] == 200
        status, body = get(alone, "data.json")
        assert status == 404 and b"only index.html" in body
    finally:
        alone.close()


def test_a_files_folder_is_served_only_where_the_page_may_need_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "games" / "pong").mkdir(parents=True)
    assert folder_served(home / "games" / "pong" / "index.html", home=home)
    assert not folder_served(home / "game.html", home=home)  # the home folder: the FILE alone
    assert not folder_served(tmp_path / "game.html", home=home)  # above the home folder
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not folder_served(shared / "game.html", home=home)  # others can write there


def test_every_navigation_is_held_to_the_rule() -> None:
    local = Network(home="http://game-bridge.localhost/index.html", files=None, allow_remote=False,
                    event=lambda *_a, **_k: None)
    assert local.allowed("http://game-bridge.localhost/level2.html", main=True)
    assert not local.allowed("http://127.0.0.1:8000/", main=True)  # another local port: not the page
    assert not local.allowed("https://example.com/", main=True)
    assert not local.allowed("file:///etc/passwd", main=True)
    assert local.allowed("http://127.0.0.1:8000/widget.html", main=False)  # a frame may show loopback
    assert local.allowed("about:blank", main=False) and not local.allowed("https://ads.example/", main=False)
    remote = Network(home="https://example.com/game/", files=None, allow_remote=True, event=lambda *_a, **_k: None)
    assert remote.allowed("https://cdn.example.net/next.html", main=True)
    assert not remote.allowed("chrome://settings", main=True) and not remote.allowed("file:///etc", main=False)


@pytest.fixture
def guard(tmp_path: Path) -> Iterator[ProcessGuard]:
    (tmp_path / "guard").mkdir()
    guard = ProcessGuard(tmp_path / "guard")
    yield guard
    guard.check()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_page_reads_only_its_files_and_stays_where_it_was_opened(tree: Path, guard: ProcessGuard) -> None:
    with wrapped(guard, "--size", "320x240", str(tree)) as game:
        assert frames_until(game, lambda s: len(s.get("game", {}).get("asked", {})) == 9)
        asked = game.doc("/state")["game"]["asked"]
        assert asked["data.json"][0] == 200 and asked["sub/page.html"][0] == 200
        for refused in (".secret", "sub/.git/config", "sub/", "link", "linkdir/x.txt", "nosuch.js",
                        "%2e%2e/outside.txt"):
            assert asked[refused][0] == 404 and "SECRET" not in asked[refused][1], (refused, asked[refused])
        # a load that failed is a console error that names what failed to load
        assert wait_until(lambda: any(e["m"] == "console:error" and e.get("url", "").endswith("/nosuch.js")
                                      for e in game.events()), 10), game.events()
        for where in ("http://127.0.0.1:9/", "https://example.com/"):
            command = game.send("cmd=go&url=" + where.replace(":", "%3A").replace("/", "%2F"))
            game.outcome(command)
            game.run("cmd=step&frames=2")
            assert wait_until(lambda: any(e["m"] == "navigation:refused" and e["url"] == where
                                          for e in game.events()), 10), game.events()
        after = game.doc("/state")
        assert after["game"]["href"] == "http://game-bridge.localhost/index.html"  # still the page
        assert after["browser"]["url"] == "http://game-bridge.localhost/index.html"
        moved = game.outcome(game.send("cmd=go&url=sub%2Fpage.html"))
        assert moved["ok"] is True
        game.run("cmd=step&frames=2")
        assert frames_until(game, lambda s: s["browser"]["url"] == "http://game-bridge.localhost/sub/page.html")
        assert "sub page" in game.doc("/state")["ui"]["text"]
