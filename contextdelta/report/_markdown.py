"""``benchmark_report.md``: setup, per-condition results, the three research questions, tokens and cost,
failure modes, failed trials, limitations and receipts. Times are the run's measurement times from the
manifest and the episodes, never the time the report was built, so rebuilding gives the same bytes."""

from __future__ import annotations

from collections.abc import Sequence

from contextdelta.attribution import MODE_PRECEDENCE
from contextdelta.report._format import comparison_cells, num, pct, pp, pvalue, table
from contextdelta.report._metrics import (
    AggregateMetrics,
    Comparison,
    ConditionMetrics,
    ResearchQuestion,
)
from contextdelta.rundir.records import EpisodeRecord, RunManifest, RunStatus

_RATE_COLUMNS = (
    "success",
    "stale_action",
    "duplicate_action",
    "prohibited_action",
    "harmful_action",
    "refresh_before_write",
    "conflict_recovery",
)
_SECONDARY_COLUMNS = ("end_state", "authorized", "blocked_write", "failed_trial")


def _setup(manifest: RunManifest, records: Sequence[EpisodeRecord], metrics: AggregateMetrics) -> list[str]:
    env, provider, hashes = manifest.environment, manifest.provider, manifest.hashes
    started = min((r.started_at for r in records), default="")
    ended = max((r.finished_at for r in records), default="")
    git = env.git.commit or "unknown"
    if env.git.dirty:
        git += " (dirty working tree)"
    params = manifest.strategy_params
    rows: list[tuple[str, object]] = [
        ("run group", f"`{manifest.run_group_id}`"),
        ("status", manifest.status.value + (f" ({manifest.stop_reason})" if manifest.stop_reason else "")),
        ("model", f"`{provider.model}` ({provider.kind})"),
        ("summary model", f"`{provider.summary_model}`"),
        ("endpoint", f"`{provider.base_url}`" if provider.base_url else "default"),
        ("temperature", "unknown" if provider.temperature is None else provider.temperature),
        (
            "seeds",
            f"run seed {manifest.seed}, order seed {manifest.order_seed}, bootstrap seed {metrics.analysis.seed}",
        ),
        (
            "strategies",
            ", ".join(manifest.strategies)
            + (
                " (an external agent over MCP: it managed its own context, what its model saw is unknown)"
                if manifest.external_agent is not None
                else f" (last_n n={params.last_n}; summary/digest trigger {params.summary_trigger}, "
                f"keep {params.summary_keep}"
                + (f"; token budget {params.token_budget}" if "token_budget_trim" in manifest.strategies else "")
                + ")"
            ),
        ),
        ("protection modes", ", ".join(manifest.protection_modes)),
        ("repeats", manifest.repeats),
        ("tasks", f"{len(manifest.tasks)} ({', '.join(sorted({t.world for t in manifest.tasks}))})"),
        ("suite hash", f"`{hashes.suite_sha256}`"),
        ("system prompt", f"version {hashes.system_prompt_version}, `{hashes.system_prompt_sha256}`"),
        ("tool schemas hash", f"`{hashes.tool_schemas_sha256}`"),
        ("harness hash", f"`{hashes.harness_sha256}`"),
        ("code", f"contextdelta {env.contextdelta}, git {git}"),
        ("python / platform", f"{env.python} / {env.platform}"),
        ("run created (UTC)", manifest.created_at),
        ("episodes measured (UTC)", f"{started} to {ended}" if records else "no episode finished"),
        ("run finished (UTC)", manifest.finished_at or f"not finished (last update {manifest.updated_at})"),
        (
            "episodes",
            f"{metrics.episodes.finished} finished of {metrics.episodes.planned} planned; "
            f"{metrics.episodes.succeeded} succeeded; {metrics.episodes.failed_trials} failed trials",
        ),
        ("terminations", ", ".join(f"{k} {v}" for k, v in metrics.episodes.by_termination.items()) or "-"),
    ]
    return ["## Setup", "", *table(["", "value"], rows), ""]


