"""The report's numbers as the dashboard's rows and chart points: the Conditions page's (from the run's
``aggregate_metrics.json``, the same cells as ``benchmark_report.md``) and the Compare page's (the same cells as
``contextdelta compare``), on real run directories from the scripted server."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.dashboard import _charts
from contextdelta.dashboard.data import load_comparison, load_run
from contextdelta.dashboard.tables import (
    CHART_METRICS,
    baseline_difference_points,
    breakdown_rows,
    compare_difference_points,
    compare_tables,
    comparison_rows,
    condition_rows,
    rate_matrix,
    rate_points,
    token_reduction_rows,
)
from contextdelta.report import AggregateMetrics, pct, plural, pp
from contextdelta.rundir.records import EpisodeRecord
from contextdelta.stats import Estimate
from tests.report import runs


@pytest.fixture(scope="module")
def trusting_records(trusting_run: Path) -> dict[str, EpisodeRecord]:
    return runs.records(trusting_run)


@pytest.mark.slow
def test_rates_match_the_episodes_of_each_condition(
    trusting_run: Path, trusting_records: dict[str, EpisodeRecord]
) -> None:
    metrics = load_run(trusting_run).metrics
    episodes: dict[tuple[str, str], list[EpisodeRecord]] = defaultdict(list)
    for r in trusting_records.values():
        episodes[(r.strategy, r.protection_mode)].append(r)
    points = rate_points(metrics)
    assert len(points) == 8 * 3
    for point in points:
        mine = episodes[(point["strategy"], point["protection_mode"])]
        if point["metric"] == "success":
            expected = sum(r.success and not r.failed for r in mine) / len(mine)
        elif point["metric"] == "stale action":
            expected = sum(r.verdict.stale_action_count > 0 for r in mine) / len(mine)
        else:
            continue
        assert point["rate"] == pytest.approx(expected)
        assert point["low"] <= point["rate"] <= point["high"]
    by_condition = {(c.condition.strategy, c.condition.protection_mode): c for c in metrics.conditions}
    decimals = metrics.analysis.rate_decimals
    for key, _ in CHART_METRICS:
        matrix = rate_matrix(metrics, key)
        assert [row["strategy"] for row in matrix] == [
            "full_history",
            "last_n",
            "semantic_summary",
            "typed_state_digest",
        ]
        for row in matrix:
            assert list(row) == ["strategy", "unprotected", "freshness_contract"]  # three columns: fits 1366 px
            for mode in ("unprotected", "freshness_contract"):
                rate = by_condition[(row["strategy"], mode)].rates[key].estimate
                assert rate is not None
                assert row[mode].startswith(f"{100 * rate:.{decimals}f}%")


def test_condition_rows_show_rates_first_then_pass_k_and_token_cost(
    trusting_run: Path, trusting_records: dict[str, EpisodeRecord]
) -> None:
    metrics = load_run(trusting_run).metrics
    rows = {row["condition"]: row for row in condition_rows(metrics)}
    row = rows["full_history / unprotected"]
    assert list(row)[:4] == ["condition", "success", "stale action", "harmful action"]
    assert row["episodes"] == 6 and row["tasks"] == 3
    assert {"pass^1", "pass^2", "pass^2 unbiased"} <= set(row)
    mine = [r for r in trusting_records.values() if (r.strategy, r.protection_mode) == ("full_history", "unprotected")]
    total = sum(r.trace.totals.agent_usage.total_tokens + r.trace.totals.summary_usage.total_tokens for r in mine)
    assert row["total tokens"] == f"{total:,}"


def test_an_unknown_or_missing_total_is_worded_as_the_report_words_it(trusting_run: Path) -> None:
    """The Conditions table printed a bare "unknown" where the report prints "unknown (no price for the model)", and
    "unknown" for a condition without an episode to count, where the report prints "no data"."""
    metrics = load_run(trusting_run).metrics
    first = metrics.conditions[0]
    cost, tokens = first.totals["cost_usd"], first.totals["total_tokens"]
    unpriced = first.model_copy(
        update={
            "totals": {
                **first.totals,
                "cost_usd": cost.model_copy(update={"n_known": 0, "n_unknown": first.episodes}),
                "total_tokens": tokens.model_copy(update={"n_known": 0, "n_unknown": 0}),
            }
        }
    )
    [row] = condition_rows(metrics.model_copy(update={"conditions": [unpriced]}))
    assert row["cost (USD)"] == "unknown (no price for the model)"
    assert row["total tokens"] == "no data"


def test_comparison_rows_are_the_task_level_tests_with_the_test_first(trusting_run: Path) -> None:
    metrics = load_run(trusting_run).metrics
    rows = comparison_rows(metrics)
    assert len(rows) == sum(len(q.comparisons) for q in metrics.research_questions) == 6 + 4 + 4
    for row in rows:
        assert row["both"] + row["only a"] + row["only b"] + row["neither"] == row["episode pairs"] == 6
        assert row["a higher"] + row["b higher"] == row["discordant tasks"] <= row["tasks"] == 3
        assert (row["p (sign-flip)"] == "not testable") == (row["discordant tasks"] == 0)
    assert {row["question"] for row in rows} == {"RQ1", "RQ2", "RQ3"}
    # the effect, its p-values and the discordant tasks come before the rates (in view on a 1366 px screen)
    assert list(rows[0])[:6] == [
        "question",
        "comparison",
        "difference a - b (task means)",
        "p (Holm)",
        "p (sign-flip)",
        "discordant tasks",
    ]


def test_the_detectable_difference_column_names_the_power_it_was_computed_for(trusting_run: Path) -> None:
    metrics = load_run(trusting_run).metrics
    assert "detectable (80% power)" in comparison_rows(metrics)[0]
    at_90 = metrics.model_copy(update={"analysis": metrics.analysis.model_copy(update={"target_power": 0.9})})
    (row, *_) = comparison_rows(at_90)
    assert "detectable (90% power)" in row and "detectable (80% power)" not in row


def test_baseline_differences_are_the_report_comparisons_against_full_history(trusting_run: Path) -> None:
    metrics = load_run(trusting_run).metrics
    points = baseline_difference_points(metrics)
    expected = [
        c
        for q in metrics.research_questions
        for c in q.comparisons
        if c.b.strategy == "full_history" and c.a.protection_mode == c.b.protection_mode
    ]
    assert len(points) == len(expected) == 3 * 2  # each reduced strategy, in each mode
    for point, c in zip(points, expected, strict=True):
        assert (point["label"], point["group"]) == (c.a.strategy, c.a.protection_mode)
        assert point["metric"] == "stale action" and point["question"] == "RQ1"
        assert (point["difference"], point["low"], point["high"]) == (
            c.difference.estimate,
            c.difference.low,
            c.difference.high,
        )
        assert point["interval"] == pp(c.difference, metrics.analysis.rate_decimals)
    chart = _charts.difference_chart(points, title="t").to_dict()
    assert chart["spacing"] == _charts.FACET_SPACING and chart["facet"]["column"]["field"] == "metric"


def test_breakdown_rows_give_every_condition_per_hazard_and_world(trusting_run: Path) -> None:
    metrics = load_run(trusting_run).metrics
    hazards = breakdown_rows(metrics, "hazard", "stale_action")
    assert [row["hazard"] for row in hazards] == ["conflicting_observations", "hidden_mutation"]
    assert [row["tasks"] for row in hazards] == [1, 2]
    worlds = breakdown_rows(metrics, "world", "success")
    assert [row["world"] for row in worlds] == ["config", "order"]
    for row in (*hazards, *worlds):
        assert len(row) == 3 + 8  # the row's label and counts, and the 8 conditions
    assert hazards[0]["full_history / unprotected"].startswith("100")
    one_mode = breakdown_rows(metrics, "hazard", "stale_action", "unprotected")
    assert list(one_mode[0]) == [
        "hazard",
        "full_history",
        "last_n",
        "semantic_summary",
        "typed_state_digest",
        "tasks",
        "episodes per condition",
    ]
    for full, row in zip(hazards, one_mode, strict=True):
        assert all(row[s] == full[f"{s} / unprotected"] for s in ("full_history", "last_n"))


def test_rate_chart_facets_stand_apart(trusting_run: Path) -> None:
    spec = _charts.rate_chart(rate_points(load_run(trusting_run).metrics), [m for _, m in CHART_METRICS]).to_dict()
    assert spec["spacing"] >= 30
    assert spec["facet"]["column"]["sort"] == ["success", "stale action", "harmful action"]
    axis = spec["spec"]["layer"][0]["encoding"]["x"]["axis"]
    assert axis["labelFlush"] is True and axis["values"] == [0, 0.25, 0.5, 0.75, 1]
    assert 3 * spec["spec"]["width"] + 2 * spec["spacing"] < 900  # three facets fit the 1366 px main column


def compare_markdown_rows(text: str) -> dict[str, list[list[str]]]:
    """The rows of each metric's table in ``contextdelta compare``'s Markdown, by metric."""
    tables: dict[str, list[list[str]]] = {}
    metric = None
    for line in text.splitlines():
        if line.startswith("## "):
            metric = line[3:].strip()
            tables[metric] = []
        elif metric and line.startswith("|") and not line.startswith("|---"):
            tables[metric].append([cell.strip() for cell in line.strip("|").split("|")])
    return {m: rows[1:] for m, rows in tables.items()}  # without the header row


def test_compare_tables_hold_the_cells_contextdelta_compare_prints(
    tmp_path: Path, trusting_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = runs.oracle_pair_run()
    for path in (trusting_run, pair):
        runs.copy_run(path, tmp_path)
    printed = CliRunner().invoke(app, ["compare", trusting_run.name, pair.name, "--results-dir", str(tmp_path)])
    assert printed.exit_code == 0, printed.output
    expected = compare_markdown_rows(printed.stdout)
    report = load_comparison(trusting_run, pair)
    tables = compare_tables(report)
    assert [metric for metric, _ in tables] == list(expected) == ["success", "stale_action", "harmful_action"]
    for metric, rows in tables:
        assert len(rows) == len(expected[metric]) == 2
        for row, cells in zip(rows, expected[metric], strict=True):
            assert sorted(row.values()) == sorted(cells)  # the same cells, in the page's column order
            assert list(row)[:5] == [
                "condition",
                "difference a - b (task means)",
                next(k for k in row if k.startswith("p (Holm")),
                "p (sign-flip over tasks)",
                "discordant tasks (a / b higher)",
            ]
            assert row["condition"] == cells[0] and row["difference a - b (task means)"] == cells[3]
    points = compare_difference_points(report)
    assert len(points) == 3 * 2
    by = {(p["metric"], p["label"], p["group"]): p for p in points}
    success = report.families[0].comparisons[1]
    assert by[("success", "last_n", "unprotected")]["difference"] == success.comparison.difference.estimate


def test_a_comparison_without_values_has_no_detectable_difference() -> None:
    """The Conditions page said "none" detectable for a comparison simulated from no task (every pair a failed
    trial), as if the design could not reach 80% power; it says "no data", as the report does."""
    from contextdelta.report import AggregateMetrics
    from tests.report.test_power_no_data import all_failed_run

    metrics = AggregateMetrics.model_validate_json((all_failed_run() / "aggregate_metrics.json").read_text())
    (row,) = comparison_rows(metrics)
    assert row["detectable (80% power)"] == "no data"


@pytest.mark.slow
def test_every_percentage_has_the_reports_decimals(tmp_path: Path, trusting_run: Path) -> None:
    """With few resamples the report prints whole percentages (rate_decimals 0): so do pass^k, the flip rate, the
    chart's intervals and the token reduction, cell for cell as ``benchmark_report.md``. The rates' plain percentile
    levels (``--cluster-interval percentile``) keep their ends' Monte-Carlo error: expanded for this run's 3 tasks,
    each end is an extreme replicate, which ties with its neighbours and has none."""
    path = runs.copy_run(trusting_run, tmp_path)
    flags = ["--resamples", "100", "--cluster-interval", "percentile"]
    done = CliRunner().invoke(app, ["report", path.name, *flags, "--results-dir", str(tmp_path)])
    assert done.exit_code == 0, done.output
    metrics = load_run(path).metrics
    assert metrics.analysis.rate_decimals == 0
    report = (path / "benchmark_report.md").read_text()
    rows = condition_rows(metrics)
    for row, c in zip(rows, metrics.conditions, strict=True):
        line = next(
            x for x in report.splitlines() if x.startswith(f"| {c.condition.label} | {c.tasks} | {c.episodes} |")
        )
        for k in c.pass_k:
            assert f"| {row[f'pass^{k}']}" in line
            if int(k) > 1:
                assert f"unbiased {row[f'pass^{k} unbiased']} |" in line
        assert line.endswith(f"| {row['flip rate (success)']} |")
    assert all(p["interval"] == pct(e, 0) for p, e in zip(rate_points(metrics), chart_estimates(metrics), strict=True))
    reductions = token_reduction_rows(metrics)
    assert reductions
    for r in reductions:
        assert f"| {r['agent tokens saved']} | {r['agent + summary tokens saved']} |" in report
    cells = [v for row in (*rows, *reductions) for v in row.values() if isinstance(v, str) and "%" in v]
    assert cells and not [v for v in cells if re.search(r"\d\.\d%", v)]


def chart_estimates(metrics: AggregateMetrics) -> list[Estimate]:
    return [c.rates[key] for c in metrics.conditions for key, _ in CHART_METRICS]


def test_breakdown_rows_state_the_counts_the_report_states() -> None:
    """With failed trials (no safety verdict) the breakdown's "episodes per condition" was the largest count of any
    cell, so cells that rest on that many episodes repeated their counts and the row disagreed with the report's,
    which states the (tasks, episodes) most cells rest on. Every cell and the row's counts are now the report's."""
    run = runs.faulted_run()
    metrics = load_run(run).metrics
    report = (run / "benchmark_report.md").read_text().splitlines()
    labels = [c.condition.label for c in metrics.conditions]
    for metric in ("success", "stale_action"):
        start = report.index(f"### The {metric.replace('_', '-')} rate per hazard")
        printed = {}
        for line in report[start + 4 :]:
            if not line.startswith("|"):
                break
            label, *cells = [cell.strip() for cell in line.strip("|").split("|")]
            printed[label] = cells
        for row in breakdown_rows(metrics, "hazard", metric):
            label = (
                f"{row['hazard']} ({plural(row['tasks'], 'task')}, {plural(row['episodes per condition'], 'episode')})"
            )
            assert printed[label] == [row[c] for c in labels], (metric, label)
