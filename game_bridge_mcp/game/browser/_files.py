"""A local game's files, as the page asks for them: only what the page needs, read without
following links (docs/reliability.md, "The browser wrapper's page").

The page loads them from :data:`ORIGIN`, an address no network has: the browser's requests
to it are answered in the wrapper (no socket, so no other process or user can ask), and it
is the same at every launch, so a recorded session replays. Under the folder served:

- a name beginning with ``.`` (``.git``, ``.ssh``, ``.env``) is never served, at any depth;
- a folder is never listed (its ``index.html`` is served for it, if it has one);
- each part of a path is opened relative to the folder above it, without following a
  symbolic link (``O_NOFOLLOW``), from a descriptor of the served folder opened once: a link
  swapped in between a check and an open cannot lead outside;
- only regular files are read, up to :data:`MAX_FILE` bytes;
- for a FILE, its folder is served only when the page may need it: when the folder is the
  user's home folder (or above it) or another user can write it, only the FILE itself is.
"""

from __future__ import annotations

import errno
import mimetypes
import os
import stat
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

#: Where a local game's files are, as the page sees them (stable across launches).
ORIGIN = "http://game-bridge.localhost"
#: The host of :data:`ORIGIN`, which the browser never looks up (nothing else answers it).
HOST = "game-bridge.localhost"
#: The largest file served (the browser holds a file's bytes twice while it is delivered).
MAX_FILE = 256 * 1024 * 1024

TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm",
         ".json": "application/json", ".svg": "image/svg+xml", ".webp": "image/webp",
         ".ogg": "audio/ogg", ".mp3": "audio/mpeg", ".wav": "audio/wav", ".glb": "model/gltf-binary",
         ".gltf": "model/gltf+json", ".css": "text/css", ".html": "text/html", ".htm": "text/html",
         ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
         ".txt": "text/plain", ".xml": "application/xml", ".ico": "image/x-icon", ".woff2": "font/woff2",
         ".woff": "font/woff", ".ttf": "font/ttf", ".otf": "font/otf", ".mp4": "video/mp4", ".webm": "video/webm"}


@dataclass(frozen=True)
class Answer:
    """What a request for a file gets."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def _refused(status: int, why: str) -> Answer:
    return Answer(status, why.encode("utf-8"))


def folder_served(file: Path, *, home: Path | None = None, uid: int | None = None) -> bool:
    """Whether a FILE's folder is served beside it: not when it is the user's home folder or
    one above it, nor when another user could write into it."""
    folder = file.parent
    home = Path.home().resolve() if home is None else home
    if folder == home or folder in home.parents:
        return False
    try:
        info = folder.stat()
    except OSError:
        return False
    own = os.geteuid() if uid is None else uid
    return not (info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)) and info.st_uid in (own, 0)


class Files:
    """The files under ``root`` (a folder), or only ``only`` in it when that is set."""

    def __init__(self, root: Path, *, only: str | None = None) -> None:
        self.root = root
        self.only = only
        self._fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def url(self, relative: str) -> str:
        return f"{ORIGIN}/{urllib.parse.quote(relative.strip('/'))}"

    def get(self, url: str) -> Answer:
        """The answer to a GET of ``url`` (on :data:`ORIGIN`)."""
        path = urllib.parse.urlsplit(url).path
        parts = [urllib.parse.unquote(part) for part in path.split("/") if part]
        if any(part.startswith(".") for part in parts):
            return _refused(404, "names beginning with '.' are not served")
        if any("\0" in part or "/" in part for part in parts):
            return _refused(404, "no such file")
        if self.only is not None and parts != [self.only]:
            return _refused(404, f"only {self.only} is served from this folder (its folder is not: "
                                 "put the game in a folder of its own and open that)")
        return self._read(parts, directory_asked=path.endswith("/") or not parts)

    def _read(self, parts: list[str], *, directory_asked: bool) -> Answer:
        fds: list[int] = []
        try:
            fd = self._fd
            for part in parts[:-1]:
                fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                fds.append(fd)
            name = parts[-1] if parts else None
            if name is not None:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
                fds.append(fd)
            if stat.S_ISDIR(os.fstat(fd).st_mode):  # a folder: its index.html, never a listing
                fd = os.open("index.html", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
                fds.append(fd)
                name = "index.html"
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return _refused(404, "not a file")
            if info.st_size > MAX_FILE:
                return _refused(413, f"the file has {info.st_size} bytes; at most {MAX_FILE} are served")
            body = _read_all(fd, info.st_size)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return _refused(404, "symbolic links are not followed")
            return _refused(404, "no such file")
        finally:
            for opened in fds:
                os.close(opened)
        return Answer(200, body, content_type(name or "index.html"))


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total <= MAX_FILE:
        chunk = os.read(fd, max(65536, size - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > MAX_FILE:
        raise OSError(errno.EFBIG, "the file grew past the limit while it was read")
    return b"".join(chunks)


def content_type(name: str) -> str:
    suffix = os.path.splitext(name)[1].lower()
    return TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
