"""One rule for which tasks enter a paired comparison (SPEC section 10: per task, the mean of each arm over its
repeats with a value): a task enters when each arm has one. The report's effect, its sign-flip test, its minimum
detectable difference and `power`'s plan count the same tasks, also where failed trials fall on different repeats
of the two arms (the test used to leave such a task out while the effect and power kept it)."""

from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.stats_scaling import make_manifest, make_table
from contextdelta.report import RunFacts, aggregate, metrics_json, render_power_plan, render_report
from contextdelta.report._power import plan_from_table
from contextdelta.report._table import EpisodeTable
from contextdelta.stats import AnalysisParams, cluster_by_task, pair_by_task, paired_comparison, sign_flip_test

PARAMS = AnalysisParams(resamples=500, seed=1, power_datasets=200)
FACTS = RunFacts(first_started="", last_finished="", failed_trials=())


def scattered_failures(n_tasks: int = 16, share: float = 0.35, seed: int = 3) -> EpisodeTable:
    """The synthetic run (3 repeats) with failed trials scattered over the repeats of every condition."""
    table = make_table(n_tasks)
    assert table.repeat.max() - table.repeat.min() == 2  # 3 repeats
    lost = np.random.default_rng(seed).random(len(table)) < share
    values = {name: column.copy() for name, column in table.values.items()}
    for name in values:
        if name not in ("success", "failed_trial", "steps", "agent_prompt_tokens", "agent_completion_tokens"):
            values[name][lost] = np.nan
    values["success"][lost] = 0.0
    values["failed_trial"][lost] = 1.0
    return dataclasses.replace(
        table,
        failed=lost,
        termination=np.where(lost, "provider_error", table.termination),
        failure=np.where(lost, "provider_error", table.failure),
        values=values,
    )


def test_a_task_failed_on_different_repeats_of_each_arm_enters_the_test_as_it_enters_the_effect() -> None:
    """Task T: repeat 1 failed in a, repeats 2 and 3 failed in b (no repeat with a value in both)."""
    nan = np.nan
    tasks, reps = ["T", "T", "T", "U", "U", "U"], [1, 2, 3, 1, 2, 3]
    a = cluster_by_task(tasks, reps, [nan, 1, 1, 1, 1, 0])
    b = cluster_by_task(tasks, reps, [0, nan, nan, 0, 0, 0])
    pairs = pair_by_task(a, b)
    assert pairs.tested.task_ids == pairs.task_ids == ("T", "U")
    assert pairs.tested.n_a.tolist() == pairs.tested.n_b.tolist() == [1, 3]  # T: a's repeat 2 against b's repeat 1
    comparison = paired_comparison(a, b)
    assert comparison.difference.n_tasks == comparison.test.n_tasks == 2
    assert sign_flip_test(pairs).n_discordant == 2


def test_report_json_markdown_and_power_count_the_same_tasks_with_scattered_failed_trials() -> None:
    table = scattered_failures()
    manifest = make_manifest(16, len(table)).model_copy(update={"repeats": 3})
    metrics = aggregate(manifest, table, PARAMS)
    plan = plan_from_table(manifest, table, 0.5, repeats=(1,), params=PARAMS)
    planned = {row.name: row for row in plan.comparisons}
    text = render_report(manifest, FACTS, metrics)
    # the tasks with at least one value in each arm, by plain dictionaries
    checked = unequal = 0
    for question in metrics.research_questions:
        for c in question.comparisons:
            sides = []
            for key in (c.a, c.b):
                rows = (table.strategy == key.strategy) & (table.protection_mode == key.protection_mode)
                values = table.values[c.metric][rows]
                present = ~np.isnan(values)
                ids, counts = np.unique(table.task_id[rows][present], return_counts=True)
                sides.append(dict(zip(ids.tolist(), counts.tolist(), strict=True)))
            entering = set(sides[0]) & set(sides[1])
            unequal += sum(sides[0][t] != sides[1][t] for t in entering)
            assert c.difference.n_tasks == c.test.n_tasks == c.detectable.n_tasks == len(entering), c.name
            row = planned[c.name]
            assert row.pilot_tasks == len(entering), c.name
            assert row.pilot_discordant_tasks == c.test.n_discordant, c.name
            if c.test.testable:
                assert (
                    f"{c.name}: " in text
                    and f"({c.test.n_positive} higher under a, {c.test.n_negative} under b" in text
                )
            checked += 1
    assert checked >= 10 and unequal >= 10
    assert "the test leaves" not in text
    (note,) = [n for n in plan.notes if "failed trial" in n]  # said "a task whose pairs all failed leaves" it
    assert "a task leaves a comparison only when every one of its episodes in one condition failed" in note


def test_a_comparison_without_data_records_no_power_but_a_reason() -> None:
    """Every last_n / unprotected episode a failed trial: its stale-action comparisons have no task in both
    conditions. aggregate_metrics.json recorded power_at_largest 0.0 and largest_difference 1.0 for them, and power's
    plan a mean_rate 0.0: numbers that read as measured. Now null, with the reason; comparisons with data unchanged
    (no `no_data` key, as in reports written before it existed)."""
    table = scattered_failures(share=0.0)
    lost = (table.strategy == "last_n") & (table.protection_mode == "unprotected")
    values = {name: column.copy() for name, column in table.values.items()}
    for name in values:
        if name not in ("success", "failed_trial", "steps", "agent_prompt_tokens", "agent_completion_tokens"):
            values[name][lost] = np.nan
    values["success"][lost], values["failed_trial"][lost] = 0.0, 1.0
    table = dataclasses.replace(table, failed=lost, values=values)
    manifest = make_manifest(16, len(table)).model_copy(update={"repeats": 3})
    document = metrics_json(aggregate(manifest, table, PARAMS))
    found = {c["name"]: c["detectable"] for q in document["research_questions"] for c in q["comparisons"]}
    empty = found["last_n vs full_history (unprotected)"]
    assert empty["n_tasks"] == 0 and empty["power_at_largest"] is None and empty["largest_difference"] is None
    assert empty["no_data"].startswith("no data: no task has a value in both conditions")
    full = found["last_n vs full_history (freshness_contract)"]
    assert full["n_tasks"] == 16 and isinstance(full["power_at_largest"], float) and "no_data" not in full
    plan = plan_from_table(manifest, table, 0.5, repeats=(1,), params=PARAMS)
    (row,) = [r for r in plan.comparisons if r.name == "last_n vs full_history (unprotected)"]
    assert (row.pilot_tasks, row.mean_rate, row.largest_difference) == (0, None, None) and row.no_data
    assert "| no data |" in render_power_plan(plan)
