"""Sections of the metrics pipeline about conditions: per-condition numbers, breakdowns per hazard and world,
and token reduction versus full_history."""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from contextdelta.attribution import FailureMode
from contextdelta.report._context import ALL, WITH_VERDICT, MetricsContext, Subset
from contextdelta.report._format import NO_BLOCKED_WRITE
from contextdelta.report._models import (
    Breakdown,
    BreakdownCell,
    ConditionKey,
    ConditionMetrics,
    TokenReduction,
    TokenTotal,
)
from contextdelta.report._table import (
    BREAKDOWN_METRICS,
    FAILED_TERMINATION_ORDER,
    FAILURE_MODE_ORDER,
    FLIP_METRICS,
    MEAN_METRICS,
    RATE_METRICS,
    TOKEN_METRICS,
)
from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    Estimate,
    EstimateStatus,
    PairedSample,
    bootstrap_means,
    bootstrap_relative_reductions,
    check_binary,
    flip_rates,
    pair_by_task_repeat,
    pass_hat_k_many,
)

BASELINE_STRATEGY = "full_history"
DESIGN_METRIC = "failed_trial"
"""A metric every episode has: its samples are the designs (all episodes of a condition) that samples with missing
values are resampled on, so that every metric of a condition shares one bootstrap draw."""


def empty_estimate(params: AnalysisParams, note: str = "no data: the condition has no finished episode") -> Estimate:
    """The estimate of a condition without episodes."""
    return Estimate(
        estimate=None,
        low=None,
        high=None,
        confidence=params.confidence,
        n_tasks=0,
        n_episodes=0,
        status=EstimateStatus.NO_DATA,
        note=note,
    )


Condition = tuple[str, str]


def _estimates(
    ctx: MetricsContext, requests: list[tuple[str, Subset]]
) -> dict[tuple[str, Subset], dict[ConditionKey, Estimate]]:
    """Rates (with exact bounds) and means of every (metric, subset) requested, for every condition, in one batch:
    samples of the same layout share one draw of bootstrap indices, so a batch costs one draw per layout."""
    samples: dict[tuple[str, Subset, Condition], ClusteredSample] = {}
    bounds: dict[tuple[str, Subset, Condition], tuple[float, float] | None] = {}
    designs: dict[tuple[str, Subset, Condition], ClusteredSample] = {}
    for metric, subset in requests:
        every = ctx.samples(DESIGN_METRIC, subset)
        for condition, sample in ctx.samples(metric, subset).items():
            if metric in RATE_METRICS:
                check_binary(sample, f"the {metric} rate")
            key = (metric, subset, condition)
            samples[key] = sample
            bounds[key] = (0.0, 1.0) if metric in RATE_METRICS else None
            if sample.n_missing:
                designs[key] = every[condition]
    found = bootstrap_means(samples, ctx.params, bounds=bounds, designs=designs)
    return {
        (metric, subset): {
            k: found.get((metric, subset, (k.strategy, k.protection_mode)), empty_estimate(ctx.params))
            for k in ctx.keys
        }
        for metric, subset in requests
    }


def estimates_for(
    ctx: MetricsContext, requests: list[tuple[str, Subset]]
) -> dict[tuple[str, Subset], dict[ConditionKey, Estimate]]:
    """Rates (with exact bounds) and means of every (metric, subset) requested, for every condition of ``ctx``: the
    machinery every section shares (the control and dose-response sections too)."""
    return _estimates(ctx, requests)


def _with_reasons(rates: dict[str, Estimate], with_verdict: int) -> dict[str, Estimate]:
    """``rates`` with the reason of a conflict-recovery rate without data where episodes had a verdict: none had a
    blocked write, so the grader did not apply (`NO_BLOCKED_WRITE`), which is not a lack of data."""
    recovery = rates.get("conflict_recovery")
    if recovery is not None and recovery.estimate is None and recovery.n_episodes == 0 and with_verdict:
        rates["conflict_recovery"] = recovery.model_copy(update={"note": NO_BLOCKED_WRITE})
    return rates


