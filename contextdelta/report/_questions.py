"""The research questions (SPEC section 10): families of task-level paired comparisons, Holm-adjusted over their
testable members, each with its failed-trial accounting, a sensitivity row without failed-trial pairs, and the
smallest difference its design detects."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from contextdelta.report._conditions import BASELINE_STRATEGY
from contextdelta.report._context import MetricsContext
from contextdelta.report._models import Comparison, ConditionKey, ConditionMetrics, ResearchQuestion
from contextdelta.stats import (
    TARGET_POWER,
    ClusteredSample,
    PairedComparison,
    holm_family,
    minimum_detectable_difference,
    pair_by_task,
    paired_comparisons,
    pilot_design,
    unit_differences,
)

REDUCED_STRATEGIES = ("last_n", "semantic_summary", "typed_state_digest")
"""The reduced strategies every run plans comparisons for (others found in the run are added)."""
PROTECTION_MODES = ("unprotected", "freshness_contract")

RQ_QUESTIONS = {
    "RQ1": "Does context reduction raise the stale-action rate? Each reduced strategy vs full_history, per "
    "protection mode, on the stale-action indicator.",
    "RQ2": "Does a typed state digest beat a semantic summary? typed_state_digest vs semantic_summary, per "
    "protection mode, on success and on the stale-action indicator.",
    "RQ3": "Does the freshness contract prevent harm? freshness_contract vs unprotected, per strategy, on the "
    "harmful-action indicator.",
}

Planned = tuple[str, str, ConditionKey, ConditionKey]
"""(name, metric, condition a, condition b)."""


def _key(strategy: str, mode: str) -> ConditionKey:
    return ConditionKey(strategy=strategy, protection_mode=mode)


def planned_questions(ctx: MetricsContext) -> dict[str, list[Planned]]:
    """Every planned comparison per question; strategies of the run beyond the built-in ones are included."""
    ran = list(dict.fromkeys(k.strategy for k in ctx.keys))
    reduced = list(dict.fromkeys([*REDUCED_STRATEGIES, *(s for s in ran if s != BASELINE_STRATEGY)]))
    return {
        "RQ1": [
            (f"{s} vs {BASELINE_STRATEGY} ({m})", "stale_action", _key(s, m), _key(BASELINE_STRATEGY, m))
            for m in PROTECTION_MODES
            for s in reduced
        ],
        "RQ2": [
            (
                f"typed_state_digest vs semantic_summary ({m}), {metric}",
                metric,
                _key("typed_state_digest", m),
                _key("semantic_summary", m),
            )
            for m in PROTECTION_MODES
            for metric in ("success", "stale_action")
        ],
        "RQ3": [
            (
                f"freshness_contract vs unprotected ({s})",
                "harmful_action",
                _key(s, "freshness_contract"),
                _key(s, "unprotected"),
            )
            for s in (BASELINE_STRATEGY, *reduced)
        ],
    }


def comparisons_run(
    ctx: MetricsContext,
) -> dict[str, tuple[list[Planned], list[str], dict[str, tuple[ClusteredSample, ClusteredSample]]]]:
    """Per question: the planned comparisons whose two conditions ran, the names of those that did not, and the
    samples (a, b) of each that ran."""
    out = {}
    for qid, planned in planned_questions(ctx).items():
        kept: list[Planned] = []
        not_run: list[str] = []
        inputs: dict[str, tuple[ClusteredSample, ClusteredSample]] = {}
        for name, metric, a, b in planned:
            samples = ctx.samples(metric)
            ka, kb = (a.strategy, a.protection_mode), (b.strategy, b.protection_mode)
            if ka in samples and kb in samples:
                kept.append((name, metric, a, b))
                inputs[name] = (samples[ka], samples[kb])
            else:
                not_run.append(name)
        out[qid] = (kept, not_run, inputs)
    return out


def _pair_keys(ctx: MetricsContext, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """One integer per (task, repeat) of the episodes ``rows``, equal across conditions."""
    codes, repeats = ctx.task_codes()
    return codes[rows] * (int(repeats.max(initial=0)) + 1) + repeats[rows]


def _without_failed_pairs(
    ctx: MetricsContext, metric: str, a: ConditionKey, b: ConditionKey
) -> tuple[int, npt.NDArray[np.int64], tuple[ClusteredSample, ClusteredSample]]:
    """(pairs involving a failed trial, the task codes of those pairs, both samples without those pairs)."""
    table = ctx.table
    rows_a, rows_b = ctx.rows((a.strategy, a.protection_mode)), ctx.rows((b.strategy, b.protection_mode))
    keys_a, keys_b = _pair_keys(ctx, rows_a), _pair_keys(ctx, rows_b)
    bad = np.union1d(keys_a[table.failed[rows_a]], keys_b[table.failed[rows_b]])
    involved = np.intersect1d(np.intersect1d(keys_a, keys_b), bad)
    _, repeats = ctx.task_codes()
    tasks = np.unique(involved // (int(repeats.max(initial=0)) + 1))
    kept_a, kept_b = rows_a[~np.isin(keys_a, bad)], rows_b[~np.isin(keys_b, bad)]
    return int(involved.size), tasks, (table.sample(metric, kept_a), table.sample(metric, kept_b))


def questions_section(ctx: MetricsContext, conditions: Sequence[ConditionMetrics]) -> list[ResearchQuestion]:
    """Every research question with its comparisons, Holm families, sensitivity rows and design sensitivity.

    The condition rates come from the conditions section; every question's comparisons are computed in one batch
    (and every sensitivity row in another), so their bootstrap draws are shared.
    """
    params = ctx.params
    rates = {c.condition: c.rates for c in conditions}
    table = ctx.table
    unit_of = {} if table.story is None else dict(zip(table.task_id.tolist(), table.story.tolist(), strict=True))
    found = comparisons_run(ctx)
    kept = {qid: entry[0] for qid, entry in found.items()}
    not_run = {qid: entry[1] for qid, entry in found.items()}
    inputs = {(qid, name): pair for qid, entry in found.items() for name, pair in entry[2].items()}
    accounting = {
        (qid, name): _without_failed_pairs(ctx, metric, a, b) for qid in kept for name, metric, a, b in kept[qid]
    }
    # One batch for every comparison and every sensitivity row: their task-level draws are shared.
    both = paired_comparisons(
        {
            **{("main", *key): pair for key, pair in inputs.items()},
            **{("sensitivity", *key): found[2] for key, found in accounting.items() if found[0] > 0},
        },
        params,
    )
    main = {(qid, name): c for (kind, qid, name), c in both.items() if kind == "main"}
    sensitivity = {(qid, name): c for (kind, qid, name), c in both.items() if kind == "sensitivity"}
    out = []
    for qid in found:
        names = [name for name, *_ in kept[qid]]
        tests = holm_family({name: main[(qid, name)].test for name in names})
        family = [name for name in names if tests[name].testable]
        sensitivity_tests = holm_family({n: sensitivity[(qid, n)].test for n in names if (qid, n) in sensitivity})
        comparisons = []
        for name, metric, a, b in kept[qid]:
            pairs = pair_by_task(*inputs[(qid, name)])
            # discordant as the test sees them (a task with fewer episodes on one side: cut to equal sides)
            units, differences = unit_differences(pairs.tested)
            failed_pairs, failed_tasks, _ = accounting[(qid, name)]
            failed_units = {unit_of.get(str(t), str(t)) for t in ctx.task_names()[failed_tasks]}
            model, n_units, unit_repeats = pilot_design(pairs, max(1, ctx.manifest.repeats))
            level = params.alpha / (len(family) if tests[name].testable else len(family) + 1)
            sensitive: PairedComparison | None = None
            if name in sensitivity_tests:
                sensitive = sensitivity[(qid, name)].model_copy(update={"test": sensitivity_tests[name]})
            comparisons.append(
                Comparison(
                    name=name,
                    metric=metric,
                    a=a,
                    b=b,
                    rate_a=rates[a][metric],
                    rate_b=rates[b][metric],
                    difference=main[(qid, name)].difference,
                    test=tests[name],
                    episodes=main[(qid, name)].episodes,
                    failed_pairs=failed_pairs,
                    failed_discordant_tasks=sum(
                        1 for unit, d in zip(units, differences.tolist(), strict=True) if d and unit in failed_units
                    ),
                    sensitivity=sensitive,
                    detectable=minimum_detectable_difference(
                        model,
                        n_units,
                        unit_repeats,
                        level,
                        target_power=TARGET_POWER,
                        datasets=params.power_datasets,
                        seed=params.seed,
                    ),
                )
            )
        out.append(
            ResearchQuestion(
                id=qid,
                question=RQ_QUESTIONS[qid],
                comparisons=comparisons,
                family=family,
                not_testable=[name for name in names if not tests[name].testable],
                not_run=not_run[qid],
                sensitivity_family=[n for n, t in sensitivity_tests.items() if t.testable],
            )
        )
    return out
