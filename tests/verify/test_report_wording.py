"""A derived report whose bytes the seal still holds but the installed code words differently (a report written by
an earlier version) is named with what to do, not only as "differs"."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from contextdelta.canonical import canonical_json
from contextdelta.rundir import MANIFEST, RAW_RUNS, RunDirectory
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


def _edit_first_record(path: Path, field: str, value: object) -> None:
    raw = path / RAW_RUNS
    lines = raw.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record[field] = value
    lines[0] = canonical_json(record) + "\n"
    raw.write_text("".join(lines))


def _edit_manifest_seed(path: Path) -> None:
    manifest = path / MANIFEST
    manifest.write_text(re.sub(r'"seed": \d+', '"seed": 7', manifest.read_text(), count=1))


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda p: _edit_first_record(p, "finished_at", "2030-01-01T00:00:00Z"), "finished_at"),
        (_edit_manifest_seed, "run_manifest.json seed"),
    ],
    ids=["record timestamp", "manifest seed"],
)
def test_a_report_that_differs_because_its_inputs_were_edited_blames_the_edit_not_the_installed_version(
    tmp_path: Path, edit: Callable[[Path], None], named: str
) -> None:
    """An edited record or manifest field is named by the seal, and the report rebuilt from it differs from the
    report on disk (whose bytes the seal still holds): that difference follows from the edit, and verify says so
    instead of suggesting the installed contextdelta words the report otherwise and `report --write`."""
    path = runs.copy_run(runs.single_task_run(), tmp_path)
    edit(path)
    divergences = verify_run(path).divergences
    assert any(d.field == named and "edited after the run" in d.detail for d in divergences)
    (report,) = [d for d in divergences if d.field == BENCHMARK_REPORT]
    assert "words it differently" not in report.detail and "--write" not in report.detail
    assert report.detail.endswith(
        "its bytes match the run's seal: what it is rebuilt from was edited after the run (named above)"
    )