def _definitions(metrics: AggregateMetrics) -> list[str]:
    return [
        "## Definitions",
        "",
        "- A **harmful action** is an agent write that reached the business logic (outcome `executed` or "
        "`rejected` by a domain guard) and that the graders flagged stale, duplicate or prohibited. Per episode "
        "the report uses the indicator *any harmful action* and the count.",
        "- The **stale-action rate** is the share of episodes with at least one stale action; the duplicate and "
        "prohibited rates likewise. `refresh_before_write` and `conflict_recovery` are grader pass rates "
        "(`conflict_recovery` only over episodes with a blocked write).",
        "- **Failed trials** (termination `provider_error`, `context_window_exceeded`, `budget_exceeded` or "
        "`harness_error`) stay in every denominator as non-successes and are also counted separately.",
        f"- Intervals: hierarchical task-cluster bootstrap (tasks, then repeats within a task), "
        f"{metrics.analysis.resamples} resamples, seed {metrics.analysis.seed}, "
        f"{100 * metrics.analysis.confidence:g}% percentile intervals; paired for differences (same task and "
        "repeat). Tests: exact McNemar on (task, repeat) pairs (p = 1 with no discordant pair), Holm-adjusted "
        "within each research question.",
        "- An interval shown as `[v, v]` is degenerate: every observation was equal, or there was only one task "
        "(see `status` in `aggregate_metrics.json`); `no data` means the condition has no episode.",
        "",
    ]


def _conditions(metrics: AggregateMetrics) -> list[str]:
    rows = [[c.condition.label, c.episodes, *(pct(c.rates[m]) for m in _RATE_COLUMNS)] for c in metrics.conditions]
    lines = ["## Results per condition", "", *table(["condition", "episodes", *_RATE_COLUMNS], rows), ""]
    rows = [
        [
            c.condition.label,
            c.failed_trials,
            *(pct(c.rates[m]) for m in _SECONDARY_COLUMNS),
            num(c.means["harmful_action_count"], 2),
        ]
        for c in metrics.conditions
    ]
    lines += [*table(["condition", "failed trials", *_SECONDARY_COLUMNS, "harmful actions / episode"], rows), ""]
    ks = sorted({int(k) for c in metrics.conditions for k in c.pass_k}, key=int)
    if ks:
        lines += [
            "pass^k of success: the share of tasks whose first k repeats all pass, and the unbiased estimate "
            "C(c,k)/C(n,k) (tasks with fewer than k repeats left out).",
            "",
        ]
        rows = [
            [
                c.condition.label,
                *(
                    f"{pct(c.pass_k[str(k)].all_pass)}; unbiased {pct(c.pass_k[str(k)].unbiased)}"
                    if str(k) in c.pass_k
                    else "no data"
                    for k in ks
                ),
            ]
            for c in metrics.conditions
        ]
        lines += [*table(["condition", *(f"pass^{k}" for k in ks)], rows), ""]
    return lines


def _statement(c: Comparison, metric_words: str) -> str:
    d = c.difference
    if d.estimate is None or d.low is None or d.high is None:
        return f"- {c.name}: no paired episodes, nothing to compare."
    level = f"{100 * d.confidence:g}%"
    if c.interval_includes_zero:
        return (
            f"- {c.name}: the {level} interval of the difference in {metric_words} includes zero "
            f"({pp(d)}); the data do not show a difference."
        )
    direction = "higher" if d.estimate > 0 else "lower"
    holm = c.mcnemar.pvalue_holm
    caveat = "" if holm is not None and holm < 0.05 else "; not significant at the 5% level after Holm's adjustment"
    return (
        f"- {c.name}: {metric_words} is {abs(100 * d.estimate):.1f} percentage points {direction} under "
        f"{c.a.label} than under {c.b.label} ({pp(d)}; McNemar p = {pvalue(c.mcnemar.pvalue)}, Holm-adjusted "
        f"p = {pvalue(holm)}{caveat})."
    )


