"""Failed trials (a run whose server refuses some requests as too long): counted as failures in success, left out
of the safety rates, counted per comparison with a sensitivity row, warned about, and split by termination."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest

from contextdelta.report import AggregateMetrics
from contextdelta.rundir.layout import AGGREGATE_METRICS, BENCHMARK_REPORT, TASK_RESULTS
from contextdelta.verify import verify_run
from tests.report import runs

Row = dict[str, str]


@pytest.fixture(scope="module")
def faulted() -> Path:
    return runs.faulted_run()


def rows(path: Path) -> list[Row]:
    with (path / TASK_RESULTS).open(newline="") as handle:
        return list(csv.DictReader(handle))


def metrics(path: Path) -> AggregateMetrics:
    return AggregateMetrics.model_validate_json((path / AGGREGATE_METRICS).read_text())


@pytest.mark.slow
def test_the_run_has_failed_trials_and_verifies(faulted: Path) -> None:
    failed = [r for r in rows(faulted) if r["failed"] == "true"]
    assert failed and {r["termination_reason"] for r in failed} == {"context_window_exceeded"}
    assert verify_run(faulted).ok


def test_success_counts_failed_trials_as_failures_and_safety_rates_leave_them_out(faulted: Path) -> None:
    by_condition: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows(faulted):
        by_condition[(r["strategy"], r["protection_mode"])].append(r)
    m = metrics(faulted)
    for c in m.conditions:
        mine = by_condition[(c.condition.strategy, c.condition.protection_mode)]
        verdict = [r for r in mine if r["failed"] == "false"]
        assert (c.episodes, c.episodes_with_verdict, c.failed_trials) == (
            len(mine),
            len(verdict),
            len(mine) - len(verdict),
        )
        success = c.rates["success"]
        assert success.n_episodes == len(mine)
        assert success.estimate == pytest.approx(sum(r["success"] == "true" for r in mine) / len(mine))
        for metric, column in (("harmful_action", "harmful_action"), ("stale_action", "no_stale_action")):
            rate = c.rates[metric]
            hits = [r for r in verdict if (r[column] == "true") == (metric == "harmful_action")]
            assert rate.n_episodes == len(verdict) and rate.n_missing == len(mine) - len(verdict)
            assert rate.estimate == pytest.approx(len(hits) / len(verdict))
        assert c.failure_modes.get("context_window_exceeded", 0) == c.failed_trials
    assert m.failure_modes["context_window_exceeded"] == sum(c.failed_trials for c in m.conditions)
    assert "provider_error" not in m.failure_modes


def test_each_comparison_counts_its_failed_pairs_and_has_a_sensitivity_row(faulted: Path) -> None:
    table = rows(faulted)
    failed = {(r["strategy"], r["protection_mode"], r["task_id"], r["repeat"]) for r in table if r["failed"] == "true"}
    m = metrics(faulted)
    compared = [c for q in m.research_questions for c in q.comparisons]
    assert compared
    for c in compared:
        cells = {
            (r["task_id"], r["repeat"])
            for r in table
            if (r["strategy"], r["protection_mode"]) == (c.a.strategy, c.a.protection_mode)
        }
        involved = {
            cell
            for cell in cells
            if (c.a.strategy, c.a.protection_mode, *cell) in failed
            or (c.b.strategy, c.b.protection_mode, *cell) in failed
        }
        assert c.failed_pairs == len(involved)
        assert (c.sensitivity is None) == (not involved)
        if c.sensitivity is not None:
            kept = cells - involved
            assert c.sensitivity.episodes.n_pairs <= len(kept)
            assert c.sensitivity.test.n_tasks == len({task for task, _ in kept})
    text = (faulted / BENCHMARK_REPORT).read_text()
    assert "## Warnings" in text and "**failed_trials**" in text
    assert "failed-trial pairs |" in text  # the sensitivity rows
    warned = [w for w in m.warnings if w.code == "failed_discordance"]
    for c in compared:
        majority = c.test.n_discordant > 0 and 2 * c.failed_discordant_tasks > c.test.n_discordant
        assert majority == any(c.name in w.message for w in warned)
