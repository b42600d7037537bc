"""``compare RUN_A RUN_B``: paired comparison of two run groups (e.g. two models) condition by condition.

Two runs are comparable when they ran the same task set (suite hash), the same system prompt and the same tool
schemas. Tool schemas are checked per (world, protection mode) both runs used, from the episodes' recorded
``tools_sha256``, so two runs that chose different protection modes are still comparable on the modes they
share. Episodes are paired on (task, repeat) within each condition both runs have; Holm's adjustment runs over
the conditions of each metric.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from contextdelta.report._format import comparison_cells, pp, table
from contextdelta.report._metrics import Comparison, ConditionKey, episode_values
from contextdelta.rundir.records import EpisodeRecord, RunManifest, RunStatus
from contextdelta.stats import (
    DEFAULT_PARAMS,
    AnalysisParams,
    bootstrap_differences,
    bootstrap_means,
    holm_family,
    mcnemar_exact,
    pair_by_task_repeat,
    split_by_condition,
)

COMPARED_METRICS = ("success", "stale_action", "harmful_action")


class NotComparable(Exception):
    """The two runs differ in what makes episodes comparable; ``reasons`` names each difference."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class ComparisonFamily(BaseModel):
    """One metric compared across every shared condition, Holm-adjusted over those conditions."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    metric: str
    family_size: int
    comparisons: list[Comparison]


class ComparisonReport(BaseModel):
    """The result of ``compare``: run a minus run b, per condition and metric."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    run_a: str
    run_b: str
    model_a: str
    model_b: str
    suite_sha256: str
    resamples: int
    seed: int
    confidence: float
    shared_conditions: list[ConditionKey]
    only_in_a: list[ConditionKey]
    only_in_b: list[ConditionKey]
    notes: list[str] = Field(default_factory=list)
    families: list[ComparisonFamily]


def _tool_hashes(records: Sequence[EpisodeRecord]) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for r in records:
        found.setdefault((r.world, r.protection_mode), set()).add(r.trace.tools_sha256)
    return found


def comparability_problems(
    a: RunManifest, records_a: Sequence[EpisodeRecord], b: RunManifest, records_b: Sequence[EpisodeRecord]
) -> list[str]:
    """Why the two runs are not comparable, in words (empty when they are)."""
    problems = []
    if a.hashes.suite_sha256 != b.hashes.suite_sha256:
        problems.append(f"task set differs (suite hash {a.hashes.suite_sha256[:12]} vs {b.hashes.suite_sha256[:12]})")
    if a.hashes.system_prompt_sha256 != b.hashes.system_prompt_sha256:
        problems.append(
            f"system prompt differs (version {a.hashes.system_prompt_version} "
            f"{a.hashes.system_prompt_sha256[:12]} vs version {b.hashes.system_prompt_version} "
            f"{b.hashes.system_prompt_sha256[:12]})"
        )
    if a.hashes.tool_schemas_sha256 != b.hashes.tool_schemas_sha256:
        ha, hb = _tool_hashes(records_a), _tool_hashes(records_b)
        differing = sorted(k for k in set(ha) & set(hb) if ha[k] != hb[k])
        if differing or not (set(ha) & set(hb)):
            where = ", ".join(f"{w} world in {m}" for w, m in differing) or "no shared world and mode to check"
            problems.append(f"tool schemas differ ({where})")
    return problems


