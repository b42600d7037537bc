"""A conflict-recovery rate where no write was blocked (every unprotected condition): the grader does not apply, which
the report said as a bare "no data" (and the JSON note "no data") beside episodes that all had a verdict."""

from __future__ import annotations

import numpy as np

from benchmarks.stats_scaling import make_manifest
from contextdelta.report import NO_BLOCKED_WRITE, aggregate, metrics_json, render_report
from contextdelta.stats import AnalysisParams
from tests.report.test_synthetic import FACTS, no_stale_table

PARAMS = AnalysisParams(resamples=200, power_datasets=100)


def test_conflict_recovery_without_a_blocked_write_is_not_applicable_and_says_so() -> None:
    table = no_stale_table(6, 2)
    unprotected = table.protection_mode == "unprotected"
    table.values["conflict_recovery"][unprotected] = np.nan  # nothing was blocked: N/A
    table.values["conflict_recovery"][~unprotected] = 1.0
    manifest = make_manifest(6, len(table)).model_copy(update={"repeats": 2})
    metrics = aggregate(manifest, table, PARAMS)
    document = metrics_json(metrics)
    for condition in document["conditions"]:
        recovery = condition["rates"]["conflict_recovery"]
        if condition["condition"]["protection_mode"] == "unprotected":
            assert recovery["estimate"] is None and recovery["note"] == NO_BLOCKED_WRITE
        else:
            assert recovery["estimate"] == 1.0 and recovery["note"] != NO_BLOCKED_WRITE
    text = render_report(manifest, FACTS, metrics)
    row = next(line for line in text.splitlines() if line.startswith("| full_history / unprotected | 6 | 12 | 0 |"))
    assert row.endswith("| n/a (no write was blocked) |"), row
