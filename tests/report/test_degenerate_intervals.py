"""Degenerate intervals: where the bootstrap has nothing to resample, the report never prints or records a
zero-width interval ``x [x, x]`` that a reader takes for certainty."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from benchmarks.stats_scaling import make_manifest
from contextdelta.report import RunFacts, aggregate, crossing_text, metrics_json, render_report
from contextdelta.stats import AnalysisParams, HorizonCrossing
from tests.report.test_synthetic import no_stale_table

PARAMS = AnalysisParams(resamples=500, seed=1, power_datasets=100)
FACTS = RunFacts(first_started="", last_finished="", failed_trials=())
COLLAPSED = re.compile(r"(-?[\d.,]+%?) \[\1, \1\]")


def _estimates(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if {"estimate", "low", "high", "status"} <= node.keys():
            yield node
        for value in node.values():
            yield from _estimates(value)
    elif isinstance(node, list):
        for value in node:
            yield from _estimates(value)


def test_a_one_task_run_has_no_zero_width_interval_in_json_or_markdown() -> None:
    table = no_stale_table(1, 2)
    manifest = make_manifest(1, len(table))
    metrics = aggregate(manifest, table, PARAMS)
    document = json.loads(json.dumps(metrics_json(metrics)))
    found = list(_estimates(document))
    assert found
    degenerate = [e for e in found if e["status"] in ("constant", "single_task")]
    assert degenerate  # tokens and counts of one task
    assert all(e["low"] is None and e["high"] is None and e["estimate"] is not None for e in degenerate)
    assert all(e["note"].startswith("no interval: ") for e in degenerate)
    assert not [e for e in found if e["low"] is not None and e["low"] == e["high"]]
    text = render_report(manifest, FACTS, metrics)
    assert "(no interval: 1 task)" in text
    assert COLLAPSED.search(text) is None, COLLAPSED.search(text)


def test_equal_tasks_give_no_interval_with_the_task_count() -> None:
    table = no_stale_table(3, 2)
    for name in ("harmful_action_count", "stale_action_count"):
        table.values[name][:] = 2.0
    manifest = make_manifest(3, len(table))
    metrics = aggregate(manifest, table, PARAMS)
    count = metrics.conditions[0].means["harmful_action_count"]
    assert (count.estimate, count.low, count.high, count.status.value) == (2.0, None, None, "constant")
    assert "all 3 tasks have the same value" in count.note
    text = render_report(manifest, FACTS, metrics)
    assert "2.00 (no interval: all 3 tasks equal)" in text
    assert COLLAPSED.search(text) is None, COLLAPSED.search(text)


def test_a_crossing_every_resample_agrees_on_prints_no_interval() -> None:
    crossing = HorizonCrossing(
        threshold=0.1,
        status="constant",
        horizon=8,
        low=None,
        high=None,
        confidence=0.95,
        largest_horizon=16,
        note="no interval: at each horizon every task has the same value (20 tasks over 5 horizons), so the "
        "bootstrap cannot vary",
    )
    text = crossing_text(crossing)
    assert text.startswith("h=8 (no interval: at each horizon every task has the same value (20 tasks")
    assert "[h=8, h=8]" not in text


def test_one_resample_left_out_is_singular() -> None:
    """The crossing said "(1 resamples left out)"."""
    crossing = HorizonCrossing(
        threshold=0.1, status="ok", horizon=4, low=2, high=8, confidence=0.95, largest_horizon=16, resamples_left_out=1
    )
    assert crossing_text(crossing) == "h=4 [h=2, h=8] (1 resample left out)"