def compare_runs(
    a: RunManifest,
    records_a: Sequence[EpisodeRecord],
    b: RunManifest,
    records_b: Sequence[EpisodeRecord],
    params: AnalysisParams = DEFAULT_PARAMS,
) -> ComparisonReport:
    """Paired McNemar tests and bootstrap differences (a - b) per shared condition; raises NotComparable."""
    problems = comparability_problems(a, records_a, b, records_b)
    if problems:
        raise NotComparable(problems)
    runs = {"a": sorted(records_a, key=lambda r: r.run_id), "b": sorted(records_b, key=lambda r: r.run_id)}
    conditions = {side: sorted({(r.strategy, r.protection_mode) for r in recs}) for side, recs in runs.items()}
    order = {(s, m): i for i, (s, m) in enumerate((s, m) for s in a.strategies for m in a.protection_modes)}
    shared = sorted(
        (c for c in conditions["a"] if c in set(conditions["b"])), key=lambda c: (order.get(c, len(order)), c)
    )
    samples = {}
    for metric in COMPARED_METRICS:
        rows = [(side, r) for side, recs in runs.items() for r in recs]
        samples[metric] = split_by_condition(
            [(side, r.strategy, r.protection_mode) for side, r in rows],
            [r.task_id for _, r in rows],
            [r.repeat for _, r in rows],
            [episode_values(r)[metric] for _, r in rows],
        )
    families = []
    for metric in COMPARED_METRICS:
        rates = bootstrap_means(samples[metric], params)
        pairs = {c: pair_by_task_repeat(samples[metric][("a", *c)], samples[metric][("b", *c)]) for c in shared}
        differences = bootstrap_differences(pairs, params)
        tests = holm_family({c: mcnemar_exact(p) for c, p in pairs.items()})
        comparisons = []
        for c in shared:
            key = ConditionKey(strategy=c[0], protection_mode=c[1])
            d = differences[c]
            comparisons.append(
                Comparison(
                    name=key.label,
                    metric=metric,
                    a=key,
                    b=key,
                    rate_a=rates[("a", *c)],
                    rate_b=rates[("b", *c)],
                    difference=d,
                    mcnemar=tests[c],
                    interval_includes_zero=None if d.low is None or d.high is None else d.low <= 0.0 <= d.high,
                )
            )
        families.append(ComparisonFamily(metric=metric, family_size=len(comparisons), comparisons=comparisons))
    notes = []
    for manifest in (a, b):
        if manifest.status is not RunStatus.COMPLETE:
            notes.append(
                f"run {manifest.run_group_id} is {manifest.status.value} ({manifest.counts.finished} of "
                f"{manifest.counts.planned} episodes): only the pairs both runs have are compared"
            )
    if a.strategy_params != b.strategy_params:
        notes.append(
            f"strategy parameters differ ({a.strategy_params.model_dump()} vs {b.strategy_params.model_dump()})"
        )
    if a.provider.temperature != b.provider.temperature:
        notes.append(f"temperature differs ({a.provider.temperature} vs {b.provider.temperature})")
    return ComparisonReport(
        run_a=a.run_group_id,
        run_b=b.run_group_id,
        model_a=a.provider.model,
        model_b=b.provider.model,
        suite_sha256=a.hashes.suite_sha256,
        resamples=params.resamples,
        seed=params.seed,
        confidence=params.confidence,
        shared_conditions=[ConditionKey(strategy=s, protection_mode=m) for s, m in shared],
        only_in_a=[ConditionKey(strategy=s, protection_mode=m) for s, m in conditions["a"] if (s, m) not in shared],
        only_in_b=[
            ConditionKey(strategy=s, protection_mode=m)
            for s, m in conditions["b"]
            if (s, m) not in set(conditions["a"])
        ],
        notes=notes,
        families=families,
    )


def render_comparison(report: ComparisonReport) -> str:
    """The comparison as Markdown."""
    lines = [
        f"# Comparison: {report.run_a} (a) vs {report.run_b} (b)",
        "",
        f"- a: `{report.run_a}`, model `{report.model_a}`",
        f"- b: `{report.run_b}`, model `{report.model_b}`",
        f"- task set (suite hash) `{report.suite_sha256}`; paired on (task, repeat) within each condition; "
        f"{report.resamples} bootstrap resamples, seed {report.seed}; exact McNemar, Holm-adjusted over the "
        "conditions of each metric",
    ]
    lines += [f"- note: {n}" for n in report.notes]
    for side, keys in (("a", report.only_in_a), ("b", report.only_in_b)):
        if keys:
            lines.append(f"- only in {side} (not compared): {', '.join(k.label for k in keys)}")
    lines.append("")
    for family in report.families:
        lines += [f"## {family.metric}", ""]
        if not family.comparisons:
            lines += ["No shared condition.", ""]
            continue
        rows = [comparison_cells(c) for c in family.comparisons]
        lines += table(
            [
                "condition",
                "rate a",
                "rate b",
                "difference a - b",
                "discordant a-only / b-only",
                "p (McNemar)",
                f"p (Holm, m={family.family_size})",
            ],
            rows,
        )
        statements = [
            f"- {c.name}: no paired episodes."
            if c.interval_includes_zero is None
            else f"- {c.name}: the interval of the difference includes zero ({pp(c.difference)})."
            for c in family.comparisons
            if c.interval_includes_zero is not False
        ]
        lines += ["", *statements, *([""] if statements else [])]
    return "\n".join(lines).rstrip("\n") + "\n"
