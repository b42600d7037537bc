"""The metrics pipeline on synthetic episode tables (no run needed): the issue's headline cells and invariants."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from benchmarks.stats_scaling import make_manifest, make_table
from contextdelta.report import METRIC_DEFINITIONS, EpisodeTable, RunFacts, aggregate, render_report
from contextdelta.stats import AnalysisParams, EstimateStatus

PARAMS = AnalysisParams(resamples=2000, seed=1, power_datasets=500)
FACTS = RunFacts(first_started="", last_finished="", failed_trials=())


def no_stale_table(n_tasks: int = 24, repeats: int = 3) -> EpisodeTable:
    """Every strategy and mode, ``repeats`` repeats, and not one stale (or harmful) action anywhere."""
    full = make_table(n_tasks)
    keep = full.repeat <= repeats
    values = {name: column[keep].copy() for name, column in full.values.items()}
    for name in ("stale_action", "harmful_action", "stale_action_count", "harmful_action_count"):
        values[name][:] = 0.0
    values["failed_trial"][:] = 0.0
    return EpisodeTable(
        task_id=full.task_id[keep],
        world=full.world[keep],
        hazard=full.hazard[keep],
        strategy=full.strategy[keep],
        protection_mode=full.protection_mode[keep],
        repeat=full.repeat[keep],
        failed=np.zeros(int(keep.sum()), dtype=bool),
        termination=np.full(int(keep.sum()), "final_answer"),
        failure=full.failure[keep],
        values=values,
    )


def test_zero_of_576_stale_actions_over_24_tasks_prints_an_exact_bound_above_zero() -> None:
    table = no_stale_table()
    assert len(table) == 576 and set(table.values) == set(METRIC_DEFINITIONS)
    manifest = make_manifest(24, 576)
    metrics = aggregate(manifest, table, PARAMS)
    stale = [c.rates["stale_action"] for c in metrics.conditions]
    assert {(e.n_tasks, e.n_episodes) for e in stale} == {(24, 72)}
    assert all(e.status is EstimateStatus.EXACT_BOUND and e.high is not None and e.high > 0.14 for e in stale)
    text = render_report(manifest, FACTS, metrics)
    assert "| 0% [0%, 14%] exact |" in text or "| 0.0% [0.0%, 14.2%] exact |" in text


def test_a_report_with_every_condition_pooled_over_576_episodes() -> None:
    """The issue's exact case: 0 of 576 episodes in one condition, over 24 tasks (24 repeats each)."""
    table = no_stale_table(24, 3)
    rows = (table.strategy == "full_history") & (table.protection_mode == "unprotected")
    tiled = EpisodeTable(
        task_id=np.repeat(table.task_id[rows], 8),
        world=np.repeat(table.world[rows], 8),
        hazard=np.repeat(table.hazard[rows], 8),
        strategy=np.repeat(table.strategy[rows], 8),
        protection_mode=np.repeat(table.protection_mode[rows], 8),
        repeat=(np.repeat(table.repeat[rows], 8) - 1) * 8 + np.tile(np.arange(1, 9), int(rows.sum())),
        failed=np.zeros(576, dtype=bool),
        termination=np.full(576, "final_answer"),
        failure=np.repeat(table.failure[rows], 8),
        values={k: np.repeat(v[rows], 8) for k, v in table.values.items()},
    )
    manifest = make_manifest(24, 576).model_copy(
        update={"strategies": ["full_history"], "protection_modes": ["unprotected"], "repeats": 24}
    )
    metrics = aggregate(manifest, tiled, PARAMS)
    stale = metrics.conditions[0].rates["stale_action"]
    assert (stale.estimate, stale.n_tasks, stale.n_episodes, stale.status) == (0.0, 24, 576, EstimateStatus.EXACT_BOUND)
    assert stale.high is not None and abs(stale.high - (1 - 0.025 ** (1 / 24))) < 1e-12
    text = render_report(manifest, FACTS, metrics)
    line = next(line for line in text.splitlines() if line.startswith("| full_history / unprotected | 24 | 576 | 0 |"))
    assert "0.0% [0.0%, 14.2%] exact" in line or "0% [0%, 14%] exact" in line


