"""A clean install works end to end, as a user outside this repository gets it.

The sdist is built from a copy of the checkout, the wheel from that sdist (so the sdist is proven complete), and
the wheel is installed into a fresh virtual environment outside the repository. There, from an empty folder (no
``./tasks``), the installed commands validate the packaged suite, the scripted server starts from the installed
package, a short ``run-benchmark`` runs against it (its trace store migrated by the migrations the wheel ships),
and ``verify`` and ``report`` read the run back.

Dependencies come from the package indexes pip is configured with; the versions are pinned to the ones this test
environment already has (a constraints file), so pip takes them from its cache instead of resolving anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from importlib.metadata import distributions
from pathlib import Path

import pytest

from contextdelta.runner import source_hash
from contextdelta.store import head_revision
from contextdelta.tasks import packaged_suites, read_lock

ROOT = Path(__file__).resolve().parents[1]
VERSION = str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
NAME = f"contextdelta-{VERSION}"
TASK_IDS = "order-grinder-refund,cal-design-review,cfg-search-ramp"
SKIP = {".venv", ".git", "results", "build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
DOCUMENTS = (
    "LICENSE",
    "README.md",
    "ARCHITECTURE.md",
    "docs/decisions.md",
    "docs/task-format.md",
    "docs/run-directory.md",
)

pytestmark = pytest.mark.slow


@dataclass
class Install:
    sdist: Path
    wheel: Path
    venv: Path
    work: Path
    """An empty folder outside the repository, where the installed commands run."""

    def env(self) -> dict[str, str]:
        """This process's environment without anything that would point the installed package back here: the
        test session's settings, a key, a Python path, the test virtual environment."""
        dropped = ("PYTHONPATH", "VIRTUAL_ENV", "OPENAI_API_KEY")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTDELTA_") and k not in dropped}
        env["PATH"] = os.pathsep.join([str(self.venv / "bin"), env.get("PATH", "")])
        return env

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """An installed command (``contextdelta`` or ``python``), in the work folder."""
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            cwd=self.work,
            env=self.env(),
            timeout=timeout,
        )


def _build(source: Path, hook: str, out: Path) -> Path:
    """Run a PEP 517 hook of the declared backend (setuptools, from this environment: no download)."""
    done = subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta; print(build_meta.{hook}({str(out)!r}))"],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


