"""aggregate_metrics.json against independent re-computations from the runner's own files (task_results.csv,
tool_events.jsonl), and the degenerate cases: all pass, one task, an incomplete run."""

from __future__ import annotations

import csv
import itertools
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


def sign_flip_p(differences: list[float]) -> float:
    """Two-sided sign-flip p-value by listing every sign pattern (independent of the library)."""
    nonzero = [d for d in differences if d != 0]
    observed = abs(sum(nonzero))
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, nonzero, strict=True))) >= observed - 1e-12
        for signs in itertools.product((1, -1), repeat=len(nonzero))
    )
    return hits / (1 << len(nonzero))


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


def task_differences(rows: list[Row], a: tuple[str, str], b: tuple[str, str], value: Any) -> dict[str, float]:
    """Per task: mean of ``value`` over condition a's repeats minus the same over b's."""
    by_task: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        by_task[(r["strategy"] + "/" + r["protection_mode"], r["task_id"])].append(float(value(r)))
    tasks = sorted({r["task_id"] for r in rows})

    def mean(condition: str, task: str) -> float:
        found = by_task[(condition, task)]
        return sum(found) / len(found)

    return {t: mean("/".join(a), t) - mean("/".join(b), t) for t in tasks}


def test_research_questions_follow_the_task_level_test_written_out(trusting: Path) -> None:
    metrics = recorded(trusting)
    rows = csv_rows(trusting)
    for q in metrics.research_questions:
        assert q.not_run == [] and len(q.comparisons) == {"RQ1": 6, "RQ2": 4, "RQ3": 4}[q.id]
        raw: dict[str, float] = {}
        for c in q.comparisons:
            column = {"stale_action": "stale_action_count", "harmful_action": "harmful_action", "success": "success"}
            key = column[c.metric]
            d = task_differences(
                rows,
                (c.a.strategy, c.a.protection_mode),
                (c.b.strategy, c.b.protection_mode),
                lambda r, key=key: r[key] == "true" if key != "stale_action_count" else int(r[key]) > 0,
            )
            assert c.difference.estimate == pytest.approx(sum(d.values()) / len(d))
            discordant = sum(v != 0 for v in d.values())
            assert (c.test.n_tasks, c.test.n_discordant) == (3, discordant)
            if discordant:
                assert c.test.pvalue is not None
                assert c.test.pvalue == pytest.approx(sign_flip_p(list(d.values())))
                raw[c.name] = c.test.pvalue
            else:
                assert not c.test.testable and c.test.pvalue is None and c.name in q.not_testable
            assert c.episodes.n_pairs == 6 and c.failed_pairs == 0 and c.sensitivity is None
        assert q.family == list(raw)
        assert [c.test.pvalue_holm for c in q.comparisons if c.name in raw] == pytest.approx(holm(list(raw.values())))
    rq3 = next(q for q in metrics.research_questions if q.id == "RQ3")
    harmful_full = next(c for c in rq3.comparisons if c.a.strategy == "full_history")
    # unprotected full_history: 2 of 3 tasks harmful in both repeats; the contract blocks every stale write
    assert (harmful_full.episodes.only_a, harmful_full.episodes.only_b) == (0, 4)
    assert (harmful_full.test.n_positive, harmful_full.test.n_negative) == (0, 2)
    assert harmful_full.difference.estimate == pytest.approx(-2 / 3)
    assert harmful_full.test.pvalue == pytest.approx(0.5)  # 2 discordant tasks: the smallest p is 2 * 2^-2
    # 3 tasks cannot reach Holm's level whatever happens: the design sensitivity says so
    assert harmful_full.detectable.difference is None and harmful_full.detectable.power_at_largest == 0.0


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
    analysis = data["analysis"]
    assert {k: analysis[k] for k in ("resamples", "seed", "confidence", "alpha", "power_datasets")} == {
        "resamples": 10000,
        "seed": 0,
        "confidence": 0.95,
        "alpha": 0.05,
        "power_datasets": 2000,
    }
    assert analysis["analysis_sha256"] == analysis_sha256()
    assert (analysis["sign_flip_enumeration_limit"], analysis["sign_flip_monte_carlo_patterns"]) == (20, 100_000)
    assert data["failure_modes"] == {"never_refreshed": 16, "end_state_miss": 16}
    assert data["episodes"] == {
        "planned": 48,
        "finished": 48,
        "succeeded": 16,
        "failed_trials": 0,
        "with_verdict": 48,
        "by_termination": {"final_answer": 48},
    }
    # no failed trial; only the 3 tasks, fewer than the intervals need, are warned about
    assert [w["code"] for w in data["warnings"]] == ["few_tasks", "few_tasks"]
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