def conditions_section(ctx: MetricsContext) -> list[ConditionMetrics]:
    """Every per-condition number: rates, means, totals, pass^k, flip rates and failure-mode counts."""
    params, table = ctx.params, ctx.table
    estimates = _estimates(ctx, [(m, ALL) for m in (*RATE_METRICS, *MEAN_METRICS)])
    ks = list(range(1, max(1, ctx.manifest.repeats) + 1))
    pass_k = pass_hat_k_many(ctx.samples("success"), ks, params)
    flips = flip_rates({(m, c): s for m in FLIP_METRICS for c, s in ctx.samples(m).items()}, params)
    out = []
    for k in ctx.keys:
        condition = (k.strategy, k.protection_mode)
        rows = ctx.rows(condition)
        totals = {}
        for metric in (*TOKEN_METRICS, "cost_usd"):
            values = table.values[metric][rows]
            known = values[~np.isnan(values)]
            totals[metric] = TokenTotal(
                total=float(known.sum()), n_known=int(known.size), n_unknown=int(values.size - known.size)
            )
        failed_rows = table.failed[rows]
        terminations = Counter(table.failure[rows][failed_rows].tolist())
        modes = Counter(table.failure[rows][~failed_rows].tolist())
        modes[FailureMode.PROVIDER_ERROR.value] = int(failed_rows.sum())  # the atlas's mode of every failed trial
        failed = int(failed_rows.sum())
        out.append(
            ConditionMetrics(
                condition=k,
                episodes=int(rows.size),
                episodes_with_verdict=int(rows.size) - failed,
                tasks=int(np.unique(table.task_id[rows]).size),
                failed_trials=failed,
                rates=_with_reasons({m: estimates[(m, ALL)][k] for m in RATE_METRICS}, int(rows.size) - failed),
                means={m: estimates[(m, ALL)][k] for m in MEAN_METRICS},
                totals=totals,
                pass_k={str(n): p for n, p in pass_k.get(condition, {}).items()},
                flip_rates={m: flips.get((m, condition), empty_estimate(params)) for m in FLIP_METRICS},
                failure_modes={key: modes[key] for key in FAILURE_MODE_ORDER if modes[key]},
                failed_trials_by_termination=(
                    {key: terminations[key] for key in FAILED_TERMINATION_ORDER if terminations[key]} or None
                ),
            )
        )
    return out


def breakdowns_section(ctx: MetricsContext) -> list[Breakdown]:
    """`BREAKDOWN_METRICS` per condition on the tasks of each hazard, then of each world (sorted by name)."""
    table = ctx.table
    subsets: list[tuple[Subset, npt.NDArray[np.str_]]] = [
        (("hazard", value), table.hazard) for value in sorted(set(table.hazard.tolist()))
    ] + [(("world", value), table.world) for value in sorted(set(table.world.tolist()))]
    estimates = _estimates(ctx, [(m, subset) for subset, _ in subsets for m in BREAKDOWN_METRICS])
    out = []
    for subset, column in subsets:
        cells = []
        for k in ctx.keys:
            rows = ctx.rows((k.strategy, k.protection_mode), subset)
            cells.append(
                BreakdownCell(
                    condition=k,
                    episodes=int(rows.size),
                    failed_trials=int(table.failed[rows].sum()),
                    rates={m: estimates[(m, subset)][k] for m in BREAKDOWN_METRICS},
                )
            )
        out.append(
            Breakdown(
                dimension="hazard" if subset[0] == "hazard" else "world",
                value=subset[1],
                tasks=int(np.unique(table.task_id[column == subset[1]]).size),
                cells=cells,
            )
        )
    return out


def paired_reductions(
    ctx: MetricsContext, metrics: tuple[str, ...]
) -> list[tuple[ConditionKey, ConditionKey, dict[str, Estimate]]]:
    """For each strategy other than full_history whose mode has a full_history condition: (condition, baseline,
    the relative reduction ``1 - sum(strategy) / sum(full_history)`` of each of ``metrics`` on episodes paired by
    task and repeat). A pair with a failed trial is left out (counted as unpaired): that episode stopped early, and
    its tokens would pass for a saving. One bootstrap batch: one draw per paired layout."""
    planned: list[tuple[ConditionKey, ConditionKey]] = []
    for k in ctx.keys:
        baseline = ConditionKey(strategy=BASELINE_STRATEGY, protection_mode=k.protection_mode)
        if k.strategy != BASELINE_STRATEGY and baseline in ctx.keys:
            planned.append((k, baseline))
    pairs: dict[tuple[str, int], PairedSample] = {}
    for metric in metrics:
        samples = ctx.samples(metric, WITH_VERDICT)
        for i, (k, baseline) in enumerate(planned):
            a = samples.get((k.strategy, k.protection_mode))
            b = samples.get((baseline.strategy, baseline.protection_mode))
            if a is not None and b is not None:
                pairs[(metric, i)] = pair_by_task_repeat(a, b)
    found = bootstrap_relative_reductions(pairs, ctx.params)
    return [
        (k, baseline, {m: found.get((m, i), empty_estimate(ctx.params)) for m in metrics})
        for i, (k, baseline) in enumerate(planned)
    ]


def token_reduction_section(ctx: MetricsContext) -> list[TokenReduction]:
    """Relative token reduction of each strategy versus full_history in the same mode, on paired episodes."""
    return [
        TokenReduction(
            condition=k, baseline=baseline, agent_tokens=found["agent_tokens"], total_tokens=found["total_tokens"]
        )
        for k, baseline, found in paired_reductions(ctx, ("agent_tokens", "total_tokens"))
    ]
