"""A run with one repeat per task: its flip rates cannot be measured, and the report says why (they printed a bare
"no data", and aggregate_metrics.json's note said only "no data")."""

from __future__ import annotations

from benchmarks.stats_scaling import make_manifest
from contextdelta.report import aggregate, metrics_json, render_report
from contextdelta.stats import FLIP_NEEDS_REPEATS, AnalysisParams, cluster_by_task, flip_rates
from tests.report.test_synthetic import FACTS, no_stale_table

PARAMS = AnalysisParams(resamples=200, power_datasets=100)


def test_a_flip_rate_of_tasks_with_one_repeat_each_says_it_needs_two() -> None:
    one = cluster_by_task(["t1", "t2", "t3"], [1, 1, 1], [1, 0, 1])
    two = cluster_by_task(["t1", "t1", "t2"], [1, 2, 1], [1, 0, 1])
    empty = cluster_by_task([], [], [])
    found = flip_rates({"one": one, "two": two, "empty": empty}, PARAMS)
    assert found["one"].estimate is None
    assert (
        found["one"].note
        == f"no data: a flip rate {FLIP_NEEDS_REPEATS}, and each of the 3 tasks has one repeat with a value"
    )
    assert found["two"].estimate == 1.0 and FLIP_NEEDS_REPEATS not in found["two"].note
    assert found["empty"].note == "no data"  # no task at all: nothing about repeats to say


def test_the_report_of_a_one_repeat_run_says_why_its_flip_rates_have_no_data() -> None:
    table = no_stale_table(8, 1)
    manifest = make_manifest(8, len(table)).model_copy(update={"repeats": 1})
    metrics = aggregate(manifest, table, PARAMS)
    document = metrics_json(metrics)
    for condition in document["conditions"]:
        for flip in condition["flip_rates"].values():
            assert flip["estimate"] is None and FLIP_NEEDS_REPEATS in flip["note"], flip
    text = render_report(manifest, FACTS, metrics)
    assert f"| no data ({FLIP_NEEDS_REPEATS}) |" in text
    assert "Every flip rate below says no data: a flip rate needs at least 2 repeats per task" in text
    assert "`run-benchmark --repeats 2` or more measures them" in text
    two = no_stale_table(8, 2)
    assert "Every flip rate below" not in render_report(
        make_manifest(8, len(two)), FACTS, aggregate(make_manifest(8, len(two)), two, PARAMS)
    )