@pytest.mark.slow
def test_all_pass_is_an_exact_bound_and_missing_comparisons_are_listed() -> None:
    path = runs.oracle_pair_run()
    metrics = recorded(path)
    no_nan((path / AGGREGATE_METRICS).read_text())
    for c in metrics.conditions:
        success = c.rates["success"]
        assert (success.estimate, success.high, success.status) == (1.0, 1.0, EstimateStatus.EXACT_BOUND)
        assert success.low == pytest.approx(0.025 ** (1 / 3))  # Clopper-Pearson, 3 of 3 tasks: not 6 episodes
        assert c.failure_modes == {}
    rq1 = next(q for q in metrics.research_questions if q.id == "RQ1")
    assert len(rq1.not_run) == 5 and rq1.family == []
    (only,) = rq1.comparisons
    assert not only.test.testable and rq1.not_testable == [only.name]
    assert only.difference.status is EstimateStatus.EXACT_BOUND and only.difference.estimate == 0.0
    rq3 = next(q for q in metrics.research_questions if q.id == "RQ3")
    assert rq3.comparisons == [] and len(rq3.not_run) == 4


@pytest.mark.slow
def test_one_task_gets_exact_bounds_without_nan() -> None:
    path = runs.single_task_run()
    metrics = recorded(path)
    for c in metrics.conditions:
        assert c.tasks == 1
        success = c.rates["success"]
        assert success.status is EstimateStatus.EXACT_BOUND and success.estimate == success.high == 1.0
        assert success.low == pytest.approx(0.025)  # one task: Clopper-Pearson for 1 of 1
    text = (path / "benchmark_report.md").read_text()
    assert "nan" not in text.lower().replace("nanos", "")
    assert "100.0% [2.5%, 100.0%] exact" in text


@pytest.mark.slow
def test_incomplete_run_counts_only_finished_episodes() -> None:
    path = runs.incomplete_run()
    metrics = recorded(path)
    assert metrics.status == "incomplete"
    assert (metrics.episodes.planned, metrics.episodes.finished) == (3, 1)
    c = condition(metrics, "full_history", "unprotected")
    assert c.episodes == 1 and c.totals["cost_usd"].total > 0 and c.totals["cost_usd"].n_unknown == 0
    assert c.means["cost_usd"].estimate == pytest.approx(c.totals["cost_usd"].total)


@pytest.mark.slow
def test_all_fail_is_zero_with_an_exact_upper_bound() -> None:
    metrics = recorded(runs.unsafe_run())
    for strategy in ("full_history", "last_n", "semantic_summary", "typed_state_digest"):
        success = condition(metrics, strategy, "unprotected").rates["success"]
        assert (success.estimate, success.low, success.status) == (0.0, 0.0, EstimateStatus.EXACT_BOUND)
        assert success.high == pytest.approx(1 - 0.025 ** (1 / 3))


def test_a_run_without_finished_episodes_reports_no_data() -> None:
    directory = RunDirectory(runs.oracle_pair_run())
    report = build_report(directory.read_manifest(), [])
    text = json.dumps(report.metrics_json(), allow_nan=False)
    assert '"finished": 0' in text
    for c in report.metrics.conditions:
        assert c.episodes == 0 and c.rates["success"].status is EstimateStatus.NO_DATA
    assert all(q.comparisons == [] for q in report.metrics.research_questions)
    assert "| full_history / unprotected | 0 | 0 | no data |" in report.markdown
    assert "| episodes measured (UTC) | no episode finished |" in report.markdown
    assert "0 failed episodes of 0 finished" in report.atlas
