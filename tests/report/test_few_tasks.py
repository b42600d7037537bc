"""Few tasks: task-cluster bootstrap intervals under-cover below `MIN_TASKS_FOR_COVERAGE` tasks, so the report
(JSON warnings and Markdown) and `compare` say so, naming the count."""

from __future__ import annotations

from benchmarks.stats_scaling import make_manifest, make_table
from contextdelta.report import RunFacts, aggregate, compare_runs, render_report
from contextdelta.rundir.layout import RunDirectory
from contextdelta.stats import MIN_TASKS_FOR_COVERAGE, AnalysisParams
from tests.report import runs

PARAMS = AnalysisParams(resamples=300, seed=1, power_datasets=100)
FACTS = RunFacts(first_started="", last_finished="", failed_trials=())


def test_a_run_of_five_tasks_warns_that_its_intervals_are_too_narrow() -> None:
    table = make_table(5)
    manifest = make_manifest(5, len(table))
    metrics = aggregate(manifest, table, PARAMS)
    few = [w for w in metrics.warnings if w.code == "few_tasks"]
    assert few, metrics.warnings
    assert few[0].message.startswith("the per-condition rates rest on 5 tasks: below 12 tasks")
    assert few[1].message.startswith("14 of 14 comparisons (RQ1 6, RQ2 4, RQ3 4) rest on fewer than 12 tasks (as few ")
    assert "as few as 5 tasks" in few[1].message and len(few) == 2
    text = render_report(manifest, FACTS, metrics)
    assert "- **few_tasks**: the per-condition rates rest on 5 tasks" in text


def test_enough_tasks_get_no_few_tasks_warning() -> None:
    table = make_table(MIN_TASKS_FOR_COVERAGE)
    metrics = aggregate(make_manifest(MIN_TASKS_FOR_COVERAGE, len(table)), table, PARAMS)
    assert not [w for w in metrics.warnings if w.code == "few_tasks"]


def test_compare_of_three_tasks_notes_the_count() -> None:
    a, b = RunDirectory(runs.oracle_pair_run()), RunDirectory(runs.trusting_run())
    report = compare_runs(a.read_manifest(), a.read_episodes(), b.read_manifest(), b.read_episodes(), PARAMS)
    (note,) = [n for n in report.notes if n.startswith("few tasks")]
    assert "as few as 3 tasks (fewer than 12)" in note
