"""Attribution reads the graders' structured details, never their text (issue 17).

The acceptance test rewrites every grader's text (``contextdelta.grading.describe``, the one place reasons are
worded) for a whole scripted run, and requires the attribution of every failed episode to stay the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import contextdelta.grading.graders as graders
from contextdelta.attribution import attribute_run
from contextdelta.grading import DetailKind, GraderDetail, describe
from contextdelta.rundir import EpisodeRecord
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.testing import serve_scripted

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
# end-state misses, stale and duplicate writes, forbidden and prohibited calls, blocked writes, under a reduced
# and the full context
TASK_IDS = ["order-split-refund", "cal-assistant-scope", "cfg-search-ramp", "order-desk-cancel", "cfg-legacy-cleanup"]


def _run(results: Path) -> list[EpisodeRecord]:
    with serve_scripted("unsafe", TASKS, in_process=True) as url:
        outcome = run_benchmark(
            BenchmarkRequest(
                tasks_dir=TASKS,
                base_url=url,
                model="scripted-unsafe",
                results_dir=results,
                task_ids=TASK_IDS,
                strategies=["full_history", "last_n"],
                protection_modes=["unprotected", "freshness_contract"],
                repeats=1,
                concurrency=4,
            )
        )
    return sorted(outcome.records, key=lambda r: r.run_id)


def _reworded(detail: GraderDetail) -> str:
    """Other words, other order, same facts: what a well-meant edit of the reason texts might do."""
    return f"[{detail.kind.value}] " + " ".join(reversed(describe(detail).split())).upper()


@pytest.mark.slow
def test_rewording_every_grader_text_changes_no_attribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _run(tmp_path / "plain")
    monkeypatch.setattr(graders, "describe", _reworded)
    reworded = _run(tmp_path / "reworded")
    monkeypatch.undo()

    assert [r.run_id for r in plain] == [r.run_id for r in reworded]
    failed = [r for r in plain if not r.verdict.success]
    assert len(failed) >= 16
    kinds = {d.kind for r in failed for d in r.verdict.details_for()}
    assert {DetailKind.PREDICATE_FAILED, DetailKind.STALE_WRITE, DetailKind.DUPLICATE_WRITE} <= kinds
    for a, b in zip(plain, reworded, strict=True):
        assert a.verdict.details == b.verdict.details
        # every text was rewritten, and nothing else about the verdict changed
        assert all(x != y for x, y in zip(a.verdict.reasons, b.verdict.reasons, strict=True))
        assert a.verdict.model_dump(exclude={"reasons"}) == b.verdict.model_dump(exclude={"reasons"})
    before = [x.model_dump(exclude={"run_group_id"}) for x in attribute_run(plain)]
    after = [x.model_dump(exclude={"run_group_id"}) for x in attribute_run(reworded)]
    assert len(before) == len(failed)
    assert before == after


def test_reasons_are_the_details_in_words(tmp_path: Path) -> None:
    from tests.report import runs

    for record in runs.records(runs.unsafe_run()).values():
        assert record.verdict.reasons == [describe(d) for d in record.verdict.details_for()]


# Packages that present or analyse verdicts must read their structure; only the graders word it.
STRUCTURE_READERS = ("attribution", "report", "replay", "dashboard", "store", "verify")


@pytest.mark.parametrize("package", STRUCTURE_READERS)
def test_no_reader_of_verdicts_touches_the_reason_text(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / "contextdelta" / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "reasons" and "verdict" in ast.unparse(node.value):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], f"read Verdict.details (structure), not Verdict.reasons (text): {offenders}"
