"""Counts of one read in the singular: never "1 tasks", "1 episodes", "1 repeats" or "repeat(s)"."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from benchmarks.stats_scaling import make_manifest
from contextdelta.report import (
    VERDICT_METRICS,
    RunFacts,
    aggregate,
    plan_run,
    plural,
    render_power_plan,
    render_report,
)
from contextdelta.rundir.layout import RunDirectory
from contextdelta.stats import AnalysisParams
from tests.report import runs
from tests.report.test_synthetic import no_stale_table

PARAMS = AnalysisParams(resamples=200, seed=1, power_datasets=100)
FACTS = RunFacts(first_started="", last_finished="", failed_trials=())
BAD = re.compile(
    r"(?<![\d.,/])1 (tasks|episodes|repeats|failed trials|horizons|stories|pairs|comparisons)\b|\((s|ies)\)"
)


def test_a_one_task_one_repeat_report_speaks_in_the_singular() -> None:
    table = no_stale_table(1, 1)
    table.failed[0] = True
    table.values["failed_trial"][0] = 1.0
    table.termination[0] = "provider_error"
    manifest = make_manifest(1, len(table)).model_copy(update={"repeats": 1})
    metrics = aggregate(manifest, table, PARAMS)
    text = render_report(manifest, FACTS, metrics)
    assert "- Suite size: 1 task and 1 repeat per condition;" in text
    assert "1 failed trial" in text
    assert "1 of 8 episodes (13%) is a failed trial (" in text and "): it counts as failures" in text
    assert BAD.search(text) is None, BAD.search(text)
    for warning in metrics.warnings:
        assert BAD.search(warning.message) is None, warning.message


def test_plural_takes_an_irregular_form() -> None:
    assert (plural(1, "story", "stories"), plural(2, "story", "stories"), plural(2, "task")) == (
        "1 story",
        "2 stories",
        "2 tasks",
    )


def test_the_power_plan_header_says_1_repeat() -> None:
    directory = RunDirectory(runs.oracle_pair_run())
    plan = plan_run(directory.read_manifest(), directory.read_episodes(), 0.5, repeats=[1, 2], params=PARAMS)
    assert "| tasks, 1 repeat | tasks, 2 repeats |" in render_power_plan(plan)


def test_one_resample_is_singular_and_the_default_keeps_its_thousands_separator() -> None:
    table = no_stale_table(2, 1)
    manifest = make_manifest(2, len(table))
    one = render_report(manifest, FACTS, aggregate(manifest, table, AnalysisParams(resamples=1, power_datasets=100)))
    assert "1 resample, seed 0" in one and "analysis: 1 resample, bootstrap seed" in one
    assert BAD.search(one) is None and "1 resamples" not in one
    many = render_report(
        manifest, FACTS, aggregate(manifest, table, AnalysisParams(resamples=2000, power_datasets=100))
    )
    assert "2,000 resamples, seed" in many and "analysis: 2000 resamples, bootstrap seed" in many


def test_a_task_with_failed_trials_on_different_repeats_of_each_side_stays_in_the_test() -> None:
    """A task with a failed trial on one side of each repeat (and more on one side) has a task mean in both
    conditions: it enters the sign-flip test too (on equally many repeats per side), so the test and the difference
    of task means count the same 2 tasks (the test used to count 1 and leave the other out)."""
    table = no_stale_table(2, 3)
    first = table.task_id == table.task_id[0]
    for strategy, repeat in (("last_n", 1), ("full_history", 2), ("full_history", 3)):
        row = int(
            np.flatnonzero(
                first
                & (table.strategy == strategy)
                & (table.protection_mode == "unprotected")
                & (table.repeat == repeat)
            )[0]
        )
        table.failed[row] = True
        table.termination[row] = "provider_error"
        for metric in VERDICT_METRICS:
            table.values[metric][row] = np.nan
        table.values["failed_trial"][row] = 1.0
        table.values["success"][row] = 0.0
    manifest = make_manifest(2, len(table))
    metrics = aggregate(manifest, table, PARAMS)
    (found,) = [
        c for q in metrics.research_questions for c in q.comparisons if c.name == "last_n vs full_history (unprotected)"
    ]
    assert (found.difference.n_tasks, found.test.n_tasks, found.detectable.n_tasks) == (2, 2, 2)
    text = render_report(manifest, FACTS, metrics)
    assert "(2 tasks, all concordant)" in text and "the test leaves" not in text


def test_the_atlas_of_one_failed_episode_is_singular() -> None:
    """failure_atlas.md began "1 failed episodes of 1 finished"."""
    text = (runs.max_steps_run() / "failure_atlas.md").read_text()
    assert "\n1 failed episode of 1 finished (" in text and BAD.search(text) is None


def test_compare_counts_one_failed_pair_in_the_singular() -> None:
    """compare's note said "1 compared pairs involve one"."""
    from types import SimpleNamespace

    from contextdelta.report._compare import _notes

    manifest = RunDirectory(runs.oracle_pair_run()).read_manifest()
    episodes: Any = {"a": [SimpleNamespace(failed=True)], "b": [SimpleNamespace(failed=False)]}
    pair: Any = ("task", "full_history", "unprotected", 1)
    (note,) = [n for n in _notes(manifest, manifest, episodes, {pair}) if n.startswith("failed trials")]
    assert "; 1 compared pair involves one," in note, note


def test_the_power_plan_names_what_its_rate_and_level_are() -> None:
    """power's columns read "rate" and "level": the rate of which metric, the level of what."""
    directory = RunDirectory(runs.oracle_pair_run())
    text = render_power_plan(plan_run(directory.read_manifest(), directory.read_episodes(), 0.5, params=PARAMS))
    assert "| pilot rate (both conditions pooled) | test level (alpha / comparisons) |" in text
    assert "| 0% (stale_action) | 0.0500 |" in text


def test_one_discordant_task_with_a_failed_trial_is_singular() -> None:
    """The failed_discordance warning said "1 of its 1 discordant tasks involve a failed trial"."""
    table = no_stale_table(2, 2)
    mine = (table.task_id == table.task_id[0]) & (table.strategy == "last_n") & (table.protection_mode == "unprotected")
    stale, failed = (int(np.flatnonzero(mine & (table.repeat == r))[0]) for r in (1, 2))
    table.values["stale_action"][stale] = 1.0
    table.failed[failed] = True
    table.termination[failed] = "provider_error"
    for metric in VERDICT_METRICS:
        table.values[metric][failed] = np.nan
    table.values["failed_trial"][failed] = 1.0
    table.values["success"][failed] = 0.0
    manifest = make_manifest(2, len(table))
    metrics = aggregate(manifest, table, PARAMS)
    (warning,) = [w for w in metrics.warnings if w.code == "failed_discordance"]
    assert "last_n vs full_history (unprotected): 1 of its 1 discordant task involves a failed trial" in (
        warning.message
    ), warning.message