def _relabelled_pvalue(differences: list[Fraction]) -> float:
    """P(|sum of +-d| >= |observed sum|) over every sign pattern, as exact fractions (a dictionary of sums)."""
    sums: dict[Fraction, Fraction] = {Fraction(0): Fraction(1)}
    for d in differences:
        step: dict[Fraction, Fraction] = {}
        for total, chance in sums.items():
            for signed in (d, -d):
                step[total + signed] = step.get(total + signed, Fraction(0)) + chance / 2
        sums = step
    observed = abs(sum(differences, Fraction(0)))
    return float(sum((chance for total, chance in sums.items() if abs(total) >= observed), Fraction(0)))


def test_failed_trials_on_one_side_leave_the_primary_test_on_the_shared_repeats() -> None:
    """A failed trial has no stale-action value, so its task has fewer episodes on that side: the task enters the
    sign-flip test on the repeats both conditions have (with equal sides every episode counts), computed here from
    the table with dictionaries and fractions."""
    full = make_table(24)
    rng = np.random.default_rng(4)
    # full_history (side b of every RQ1 comparison) loses 40% of its later repeats to provider errors
    lost = (full.strategy == "full_history") & (full.repeat > 1) & (rng.random(len(full)) < 0.4)
    values = {name: column.copy() for name, column in full.values.items()}
    for name, column in values.items():
        if name not in ("success", "failed_trial", "steps", "agent_prompt_tokens", "agent_completion_tokens"):
            column[lost] = np.nan
    values["success"][lost] = 0.0
    values["failed_trial"][lost] = 1.0
    table = dataclasses.replace(
        full,
        failed=full.failed | lost,
        termination=np.where(lost, "provider_error", full.termination),
        failure=np.where(lost, "provider_error", full.failure),
        values=values,
    )
    metrics = aggregate(make_manifest(24, len(table)), table, PARAMS)
    rq1 = next(q for q in metrics.research_questions if q.id == "RQ1")
    checked = 0
    for comparison in rq1.comparisons:
        sides = []
        for key in (comparison.a, comparison.b):
            cells: dict[str, dict[int, float]] = {}
            rows = (table.strategy == key.strategy) & (table.protection_mode == key.protection_mode)
            for task, repeat, value in zip(
                table.task_id[rows], table.repeat[rows], table.values["stale_action"][rows], strict=True
            ):
                if not np.isnan(value):
                    cells.setdefault(str(task), {})[int(repeat)] = float(value)
            sides.append(cells)
        a, b = sides
        differences = []
        tested: dict[str, bool] = {}  # task -> discordant in what the test sees
        for task in sorted(set(a) & set(b)):
            ra, rb = a[task], b[task]
            if len(ra) != len(rb):  # equally many per side: shared repeats first, then each side's earliest others
                k, shared = min(len(ra), len(rb)), set(ra) & set(rb)
                ra = {r: ra[r] for r in sorted(ra, key=lambda r: (r not in shared, r))[:k]}
                rb = {r: rb[r] for r in sorted(rb, key=lambda r: (r not in shared, r))[:k]}
            if ra:
                differences.append(Fraction(int(sum(ra.values())), len(ra)) - Fraction(int(sum(rb.values())), len(rb)))
                tested[task] = differences[-1] != 0
        discordant = [d for d in differences if d != 0]
        test = comparison.test
        assert test.n_discordant == len(discordant)
        # the failed-trial accounting counts the tasks the test finds discordant that have a failed pair
        conditions = {(k.strategy, k.protection_mode) for k in (comparison.a, comparison.b)}
        failed_tasks = {
            str(task)
            for task, strategy, mode, failed in zip(
                table.task_id, table.strategy, table.protection_mode, table.failed, strict=True
            )
            if failed and (strategy, mode) in conditions
        }
        assert comparison.failed_discordant_tasks == sum(1 for task in tested if tested[task] and task in failed_tasks)
        assert comparison.failed_discordant_tasks <= test.n_discordant
        if discordant:
            assert test.pvalue == pytest.approx(_relabelled_pvalue(discordant), rel=1e-9, abs=1e-15)
            checked += 1
    assert checked >= 4