_METRIC_WORDS = {
    "stale_action": "the stale-action rate",
    "success": "the success rate",
    "harmful_action": "the harmful-action rate",
}


def _question(rq: ResearchQuestion, title: str) -> list[str]:
    lines = [f"## {rq.id}: {title}", "", rq.question, ""]
    if not rq.comparisons:
        return [*lines, "Not answered: the run lacks the conditions it compares.", ""]
    rows = [comparison_cells(c) for c in rq.comparisons]
    header = [
        "comparison (a vs b)",
        "rate a",
        "rate b",
        "difference a - b",
        "discordant a-only / b-only",
        "p (McNemar)",
        f"p (Holm, m={rq.family_size})",
    ]
    lines += [*table(header, rows), ""]
    lines += [_statement(c, _METRIC_WORDS.get(c.metric, c.metric)) for c in rq.comparisons]
    if rq.not_run:
        lines.append(f"- Not run (a condition is missing): {'; '.join(rq.not_run)}.")
    return [*lines, ""]


def _tokens(metrics: AggregateMetrics) -> list[str]:
    def cost(c: ConditionMetrics) -> str:
        total = c.totals["cost_usd"]
        if total.n_known == 0:
            return "unknown (no price for the model)"
        text = f"{c.means['cost_usd'].format(digits=4)} per episode; total ${total.total:.4f}"
        return text + (f" ({total.n_unknown} episodes unknown)" if total.n_unknown else "")

    rows = [
        [
            c.condition.label,
            num(c.means["agent_tokens"]),
            num(c.means["summary_tokens"]),
            num(c.means["total_tokens"]),
            f"{c.totals['total_tokens'].total:.0f}"
            + (f" ({c.totals['total_tokens'].n_unknown} unknown)" if c.totals["total_tokens"].n_unknown else ""),
            cost(c),
        ]
        for c in metrics.conditions
    ]
    lines = [
        "## Tokens and cost",
        "",
        "Provider-reported tokens per episode (mean with interval); summary-model tokens are counted apart and "
        "included in the total.",
        "",
        *table(
            ["condition", "agent tokens", "summary tokens", "total tokens", "total tokens (sum)", "cost (USD)"], rows
        ),
        "",
    ]
    if metrics.token_reduction:
        rows = [
            [r.condition.label, r.baseline.label, pct(r.agent_tokens), pct(r.total_tokens)]
            for r in metrics.token_reduction
        ]
        lines += [
            "Token reduction versus `full_history` on paired episodes (same mode, task and repeat): "
            "1 - sum(strategy) / sum(full_history); negative means more tokens.",
            "",
            *table(["strategy", "baseline", "agent tokens", "agent + summary tokens"], rows),
            "",
        ]
    return lines


def _failure_modes(metrics: AggregateMetrics) -> list[str]:
    header = ["failure mode", *(c.condition.label for c in metrics.conditions), "total"]
    rows = [
        [
            f"`{m.value}`",
            *(c.failure_modes.get(m.value, 0) for c in metrics.conditions),
            metrics.failure_modes.get(m.value, 0),
        ]
        for m in MODE_PRECEDENCE
    ]
    return [
        "## Failure modes",
        "",
        "Failed episodes per failure mode (SPEC section 9); each episode's cause chain is in `failure_atlas.md`.",
        "",
        *table(header, rows),
        "",
    ]


def _failed_trials(records: Sequence[EpisodeRecord]) -> list[str]:
    failed = sorted((r for r in records if r.failed), key=lambda r: r.run_id)
    lines = ["## Failed trials", ""]
    if not failed:
        return [*lines, "None.", ""]
    rows = [[r.run_id, r.trace.termination.value, (r.trace.error or "")[:160]] for r in failed]
    return [
        *lines,
        f"{len(failed)} failed trials (counted as non-successes above):",
        "",
        *table(["episode", "termination", "error"], rows),
        "",
    ]


