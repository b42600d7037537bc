"""A condition of the plan without a finished episode (an incomplete run, a run cut short): every cell of it says
"no data", never a reason that belongs to episodes it does not have, and the JSON stays strict."""

from __future__ import annotations

import json

from benchmarks.stats_scaling import make_manifest
from contextdelta.report import EpisodeTable, RunFacts, aggregate, metrics_json, render_report
from contextdelta.stats import AnalysisParams
from tests.report.test_synthetic import no_stale_table

PARAMS = AnalysisParams(resamples=200, seed=1, power_datasets=100)
FACTS = RunFacts(first_started="", last_finished="", failed_trials=())


def test_a_condition_without_episodes_is_no_data_everywhere() -> None:
    table = no_stale_table(3, 1)
    keep = table.strategy != "last_n"
    trimmed = EpisodeTable(
        task_id=table.task_id[keep],
        world=table.world[keep],
        hazard=table.hazard[keep],
        strategy=table.strategy[keep],
        protection_mode=table.protection_mode[keep],
        repeat=table.repeat[keep],
        failed=table.failed[keep],
        termination=table.termination[keep],
        failure=table.failure[keep],
        values={name: column[keep] for name, column in table.values.items()},
    )
    manifest = make_manifest(3, len(trimmed))
    metrics = aggregate(manifest, trimmed, PARAMS)
    json.dumps(metrics_json(metrics), allow_nan=False)  # strict JSON: no NaN or infinity anywhere
    text = render_report(manifest, FACTS, metrics)
    (row,) = [
        line
        for line in text.splitlines()
        if line.startswith("| last_n / unprotected | no data | no data | no data | 0 |")
    ]
    assert row.endswith("| 0 | no data |"), row  # the cost cell: no episodes to price, not "no price for the model"
    assert "no price" not in text
