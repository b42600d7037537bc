"""aggregate_metrics.json against independent re-computations from the runner's own files (task_results.csv,
tool_events.jsonl), and the degenerate cases: all pass, one task, an incomplete run."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from contextdelta.report import AggregateMetrics, build_report, compute_metrics
from contextdelta.rundir.layout import AGGREGATE_METRICS, TASK_RESULTS, TOOL_EVENTS, RunDirectory
from contextdelta.stats import AnalysisParams, EstimateStatus, analysis_sha256
from tests.report import runs

Row = dict[str, str]


def csv_rows(path: Path) -> list[Row]:
    with (path / TASK_RESULTS).open(newline="") as handle:
        return list(csv.DictReader(handle))


def recorded(path: Path) -> AggregateMetrics:
    return AggregateMetrics.model_validate_json((path / AGGREGATE_METRICS).read_text())


def condition(metrics: AggregateMetrics, strategy: str, mode: str) -> Any:
    return next(
        c for c in metrics.conditions if (c.condition.strategy, c.condition.protection_mode) == (strategy, mode)
    )


def no_nan(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in JSON")

    return json.loads(text, parse_constant=refuse)


def mcnemar_p(b: int, c: int) -> float:
    """Two-sided exact binomial p-value, written out (independent of scipy)."""
    n = b + c
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def holm(pvalues: list[float]) -> list[float]:
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@pytest.fixture(scope="module")
def trusting() -> Path:
    return runs.trusting_run()


def by_condition(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    out: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        out[(row["strategy"], row["protection_mode"])].append(row)
    return out


def test_rates_equal_the_shares_in_task_results_csv(trusting: Path) -> None:
    metrics = recorded(trusting)
    groups = by_condition(csv_rows(trusting))
    assert len(metrics.conditions) == len(groups) == 8
    for (strategy, mode), rows in groups.items():
        c = condition(metrics, strategy, mode)
        assert c.episodes == len(rows) == 6 and c.tasks == 3
        share = {
            "success": sum(r["success"] == "true" for r in rows) / len(rows),
            "stale_action": sum(int(r["stale_action_count"]) > 0 for r in rows) / len(rows),
            "duplicate_action": sum(int(r["duplicate_action_count"]) > 0 for r in rows) / len(rows),
            "prohibited_action": sum(int(r["prohibited_action_count"]) > 0 for r in rows) / len(rows),
            "refresh_before_write": sum(r["refresh_before_write"] == "true" for r in rows) / len(rows),
            "end_state": sum(r["end_state"] == "true" for r in rows) / len(rows),
        }
        for metric, value in share.items():
            assert c.rates[metric].estimate == pytest.approx(value), (strategy, mode, metric)
        applicable = [r for r in rows if r["conflict_recovery"] != ""]
        rate = c.rates["conflict_recovery"]
        if applicable:
            passed = sum(r["conflict_recovery"] == "true" for r in applicable)
            assert rate.estimate == pytest.approx(passed / len(applicable))
            assert rate.n_missing == len(rows) - len(applicable)
        else:
            assert rate.status is EstimateStatus.NO_DATA and rate.estimate is None
        for name in ("agent_prompt_tokens", "summary_prompt_tokens"):
            assert c.totals[name if name != "summary_prompt_tokens" else "summary_tokens"].n_unknown == 0
        total = sum(
            int(r[k])
            for r in rows
            for k in (
                "agent_prompt_tokens",
                "agent_completion_tokens",
                "summary_prompt_tokens",
                "summary_completion_tokens",
            )
        )
        assert c.totals["total_tokens"].total == total
        assert c.means["total_tokens"].estimate == pytest.approx(total / len(rows))


def test_harmful_action_rate_equals_tool_events_jsonl(trusting: Path) -> None:
    harmful: dict[str, int] = defaultdict(int)
    for line in (trusting / TOOL_EVENTS).read_text().splitlines():
        event = json.loads(line)
        if (
            event["kind"] == "write"
            and event["outcome"] in ("executed", "rejected")
            and (event["stale"] or event["duplicate"] or event["prohibited"])
        ):
            harmful[event["run_id"]] += 1
    metrics = recorded(trusting)
    for (strategy, mode), rows in by_condition(csv_rows(trusting)).items():
        c = condition(metrics, strategy, mode)
        assert c.rates["harmful_action"].estimate == pytest.approx(
            sum(harmful[r["run_id"]] > 0 for r in rows) / len(rows)
        )
        assert c.means["harmful_action_count"].estimate == pytest.approx(
            sum(harmful[r["run_id"]] for r in rows) / len(rows)
        )
    unprotected = condition(metrics, "full_history", "unprotected").rates["harmful_action"]
    assert unprotected.estimate == pytest.approx(4 / 6) and unprotected.status is EstimateStatus.OK
    assert unprotected.low is not None and unprotected.high is not None
    assert unprotected.low <= unprotected.estimate <= unprotected.high


def _pairs(rows: list[Row], a: tuple[str, str], b: tuple[str, str], value: Any) -> tuple[int, int, float]:
    cells: dict[tuple[str, str, str, str], Row] = {
        (r["strategy"], r["protection_mode"], r["task_id"], r["repeat"]): r for r in rows
    }
    only_a = only_b = 0
    differences = []
    for (s, m, task, repeat), row in cells.items():
        if (s, m) != a:
            continue
        other = cells[(*b, task, repeat)]
        va, vb = value(row), value(other)
        only_a += va and not vb
        only_b += vb and not va
        differences.append(int(va) - int(vb))
    return only_a, only_b, sum(differences) / len(differences)


def test_research_questions_match_mcnemar_and_holm_written_out(trusting: Path) -> None:
    metrics = recorded(trusting)
    rows = csv_rows(trusting)
    questions = {q.id: q for q in metrics.research_questions}
    rq1 = questions["RQ1"]
    assert rq1.family_size == 6 and rq1.not_run == []
    raw = []
    for c in rq1.comparisons:
        only_a, only_b, diff = _pairs(
            rows,
            (c.a.strategy, c.a.protection_mode),
            (c.b.strategy, c.b.protection_mode),
            lambda r: int(r["stale_action_count"]) > 0,
        )
        assert (c.mcnemar.only_a, c.mcnemar.only_b, c.mcnemar.n_pairs) == (only_a, only_b, 6)
        assert c.mcnemar.pvalue == pytest.approx(mcnemar_p(only_a, only_b))
        assert c.difference.estimate == pytest.approx(diff)
        raw.append(c.mcnemar.pvalue)
    assert [c.mcnemar.pvalue_holm for c in rq1.comparisons] == pytest.approx(holm(raw))
    rq2 = questions["RQ2"]
    assert rq2.family_size == 4 and {c.metric for c in rq2.comparisons} == {"success", "stale_action"}
    rq3 = questions["RQ3"]
    assert rq3.family_size == 4
    harmful_full = next(c for c in rq3.comparisons if c.a.strategy == "full_history")
    # unprotected full_history: 4 of 6 episodes with a stale write; the contract blocks every one of them
    assert (harmful_full.mcnemar.only_a, harmful_full.mcnemar.only_b) == (0, 4)
    assert harmful_full.difference.estimate == pytest.approx(-4 / 6)
    assert harmful_full.mcnemar.pvalue == pytest.approx(0.125)
    # with 3 tasks a resample can draw only the task without harm: the interval reaches 0 and says so
    assert harmful_full.difference.high == 0.0 and harmful_full.difference.low == pytest.approx(-1.0)
    assert harmful_full.interval_includes_zero is True


def test_pass_k_and_token_reduction_by_hand(trusting: Path) -> None:
    metrics = recorded(trusting)
    rows = csv_rows(trusting)
    for (strategy, mode), group in by_condition(rows).items():
        c = condition(metrics, strategy, mode)
        per_task: dict[str, list[bool]] = defaultdict(list)
        for r in sorted(group, key=lambda r: int(r["repeat"])):
            per_task[r["task_id"]].append(r["success"] == "true")
        assert set(c.pass_k) == {"1", "2"}
        expected = sum(all(v[:2]) for v in per_task.values()) / len(per_task)
        assert c.pass_k["2"].all_pass.estimate == pytest.approx(expected)
        assert c.pass_k["2"].unbiased.estimate == pytest.approx(
            sum(math.comb(sum(v), 2) / math.comb(len(v), 2) for v in per_task.values()) / len(per_task)
        )

    def tokens(r: Row, summary: bool) -> int:
        agent = int(r["agent_prompt_tokens"]) + int(r["agent_completion_tokens"])
        return agent + (int(r["summary_prompt_tokens"]) + int(r["summary_completion_tokens"]) if summary else 0)

    groups = by_condition(rows)
    assert len(metrics.token_reduction) == 6
    for reduction in metrics.token_reduction:
        a = groups[(reduction.condition.strategy, reduction.condition.protection_mode)]
        b = groups[("full_history", reduction.condition.protection_mode)]
        for field, summary in (("agent_tokens", False), ("total_tokens", True)):
            expected = 1 - sum(tokens(r, summary) for r in a) / sum(tokens(r, summary) for r in b)
            assert getattr(reduction, field).estimate == pytest.approx(expected)


def test_analysis_receipt_and_failure_modes_are_recorded(trusting: Path) -> None:
    data = no_nan((trusting / AGGREGATE_METRICS).read_text())
    assert data["analysis"] == {"resamples": 10000, "seed": 0, "confidence": 0.95, "analysis_sha256": analysis_sha256()}
    assert data["failure_modes"] == {"never_refreshed": 16, "end_state_miss": 16}
    assert data["episodes"] == {
        "planned": 48,
        "finished": 48,
        "succeeded": 16,
        "failed_trials": 0,
        "by_termination": {"final_answer": 48},
    }
    assert "harmful_action" in data["definitions"] and "stale" in data["definitions"]["harmful_action"]


def test_metrics_do_not_depend_on_episode_order_and_honour_params(trusting: Path) -> None:
    directory = RunDirectory(trusting)
    manifest, records = directory.read_manifest(), directory.read_episodes()
    params = AnalysisParams(resamples=300, seed=7)
    forward = compute_metrics(manifest, records, params)
    backward = compute_metrics(manifest, list(reversed(records)), params)
    assert forward == backward
    assert forward.analysis.resamples == 300 and forward.analysis.seed == 7
    assert forward != compute_metrics(manifest, records, AnalysisParams(resamples=300, seed=8))


def test_all_pass_is_constant_and_missing_comparisons_are_listed() -> None:
    path = runs.oracle_pair_run()
    metrics = recorded(path)
    no_nan((path / AGGREGATE_METRICS).read_text())
    for c in metrics.conditions:
        assert c.rates["success"].estimate == 1.0 and c.rates["success"].status is EstimateStatus.CONSTANT
        assert (c.rates["success"].low, c.rates["success"].high) == (1.0, 1.0)
        assert c.failure_modes == {}
    rq1 = next(q for q in metrics.research_questions if q.id == "RQ1")
    assert rq1.family_size == 1 and len(rq1.not_run) == 5
    (only,) = rq1.comparisons
    assert only.mcnemar.pvalue == 1.0 and only.mcnemar.pvalue_holm == 1.0 and only.interval_includes_zero is True
    rq3 = next(q for q in metrics.research_questions if q.id == "RQ3")
    assert rq3.comparisons == [] and len(rq3.not_run) == 4


def test_one_task_collapses_intervals_without_nan() -> None:
    path = runs.single_task_run()
    metrics = recorded(path)
    for c in metrics.conditions:
        assert c.tasks == 1
        success = c.rates["success"]
        assert success.status is EstimateStatus.SINGLE_TASK and success.low == success.high == success.estimate == 1.0
    text = (path / "benchmark_report.md").read_text()
    assert "nan" not in text.lower().replace("nanos", "")
    assert "interval collapsed" not in text  # notes stay in the JSON; the report prints [v, v] and explains it


def test_incomplete_run_counts_only_finished_episodes() -> None:
    path = runs.incomplete_run()
    metrics = recorded(path)
    assert metrics.status == "incomplete"
    assert (metrics.episodes.planned, metrics.episodes.finished) == (3, 1)
    c = condition(metrics, "full_history", "unprotected")
    assert c.episodes == 1 and c.totals["cost_usd"].total > 0 and c.totals["cost_usd"].n_unknown == 0
    assert c.means["cost_usd"].estimate == pytest.approx(c.totals["cost_usd"].total)


def test_all_fail_is_a_constant_zero() -> None:
    metrics = recorded(runs.unsafe_run())
    for strategy in ("full_history", "last_n", "semantic_summary", "typed_state_digest"):
        success = condition(metrics, strategy, "unprotected").rates["success"]
        assert (success.estimate, success.low, success.high) == (0.0, 0.0, 0.0)
        assert success.status is EstimateStatus.CONSTANT


def test_a_run_without_finished_episodes_reports_no_data() -> None:
    directory = RunDirectory(runs.oracle_pair_run())
    report = build_report(directory.read_manifest(), [])
    text = json.dumps(report.metrics_json(), allow_nan=False)
    assert '"finished": 0' in text
    for c in report.metrics.conditions:
        assert c.episodes == 0 and c.rates["success"].status is EstimateStatus.NO_DATA
    assert all(q.comparisons == [] for q in report.metrics.research_questions)
    assert "| full_history / unprotected | 0 | no data | no data |" in report.markdown
    assert "| episodes measured (UTC) | no episode finished |" in report.markdown
    assert "0 failed episodes of 0 finished" in report.atlas
