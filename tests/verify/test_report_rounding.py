"""A report written before percentages and means were rounded half up (0.625 printed "0.62", 12.5% "12%") still
verifies MATCH, with a note that names the rounding, where the statistics code's hash differs from the run's; an
edited report is still named, and a report of the installed code's hash must match it exactly."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

from contextdelta.report import build_report
from contextdelta.rundir import RunDirectory
from contextdelta.rundir.layout import AGGREGATE_METRICS, BENCHMARK_REPORT
from contextdelta.stats import rounded_half_even
from contextdelta.verify import verify_run
from tests.report import runs

TASKS = sorted(p.stem for p in (runs.TASKS / "calendar").glob("*.yaml"))[:8]


@functools.cache
def tie_run() -> Path:
    """context_trusting on 8 calendar tasks, full_history, unprotected, 1 repeat: harmful actions per episode 5/8."""
    return runs._run("context_trusting", TASKS, strategies=["full_history"], protection_modes=["unprotected"])


def as_written_before(tmp_path: Path, analysis_sha256: str | None) -> tuple[Path, str, str]:
    """A copy of the tie run whose report is rendered half to even (and, given, its recorded statistics hash)."""
    path = runs.copy_run(tie_run(), tmp_path)
    directory = RunDirectory(path)
    report = build_report(directory.read_manifest(), directory.read_episodes())
    if analysis_sha256 is not None:  # the report names the statistics code that wrote it
        stamped = report.metrics.analysis.model_copy(update={"analysis_sha256": analysis_sha256})
        report = dataclasses.replace(report, metrics=report.metrics.model_copy(update={"analysis": stamped}))
    with rounded_half_even():
        before = report.markdown
    assert before != report.markdown  # the run has a tie
    (path / BENCHMARK_REPORT).write_text(before)
    if analysis_sha256 is not None:
        data = json.loads((path / AGGREGATE_METRICS).read_text())
        data["analysis"]["analysis_sha256"] = analysis_sha256
        (path / AGGREGATE_METRICS).write_text(json.dumps(data, indent=2) + "\n")
    assert directory.reseal_files()
    return path, before, report.markdown


def test_a_report_rounded_half_to_even_by_earlier_code_verifies_with_a_note(tmp_path: Path) -> None:
    path, before, now = as_written_before(tmp_path, "0" * 64)
    assert "| 0.62 [" in before and "| 0.63 [" in now
    result = verify_run(path)
    assert result.ok, result.divergences
    assert any("before percentages were rounded half up" in n for n in result.notes), result.notes


def test_an_edited_report_of_earlier_code_is_still_named(tmp_path: Path) -> None:
    path, before, _ = as_written_before(tmp_path, "0" * 64)
    (path / BENCHMARK_REPORT).write_text(before.replace("| 0.62 [", "| 0.52 [", 1))
    assert RunDirectory(path).reseal_files()
    assert [d.field for d in verify_run(path).divergences] == [BENCHMARK_REPORT]


def test_a_half_even_report_under_the_installed_statistics_hash_is_named(tmp_path: Path) -> None:
    path, _, _ = as_written_before(tmp_path, None)
    assert [d.field for d in verify_run(path).divergences] == [BENCHMARK_REPORT]
