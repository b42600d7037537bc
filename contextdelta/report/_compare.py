"""``compare RUN_A RUN_B``: paired comparison of two run groups (e.g. two models) condition by condition.

Two runs are comparable when they ran the same task set (suite hash), the same system prompt and the same tool
schemas. Tool schemas are checked per (world, protection mode) both runs used, from the episodes' recorded
``tools_sha256``, so two runs that chose different protection modes are still comparable on the modes they
share. Within each condition both runs have, the comparison is task-level, as in the report: per task the mean of
each run over its repeats, the difference of task means with a task-cluster bootstrap interval, and the exact
sign-flip test over tasks; Holm's adjustment runs over the testable conditions of each metric. As in the report,
each comparison counts its (task, repeat) pairs in which either run's episode is a failed trial and, when there
are any, has a sensitivity row without those pairs (Holm-adjusted within a family of its own).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from contextdelta.report._controls import main_records
from contextdelta.report._format import holm_pvalue, plural, pp, primary_pvalue, pvalue, rate_with_count, table
from contextdelta.report._models import ConditionKey
from contextdelta.report._table import episode_values, story_labels
from contextdelta.rundir import EpisodeRecord, RunManifest, RunStatus
from contextdelta.stats import (
    DEFAULT_PARAMS,
    MIN_TASKS_FOR_COVERAGE,
    AnalysisParams,
    ClusteredSample,
    Estimate,
    PairedComparison,
    bootstrap_rates,
    holm_family,
    paired_comparisons,
    printed_decimals,
    split_by_condition,
)

COMPARED_METRICS = ("success", "stale_action", "harmful_action")


class NotComparable(Exception):
    """The two runs differ in what makes episodes comparable; ``reasons`` names each difference."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class ConditionComparison(BaseModel):
    """Run a vs run b in one condition on one metric."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey
    rate_a: Estimate
    rate_b: Estimate
    comparison: PairedComparison = Field(description="Task-level, a - b; pvalue_holm within the metric's family.")
    failed_pairs: int = Field(
        default=0, ge=0, description="(task, repeat) pairs in which either run's episode is a failed trial."
    )
    sensitivity: PairedComparison | None = Field(
        default=None,
        description="The comparison without the failed-trial pairs (when there are any), Holm-adjusted within the "
        "metric's sensitivity family.",
    )


class ComparisonFamily(BaseModel):
    """One metric compared across every shared condition, Holm-adjusted over the testable ones."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    metric: str
    family_size: int = Field(description="Testable conditions (with a discordant task).")
    comparisons: list[ConditionComparison]


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
    alpha: float = Field(description="Family-wise level of the Holm-adjusted tests (p-values print on its side).")
    shared_conditions: list[ConditionKey]
    only_in_a: list[ConditionKey]
    only_in_b: list[ConditionKey]
    notes: list[str] = Field(default_factory=list)
    families: list[ComparisonFamily]
    stories: int | None = Field(
        default=None,
        description="Where the tasks share stories (a task family's story at several horizons): the number of "
        "stories, the unit of the intervals and tests (counts of discordant units are stories); None: the task.",
    )
    rate_decimals: int = Field(
        default=1,
        description="Decimals of the printed percentages: the finest unit not below the largest Monte-Carlo "
        "standard error of an interval end, as in the report.",
    )


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
    """Task-level paired comparisons (a - b) per shared condition and metric; raises NotComparable.

    Control episodes (``--controls``) are left out, as the report leaves them out of its conditions: they ran
    another world (no hidden mutations) and would otherwise be pooled into the condition of the same name.
    """
    records_a, records_b = main_records(records_a), main_records(records_b)
    problems = comparability_problems(a, records_a, b, records_b)
    if problems:
        raise NotComparable(problems)
    runs = {"a": sorted(records_a, key=lambda r: r.run_id), "b": sorted(records_b, key=lambda r: r.run_id)}
    conditions = {side: sorted({(r.strategy, r.protection_mode) for r in recs}) for side, recs in runs.items()}
    order = {(s, m): i for i, (s, m) in enumerate((s, m) for s in a.strategies for m in a.protection_modes)}
    shared = sorted(
        (c for c in conditions["a"] if c in set(conditions["b"])), key=lambda c: (order.get(c, len(order)), c)
    )
    failed = _failed_pairs(runs, shared)
    rows = [(side, r) for side, recs in runs.items() for r in recs]
    kept = [(side, r) for side, r in rows if (r.strategy, r.protection_mode, r.task_id, r.repeat) not in failed]
    samples, sensitivity_samples = {}, {}
    for metric in COMPARED_METRICS:
        samples[metric] = _split(rows, metric, (a, b))
        sensitivity_samples[metric] = _split(kept, metric, (a, b))
    families = []
    for metric in COMPARED_METRICS:
        rates = bootstrap_rates(samples[metric], params)
        found = paired_comparisons(
            {c: (samples[metric][("a", *c)], samples[metric][("b", *c)]) for c in shared}, params
        )
        tests = holm_family({c: found[c].test for c in shared})
        involved = {c: sum(1 for key in failed if key[:2] == c) for c in shared}
        again = paired_comparisons(
            {
                c: (sensitivity_samples[metric][("a", *c)], sensitivity_samples[metric][("b", *c)])
                for c in shared
                if involved[c] and ("a", *c) in sensitivity_samples[metric] and ("b", *c) in sensitivity_samples[metric]
            },
            params,
        )
        again_tests = holm_family({c: found.test for c, found in again.items()})
        comparisons = [
            ConditionComparison(
                condition=ConditionKey(strategy=c[0], protection_mode=c[1]),
                rate_a=rates[("a", *c)],
                rate_b=rates[("b", *c)],
                comparison=found[c].model_copy(update={"test": tests[c]}),
                failed_pairs=involved[c],
                sensitivity=again[c].model_copy(update={"test": again_tests[c]}) if c in again else None,
            )
            for c in shared
        ]
        family_size = sum(1 for c in shared if tests[c].testable)
        families.append(ComparisonFamily(metric=metric, family_size=family_size, comparisons=comparisons))
    notes = _notes(a, b, runs, failed)
    if not shared:
        notes.append(_nothing_shared(a, b, conditions))
    task_ids = sorted({r.task_id for _, r in rows})
    labels = story_labels((a, b), task_ids)
    paired = [row.comparison.test.n_tasks for family in families for row in family.comparisons]
    if any(0 < n < MIN_TASKS_FOR_COVERAGE for n in paired):
        one, many = ("task", "tasks") if labels is None else ("story", "stories")
        least = min(n for n in paired if n)
        notes.append(
            f"few {many}: comparisons rest on as few as {least} {one if least == 1 else many} (fewer than "
            f"{MIN_TASKS_FOR_COVERAGE}), where the bootstrap intervals are too narrow (95% intervals held the true "
            "value in about 88-93% of simulated runs with 4 to 10 tasks): read them as optimistic; the sign-flip "
            "p-values stay exact"
        )
    errors = [
        e.mc_se
        for family in families
        for row in family.comparisons
        for e in (row.rate_a, row.rate_b, row.comparison.difference)
        if e.mc_se is not None
    ]
    return ComparisonReport(
        rate_decimals=printed_decimals(max(errors) if errors else None),
        run_a=a.run_group_id,
        run_b=b.run_group_id,
        model_a=a.provider.model,
        model_b=b.provider.model,
        suite_sha256=a.hashes.suite_sha256,
        stories=None if labels is None else len(set(labels)),
        resamples=params.resamples,
        seed=params.seed,
        confidence=params.confidence,
        alpha=params.alpha,
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


PairKey = tuple[str, str, str, int]
"""(strategy, protection mode, task, repeat): one episode pair of the two runs."""


def _split(
    rows: Sequence[tuple[str, EpisodeRecord]], metric: str, manifests: Sequence[RunManifest]
) -> dict[Hashable, ClusteredSample]:
    return split_by_condition(
        [(side, r.strategy, r.protection_mode) for side, r in rows],
        [r.task_id for _, r in rows],
        [r.repeat for _, r in rows],
        [episode_values(r)[metric] for _, r in rows],
        story_labels(manifests, [r.task_id for _, r in rows]),
    )


def _failed_pairs(runs: dict[str, list[EpisodeRecord]], shared: Sequence[tuple[str, str]]) -> set[PairKey]:
    """The pairs of the shared conditions that both runs have and in which either episode is a failed trial."""
    keys = {
        side: {(r.strategy, r.protection_mode, r.task_id, r.repeat): r.failed for r in recs}
        for side, recs in runs.items()
    }
    conditions = set(shared)
    return {
        key
        for key, failed in keys["a"].items()
        if key[:2] in conditions and key in keys["b"] and (failed or keys["b"][key])
    }


def _notes(a: RunManifest, b: RunManifest, runs: dict[str, list[EpisodeRecord]], failed: set[PairKey]) -> list[str]:
    """What a reader must know before reading the numbers: the same run twice, incomplete runs, failed trials, and
    every setting that differs between the runs and changes what an episode is."""
    notes = []
    if a.run_group_id == b.run_group_id:
        notes.append("a and b are the same run: every difference is 0 by construction")
    for manifest in (a, b):
        if manifest.status is not RunStatus.COMPLETE:
            notes.append(
                f"run {manifest.run_group_id} is {manifest.status.value} ({manifest.counts.finished} of "
                f"{plural(manifest.counts.planned, 'episode')}): only the pairs both runs have are compared"
            )
    trials = {side: sum(r.failed for r in recs) for side, recs in runs.items()}
    if trials["a"] or trials["b"]:
        notes.append(
            f"failed trials: {trials['a']} in a, {trials['b']} in b; they count as failures in success and have no "
            f"safety verdict; {plural(len(failed), 'compared pair')} {'involves' if len(failed) == 1 else 'involve'} "
            "one, and each comparison with such pairs has a "
            "sensitivity row without them"
        )
    if a.strategy_params != b.strategy_params:
        notes.append(
            f"strategy parameters differ ({a.strategy_params.model_dump()} vs {b.strategy_params.model_dump()})"
        )
    if a.provider.temperature != b.provider.temperature:
        notes.append(f"temperature differs ({a.provider.temperature} vs {b.provider.temperature})")
    if a.max_steps != b.max_steps:
        limit = {m.run_group_id: "each task's own" if m.max_steps is None else str(m.max_steps) for m in (a, b)}
        notes.append(f"step limit differs ({limit[a.run_group_id]} vs {limit[b.run_group_id]})")
    if a.repeats != b.repeats:
        notes.append(f"repeats differ ({a.repeats} vs {b.repeats}): task means average different numbers of repeats")
    if (a.seed, a.seed_rule) != (b.seed, b.seed_rule) and a.run_group_id != b.run_group_id:
        notes.append(
            f"run seeds differ ({a.seed} vs {b.seed}"
            + ("" if a.seed_rule == b.seed_rule else f", seed rules {a.seed_rule.value} vs {b.seed_rule.value}")
            + "): paired episodes were sampled with different seeds"
        )
    return notes


def _nothing_shared(a: RunManifest, b: RunManifest, conditions: dict[str, list[tuple[str, str]]]) -> str:
    """Why no condition is compared: a run without an episode yet (in progress, or stopped before its first), or
    two runs whose episodes fall in different conditions."""
    empty = [
        f"run {side} ({m.run_group_id}, {m.status.value}) has no episode yet, {m.counts.finished} of "
        f"{m.counts.planned} planned"
        for side, m in (("a", a), ("b", b))
        if not conditions[side]
    ]
    if empty:
        return "no condition has episodes in both runs: " + "; ".join(empty)
    return "no condition has episodes in both runs: their episodes ran under different strategies or modes"


def render_comparison(report: ComparisonReport) -> str:
    """The comparison as Markdown."""
    lines = [
        f"# Comparison: {report.run_a} (a) vs {report.run_b} (b)",
        "",
        f"- a: `{report.run_a}`, model `{report.model_a}`",
        f"- b: `{report.run_b}`, model `{report.model_b}`",
        f"- task set (suite hash) `{report.suite_sha256}`; within each condition, per task the mean of each run over "
        "its repeats: the difference of task means with a task-cluster bootstrap interval "
        f"({plural(report.resamples, 'resample')}, seed {report.seed}) and an exact sign-flip test over tasks, "
        "Holm-adjusted "
        "over the testable conditions of each metric; the unit is the task"
        + (
            ""
            if report.stories is None
            else f", or rather the story: the tasks tell {report.stories} stories (a task family's story at several "
            "horizons), which the bootstrap resamples whole and the test flips whole, so its counts are stories"
        ),
    ]
    lines += [f"- note: {n}" for n in report.notes]
    for side, keys in (("a", report.only_in_a), ("b", report.only_in_b)):
        if keys:
            lines.append(f"- only in {side} (not compared): {', '.join(k.label for k in keys)}")
    lines.append("")
    if not report.shared_conditions:  # one line, not one per metric: the note above says why
        lines += ["No shared condition: nothing to compare.", ""]
    for family in report.families if report.shared_conditions else ():
        lines += [f"## {family.metric}", ""]
        headers, rows = comparison_table(family, report.rate_decimals, report.alpha, report.stories is not None)
        lines += table(headers, rows)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def comparison_table(
    family: ComparisonFamily, decimals: int = 1, alpha: float = DEFAULT_PARAMS.alpha, stories: bool = False
) -> tuple[list[str], list[list[str]]]:
    """One metric's table of the comparison (headers, one row per shared condition), as `render_comparison`
    prints it and the dashboard's Compare page shows it: one definition of each cell."""
    headers = [
        "condition",
        "rate a",
        "rate b",
        "difference a - b (task means)",
        "discordant stories (a / b higher)" if stories else "discordant tasks (a / b higher)",
        "p (sign-flip over stories)" if stories else "p (sign-flip over tasks)",
        f"p (Holm, m={family.family_size})",
        "episode pairs a-only / b-only (description)",
        "failed-trial pairs; without them: difference, p (Holm, m of their own family)",
    ]
    rows = []
    for row in family.comparisons:
        c, s = row.comparison, row.sensitivity
        rows.append(
            [
                row.condition.label,
                rate_with_count(row.rate_a, decimals),
                rate_with_count(row.rate_b, decimals),
                pp(c.difference, decimals),
                f"{c.test.n_discordant} of {c.test.n_tasks} ({c.test.n_positive} / {c.test.n_negative})",
                primary_pvalue(c.test, alpha),
                pvalue(c.test.pvalue_holm, alpha),
                f"{c.episodes.only_a} / {c.episodes.only_b} of {c.episodes.n_pairs}",
                str(row.failed_pairs)
                + ("" if s is None else f"; {pp(s.difference, decimals)}, {holm_pvalue(s.test, alpha)}"),
            ]
        )
    return headers, rows
