"""examples/strategies: a real plug-in, installed with pip, runs by entry point and by path through the command
line; verify re-derives its contexts; a change to its installed source makes --resume refuse, naming it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from contextdelta.testing import serve_scripted

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "strategies"
TASK_IDS = "order-outage-credits,cfg-change-request"

pytestmark = pytest.mark.slow


@dataclass
class Installed:
    site: Path
    """The pip --target folder that holds the plug-in (and its dist-info with the entry point)."""
    module: Path
    """The installed module file."""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.site), str(ROOT)])
        return env

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "contextdelta", *args],
            capture_output=True,
            text=True,
            env=self.env(),
            cwd=ROOT,
            timeout=300,
        )


@pytest.fixture
def installed(tmp_path: Path) -> Installed:
    """The example installed from a copy of its folder (build files stay out of the checkout)."""
    source = tmp_path / "src-copy"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return Installed(site, site / "contextdelta_example_strategies" / "__init__.py")


@pytest.fixture(scope="module")
def oracle_url() -> Iterator[str]:
    with serve_scripted("oracle", ROOT / "tasks") as url:
        yield url


def run(installed: Installed, url: str, results: Path, strategies: str) -> Path:
    done = installed.cli(
        "run-benchmark",
        "--tasks", "tasks",
        "--task-ids", TASK_IDS,
        "--strategies", strategies,
        "--strategy-param", "keep_writes.n=1",
        "--protection-modes", "unprotected",
        "--repeats", "1",
        "--base-url", url,
        "--model", "scripted-oracle",
        "--results-dir", str(results),
        "--no-store",
        "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def verify(installed: Installed, path: Path) -> subprocess.CompletedProcess[str]:
    return installed.cli("verify", path.name, "--results-dir", str(path.parent))


def test_the_example_passes_its_own_test(installed: Installed) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        capture_output=True,
        text=True,
        env=installed.env(),
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


@pytest.mark.parametrize(
    ("spec", "kind"),
    [("keep_writes", "entry_point"), ("contextdelta_example_strategies:KeepWrites", "module")],
)
def test_the_plugin_runs_is_recorded_and_verifies(
    installed: Installed, oracle_url: str, tmp_path: Path, spec: str, kind: str
) -> None:
    path = run(installed, oracle_url, tmp_path / "results", f"full_history,{spec}")
    manifest = json.loads((path / "run_manifest.json").read_text())
    assert manifest["strategies"] == ["full_history", "keep_writes"]
    (config,) = [c for c in manifest["strategy_configs"] if c["name"] == "keep_writes"]
    assert config["deterministic"] is True and config["factory_params"] == {"n": 1}
    source = config["source"]
    assert (source["kind"], source["distribution"], source["version"]) == (
        kind,
        "contextdelta-example-strategies",
        "0.1.0",
    )
    assert len(source["source_sha256"]) == 64
    episodes = [json.loads(line) for line in (path / "raw_runs.jsonl").read_text().splitlines()]
    mine = [e for e in episodes if e["strategy"] == "keep_writes"]
    assert len(mine) == 2 and all(e["verdict"]["success"] for e in mine)
    # it did reduce the context (n=1), so verify has something to re-derive
    assert any(step["context"]["removed"] for e in mine for step in e["trace"]["steps"])
    checked = verify(installed, path)
    assert (checked.returncode, checked.stdout.strip()) == (0, "MATCH"), checked.stdout + checked.stderr


def test_a_changed_plugin_makes_resume_refuse_and_verify_rederive_with_a_note(
    installed: Installed, oracle_url: str, tmp_path: Path
) -> None:
    path = run(installed, oracle_url, tmp_path / "results", "full_history,keep_writes")
    # a behaviour change in the installed plug-in: it now keeps every group
    text = installed.module.read_text()
    assert "if len(groups) <= self.n:" in text
    installed.module.write_text(text.replace("if len(groups) <= self.n:", "if True:"))
    resumed = installed.cli(
        "run-benchmark",
        "--resume", path.name,
        "--results-dir", str(path.parent),
        "--base-url", oracle_url,
        "--model", "scripted-oracle",
        "--quiet",
    )  # fmt: skip
    assert resumed.returncode == 2
    message = " ".join(resumed.stderr.split())
    assert f"cannot resume {path.name}" in message
    assert "plug-in strategy 'keep_writes' (contextdelta-example-strategies 0.1.0): source hash changed" in message
    assert "Traceback" not in resumed.stderr
    checked = verify(installed, path)
    assert checked.returncode == 1
    assert any(
        ".keep_writes.unprotected.r1: steps[" in line and ".messages:" in line for line in checked.stdout.splitlines()
    )
    assert "plug-in strategy 'keep_writes'" in checked.stdout + checked.stderr


def test_an_uninstalled_deterministic_plugin_is_a_divergence_not_a_match(
    installed: Installed, oracle_url: str, tmp_path: Path
) -> None:
    path = run(installed, oracle_url, tmp_path / "results", "full_history,keep_writes")
    shutil.rmtree(installed.site)
    checked = verify(installed, path)
    assert checked.returncode == 1
    assert f"{path.name}: strategy keep_writes: cannot re-derive its contexts" in checked.stdout