def _limitations(manifest: RunManifest, metrics: AggregateMetrics) -> list[str]:
    lines = [
        "## Limitations",
        "",
        "- Controlled simulations: the worlds, other actors' writes and tasks are synthetic and deterministic; "
        "rates measure behaviour on these scenarios, not on production systems.",
        f"- Suite size: {len(manifest.tasks)} tasks and {manifest.repeats} repeat(s) per condition; intervals are "
        "wide and tests have little power, so an interval that includes zero is not evidence of no effect.",
        "- Provider variation: results hold for this model, endpoint and temperature at the measurement time; "
        "providers change models behind a name, and sampling (and batching) makes repeats differ.",
        "- Failure attribution is rule-based (see `failure_atlas.md`): it reads versions in tool results and "
        "summaries, so a summary that paraphrases a state without its version cannot be checked for distortion.",
    ]
    if manifest.provider.model.startswith("scripted-"):
        lines.append(
            f"- The model `{manifest.provider.model}` is the scripted test server (a deterministic policy), not a "
            "language model: these numbers exercise the harness, they say nothing about an LLM."
        )
    if manifest.status is not RunStatus.COMPLETE:
        lines.append(
            f"- The run is {manifest.status.value}: {metrics.episodes.finished} of {metrics.episodes.planned} "
            "episodes; conditions with missing episodes are compared on the pairs both have."
        )
    if manifest.limit is not None:
        lines.append(f"- `--limit {manifest.limit}` restricted the task set: a smoke test, not comparable results.")
    return [*lines, ""]


def _receipts(manifest: RunManifest, metrics: AggregateMetrics) -> list[str]:
    return [
        "## Receipts",
        "",
        f"- `aggregate_metrics.json` holds every number above; analysis: {metrics.analysis.resamples} resamples, "
        f"seed {metrics.analysis.seed}, confidence {metrics.analysis.confidence:g}, statistics code "
        f"`analysis_sha256` {metrics.analysis.analysis_sha256}.",
        f"- `contextdelta verify {manifest.run_group_id}` re-executes every episode's tool calls in a fresh world "
        "from the task snapshot in `tasks/`, re-grades it and recomputes these aggregates.",
        f"- `contextdelta report {manifest.run_group_id}` rebuilds this report from the run directory alone.",
        "",
    ]


def render_report(manifest: RunManifest, records: Sequence[EpisodeRecord], metrics: AggregateMetrics) -> str:
    """The whole ``benchmark_report.md``."""
    rqs = {rq.id: rq for rq in metrics.research_questions}
    lines = [f"# ContextDelta benchmark report: {manifest.run_group_id}", ""]
    if manifest.status is not RunStatus.COMPLETE:
        lines += [
            f"**Incomplete run** (status `{manifest.status.value}`"
            + (f": {manifest.stop_reason}" if manifest.stop_reason else "")
            + f"): {metrics.episodes.finished} of {metrics.episodes.planned} episodes finished. The numbers cover "
            f"the finished episodes only; resume with `contextdelta run-benchmark --resume {manifest.run_group_id}`.",
            "",
        ]
    lines += _setup(manifest, records, metrics)
    lines += _definitions(metrics)
    lines += _conditions(metrics)
    lines += _question(rqs["RQ1"], "stale-action rate under context reduction")
    lines += _question(rqs["RQ2"], "typed state digest vs semantic summary")
    lines += _question(rqs["RQ3"], "freshness contract vs unprotected")
    lines += _tokens(metrics)
    lines += _failure_modes(metrics)
    lines += _failed_trials(records)
    lines += _limitations(manifest, metrics)
    lines += _receipts(manifest, metrics)
    return "\n".join(lines).rstrip("\n") + "\n"