def _constraints(path: Path) -> Path:
    """Every distribution this environment has, pinned (contextdelta itself excepted)."""
    pins = {d.metadata["Name"].lower(): d.version for d in distributions() if d.metadata["Name"]}
    pins.pop("contextdelta", None)
    path.write_text("".join(f"{name}=={version}\n" for name, version in sorted(pins.items())), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Install:
    root = tmp_path_factory.mktemp("clean-install")
    source = root / "checkout"
    shutil.copytree(ROOT, source, ignore=lambda _, names: [n for n in names if n in SKIP or n.endswith(".egg-info")])
    (root / "dist").mkdir()
    sdist = _build(source, "build_sdist", root / "dist")
    with tarfile.open(sdist) as archive:
        archive.extractall(root / "unpacked", filter="data")
    wheel = _build(root / "unpacked" / NAME, "build_wheel", root / "dist")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--disable-pip-version-check"]
    installed = subprocess.run(
        [*pip, "install", "--quiet", "--constraint", str(_constraints(root / "constraints.txt")), str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    work = root / "work"
    work.mkdir()
    return Install(sdist, wheel, venv, work)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _suite_files() -> dict[str, str]:
    """Every file of every suite below tasks/, relative to it, with its SHA-256."""
    tasks = ROOT / "tasks"
    return {
        p.relative_to(tasks).as_posix(): _digest(p.read_bytes())
        for p in sorted(tasks.rglob("*"))
        if p.is_file() and (p.suffix == ".yaml" or p.name == "SUITE.lock")
    }


def test_the_sdist_and_the_wheel_carry_every_suite_the_migrations_and_the_license(install: Install) -> None:
    expected = _suite_files()
    assert any(name.startswith("horizon/") for name in expected)  # generated suites ship by rule, not by a list
    with zipfile.ZipFile(install.wheel) as wheel:
        names = wheel.namelist()
        shipped = {
            n.removeprefix("contextdelta/_suites/"): _digest(wheel.read(n))
            for n in names
            if n.startswith("contextdelta/_suites/") and not n.endswith("/")
        }
        data = f"{NAME}.data/data/share/contextdelta/migrations/"
        migrations = {n.removeprefix(data) for n in names if n.startswith(data)}
        license_text = wheel.read(f"{NAME}.dist-info/licenses/LICENSE")
    assert shipped == expected
    assert {"env.py", "script.py.mako", "alembic.ini"} <= migrations
    assert {p.name for p in (ROOT / "migrations" / "versions").glob("*.py")} == {
        m.removeprefix("versions/") for m in migrations if m.startswith("versions/")
    }
    assert license_text == (ROOT / "LICENSE").read_bytes()
    with tarfile.open(install.sdist) as sdist:
        members = {m.name.removeprefix(f"{NAME}/") for m in sdist.getmembers() if m.isfile()}
    assert {f"tasks/{name}" for name in expected} <= members
    assert {"setup.py", "pyproject.toml", *DOCUMENTS} <= members
    assert not any(m.startswith("tests/") for m in members)


def test_a_clean_install_validates_runs_verifies_and_reports(install: Install) -> None:
    where = install.run("python", "-c", "import contextdelta; print(contextdelta.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(install.venv), where  # the wheel, not this checkout
    assert install.run("contextdelta", "--version").stdout.strip() == f"contextdelta {VERSION}"

    listed = install.run("contextdelta", "suites", "--json")
    assert listed.returncode == 0, listed.stderr
    hashes = {row["name"]: row["suite_sha256"] for row in json.loads(listed.stdout)}
    assert hashes == {name: read_lock(path / "SUITE.lock").suite_hash for name, path in packaged_suites().items()}

    validated = install.run("contextdelta", "validate-tasks")  # no ./tasks here: the packaged core suite
    assert validated.returncode == 0, validated.stdout[-3000:] + validated.stderr
    assert "Tasks in package:core" in validated.stdout and "24/24 tasks pass" in validated.stdout

    server = subprocess.Popen(
        [str(install.venv / "bin" / "python"), "-m", "contextdelta.testing.server", "--policy", "oracle"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=install.work,
        env=install.env(),
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("ready "):
            server.kill()
            pytest.fail(f"the installed scripted server did not start: {line}{server.communicate()[1][-3000:]}")
        base_url = dict(part.split("=", 1) for part in line.split()[1:])["base_url"]
        ran = install.run(
            "contextdelta", "run-benchmark",
            "--base-url", base_url, "--model", "scripted-oracle",
            "--task-ids", TASK_IDS, "--strategies", "full_history,last_n",
            "--protection-modes", "unprotected,freshness_contract", "--repeats", "1", "--quiet",
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    run = install.work / ran.stdout.strip().splitlines()[-1]
    assert run.is_relative_to(install.work / "results")

    verified = install.run("contextdelta", "verify", str(run))
    assert (verified.returncode, verified.stdout.strip().splitlines()[-1]) == (0, "MATCH"), verified.stdout
    reported = install.run("contextdelta", "report", str(run))
    assert reported.returncode == 0, reported.stderr
    assert f"# ContextDelta benchmark report: {run.name}" in reported.stdout
    assert f"| code | contextdelta {VERSION}, git unknown |" in reported.stdout

    manifest = json.loads((run / "run_manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "complete" and manifest["counts"]["succeeded"] == 12
    assert manifest["suite"]["source"] == "package:core" and manifest["suite"]["sha256"] == hashes["core"]
    assert manifest["environment"]["contextdelta"] == VERSION
    assert manifest["environment"]["git"] == {"commit": None, "dirty": None}
    # the installed code is byte for byte the checkout's harness: its runs compare with a clone's
    assert manifest["hashes"]["harness_sha256"] == source_hash()
    # the trace store in the results folder was migrated by the wheel's own migrations, to the newest one
    with sqlite3.connect(install.work / "results" / "contextdelta.db") as store:
        assert store.execute("select version_num from alembic_version").fetchall() == [(head_revision(),)]
