#!/usr/bin/env python3
"""Check a built wheel and sdist before they are uploaded: the metadata an index shows,
and what the archives hold.

Usage: ``python scripts/check_dist.py DIST_DIR`` (after ``python -m build --outdir DIST_DIR``).
It validates the core metadata with ``packaging`` (what index uploads check), then this
project's own promises: the MIT licence expression and its file, the classifiers, the
dependencies, the console script and the pytest plugin, ``py.typed`` in the wheel, nothing
but the package in the wheel (no tests), the licence and README in the sdist, the README's
``mcp-name`` marker (server.json's name) in the description, and that the
wheel installed on its own imports and answers ``--version``. Exit 0 when all hold, else
1, with each failure on stderr.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "game_bridge_mcp"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
REQUIRED_CLASSIFIERS = (
    "Framework :: Pytest", "Typing :: Typed", "Topic :: Games/Entertainment",
    "Topic :: Software Development :: Testing", "Operating System :: POSIX :: Linux",
    *(f"Programming Language :: Python :: {v}" for v in PYTHONS),
)


def version() -> str:
    namespace: dict[str, str] = {}
    exec((ROOT / PACKAGE / "_version.py").read_text(encoding="utf-8"), namespace)
    return namespace["__version__"]


def check_metadata(raw: bytes, where: str, problems: list[str]) -> None:
    """The core metadata (a wheel's METADATA or an sdist's PKG-INFO)."""
    try:
        from packaging.metadata import Metadata
    except ImportError:
        problems.append("packaging is not installed: `pip install build` brings it")
        return
    try:
        meta = Metadata.from_email(raw, validate=True)
    except Exception as exc:  # ExceptionGroup of InvalidMetadata: say each one
        for sub in getattr(exc, "exceptions", [exc]):
            problems.append(f"{where}: invalid metadata: {sub}")
        return
    headers = email.parser.BytesParser().parsebytes(raw)

    def expect(ok: bool, what: str) -> None:
        if not ok:
            problems.append(f"{where}: {what}")

    expect(meta.name == "game-bridge-mcp", f"Name is {meta.name!r}")
    expect(str(meta.version) == version(), f"Version {meta.version} is not _version.py's {version()}")
    expect(str(meta.license_expression) == "MIT", f"License-Expression is {meta.license_expression!r}, not MIT")
    expect("LICENSE" in (meta.license_files or []), "License-File does not name LICENSE")
    classifiers = meta.classifiers or []
    expect(not any(c.startswith("License ::") for c in classifiers),
           "a License :: classifier beside License-Expression (indexes refuse the pair)")
    for wanted in REQUIRED_CLASSIFIERS:
        expect(wanted in classifiers, f"classifier {wanted!r} is missing")
    expect(str(meta.requires_python) == ">=3.10", f"Requires-Python is {meta.requires_python}")
    requires = [str(r) for r in meta.requires_dist or []]
    for name in ("mcp", "psutil"):
        expect(any(r.split(">")[0].split("<")[0].strip() == name for r in requires),
               f"Requires-Dist has no {name} ({requires})")
    expect(meta.description_content_type == "text/markdown",
           f"Description-Content-Type is {meta.description_content_type!r}")
    expect(bool(meta.description) and "game-bridge-mcp" in (meta.description or ""),
           "the long description (the README) is missing")
    registry_name = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))["name"]
    expect(f"mcp-name: {registry_name}" in (meta.description or ""),
           f"the long description lacks 'mcp-name: {registry_name}', by which the MCP Registry ties the "
           "package to server.json")
    for label, url in (meta.project_urls or {}).items():
        expect(url.startswith("https://") and "example." not in url, f"Project-URL {label} is {url!r}")
    expect(headers.get("Summary", "").strip() != "", "Summary is empty")


def check_wheel(path: Path, problems: list[str]) -> None:
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        info = f"game_bridge_mcp-{version()}.dist-info"
        check_metadata(wheel.read(f"{info}/METADATA"), path.name, problems)
        strays = [n for n in names if not (n.startswith(f"{PACKAGE}/") or n.startswith(f"{info}/"))]
        if strays:
            problems.append(f"{path.name}: holds more than the package: {strays[:5]}")
        if any("/tests/" in f"/{n}" or n.startswith("tests/") for n in names):
            problems.append(f"{path.name}: holds tests")
        for wanted in (f"{PACKAGE}/py.typed", f"{PACKAGE}/__main__.py", f"{info}/licenses/LICENSE"):
            if wanted not in names:
                problems.append(f"{path.name}: {wanted} is missing")
        entry_points = wheel.read(f"{info}/entry_points.txt").decode("utf-8")
        for wanted in ("game-bridge-mcp = game_bridge_mcp.cli.main:main", "[pytest11]"):
            if wanted not in entry_points:
                problems.append(f"{path.name}: entry_points.txt lacks {wanted!r}")


def check_sdist(path: Path, problems: list[str]) -> None:
    top = f"game_bridge_mcp-{version()}"
    with tarfile.open(path) as sdist:
        names = sdist.getnames()
        member = sdist.extractfile(f"{top}/PKG-INFO")
        if member is None:
            problems.append(f"{path.name}: PKG-INFO is missing")
        else:
            check_metadata(member.read(), path.name, problems)
    for wanted in ("LICENSE", "README.md", "pyproject.toml", f"{PACKAGE}/py.typed", f"{PACKAGE}/__init__.py"):
        if f"{top}/{wanted}" not in names:
            problems.append(f"{path.name}: {wanted} is missing")


def check_installed(wheel: Path, problems: list[str]) -> None:
    """The wheel unpacked on its own (no checkout on the path) imports and says its version."""
    with tempfile.TemporaryDirectory(prefix="gbm-wheel-") as target:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
        env = {**os.environ, "PYTHONPATH": target}
        run = subprocess.run(
            [sys.executable, "-c", "import game_bridge_mcp, sys; from game_bridge_mcp.cli.main import main; "
             "print(game_bridge_mcp.__file__); sys.exit(main(['--version']))"],
            cwd=target, env=env, capture_output=True, text=True, timeout=60)
        lines = run.stdout.splitlines()
        if run.returncode != 0 or not lines or not lines[0].startswith(target) or version() not in run.stdout:
            problems.append(f"{wheel.name}: installed alone, it did not import from the wheel and print "
                            f"{version()} (exit {run.returncode}): {run.stdout.strip()} {run.stderr.strip()[-400:]}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    dist = Path(argv[0])
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    problems: list[str] = []
    if len(wheels) != 1 or len(sdists) != 1:
        problems.append(f"{dist}: expected one wheel and one sdist, found {[p.name for p in wheels + sdists]}")
    else:
        check_wheel(wheels[0], problems)
        check_sdist(sdists[0], problems)
        check_installed(wheels[0], problems)
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_dist: {wheels[0].name} and {sdists[0].name} are ready to upload")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
