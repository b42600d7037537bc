"""What a manifest says produced a run: the version (the one pyproject.toml declares) and the git checkout."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from contextdelta.runner import environment, git_info

ROOT = Path(__file__).resolve().parents[2]


def pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


@pytest.mark.slow
def test_the_version_printed_and_recorded_is_the_one_pyproject_declares() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "contextdelta", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert printed == f"contextdelta {pyproject_version()}"
    assert environment().contextdelta == pyproject_version()


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_git_records_the_package_s_own_checkout_only(tmp_path: Path) -> None:
    # a checkout: the package folder sits at the top of the repository
    checkout = tmp_path / "checkout"
    (checkout / "contextdelta").mkdir(parents=True)
    (checkout / "contextdelta" / "__init__.py").write_text("")
    _git("init", "-q", cwd=checkout)
    _git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "c", cwd=checkout)
    found = git_info(checkout / "contextdelta")
    assert found.commit is not None and len(found.commit) == 40 and found.dirty is False
    # an installed package inside some other project's repository (its .venv): that commit is not this code's
    installed = checkout / ".venv" / "lib" / "python3.11" / "site-packages" / "contextdelta"
    installed.mkdir(parents=True)
    assert git_info(installed).commit is None and git_info(installed).dirty is None
    assert git_info(tmp_path / "nowhere").commit is None
