"""A derived report whose bytes the seal still holds but the installed code words differently (a report written by
an earlier version) is named with what to do, not only as "differs"."""

from __future__ import annotations

from pathlib import Path

from contextdelta.rundir import RunDirectory
from contextdelta.rundir.layout import BENCHMARK_REPORT
from contextdelta.verify import verify_run
from tests.report import runs


def test_a_report_the_seal_holds_but_this_version_words_otherwise_names_report_write(tmp_path: Path) -> None:
    path = runs.copy_run(runs.single_task_run(), tmp_path)
    report = path / BENCHMARK_REPORT
    report.write_text(report.read_text().replace("## Limitations", "## Limitations (worded by an earlier version)"))
    assert RunDirectory(path).reseal_files()  # as the earlier version sealed it
    (found,) = verify_run(path).divergences
    assert found.field == BENCHMARK_REPORT
    assert found.detail.startswith("differs from the one rebuilt from the episodes (first at line ")
    assert "its bytes match the run's seal" in found.detail
    assert f"`contextdelta report {path.name} --write` rewrites it" in found.detail
