"""The CLI's stdout contract (the last line, and the only one, is the run directory) holds when a strategy plug-in
prints: on import, in its transform, in the driver and in worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextdelta.rundir.layout import RAW_RUNS
from tests.runner.conftest import TASKS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("workers", [["--workers", "1"], ["--workers", "2"]], ids=["in-process", "workers"])
def test_a_plugin_that_prints_leaves_the_run_directory_alone_on_stdout(
    oracle_url: str, tmp_path: Path, workers: list[str]
) -> None:
    process = subprocess.run(
        [
            sys.executable, "-m", "contextdelta", "run-benchmark",
            "--tasks", str(TASKS),
            "--task-ids", "order-grinder-refund,cal-design-review",
            "--strategies", "tests.runner.printing_plugin:Chatty",
            "--protection-modes", "unprotected",
            "--repeats", "1",
            "--base-url", oracle_url,
            "--model", "scripted-oracle",
            "--results-dir", str(tmp_path),
            "--no-store",
            "--quiet",
            *workers,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )  # fmt: skip
    assert process.returncode == 0, process.stderr
    (run_dir,) = tmp_path.iterdir()
    assert process.stdout == f"{run_dir}\n"
    assert "chatty plug-in imported" in process.stderr and "chatty on fd 1" in process.stderr
    records = [json.loads(line) for line in (run_dir / RAW_RUNS).read_text().splitlines()]
    assert [r["verdict"]["success"] for r in records] == [True, True]
