"""Fixtures for the verify tests: a copy of the run directory a 0.1 release wrote (no seal, no receipts)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contextdelta.runner import RunOutcome, run_benchmark
from contextdelta.testing import serve_scripted
from tests.runner.conftest import TASKS, benchmark_request

LEGACY = Path(__file__).parent / "fixtures" / "20261201T084019Z-5ad6dd"
"""A run directory written before receipts and seals (and before `seed_rule`)."""


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """A copy of `LEGACY` to change."""
    target = tmp_path / LEGACY.name
    shutil.copytree(LEGACY, target)
    return target


def oracle_run(results: Path, strategies: list[str]) -> RunOutcome:
    """One task, unprotected, one repeat, of ``strategies`` against the scripted oracle: a run to verify."""
    with serve_scripted("oracle", TASKS) as url:
        return run_benchmark(
            benchmark_request(
                url, results, task_ids=["order-grinder-refund"], strategies=strategies, protection_modes=["unprotected"]
            )
        )
