"""The control conditions of a run (``--controls no_mutation``): what each strategy and mode costs when nothing
changes behind the agent's back.

Control episodes never enter the main conditions, the research questions or the failure atlas
(:func:`main_records`); they get a section of their own, per (control, strategy, mode): success, the share of
episodes in which the freshness contract refused a write, the stale-action rate (0 unless the agent's own
bookkeeping is off), and reads and model calls per episode, each with the same task-cluster intervals (or exact
bounds) as the main conditions. Runs without control episodes have no such section.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contextdelta.report._conditions import empty_estimate, estimates_for
from contextdelta.report._context import ALL, MetricsContext
from contextdelta.report._models import ConditionKey, ControlCondition
from contextdelta.report._table import EpisodeTable
from contextdelta.rundir import EpisodeRecord, RunManifest
from contextdelta.stats import AnalysisParams, bootstrap_means, cluster_by_task
from contextdelta.worlds import ToolKind

CONTROL_RATES = ("success", "blocked_write", "stale_action")
CONTROL_MEANS = ("steps",)


def main_records(records: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """The episodes of the main matrix (every control episode left out)."""
    return [r for r in records if not r.control]


def read_calls(record: EpisodeRecord) -> float:
    """The agent's read tool calls in one episode."""
    return float(sum(1 for e in record.trace.tool_events() if e.actor == "agent" and e.kind is ToolKind.READ))


def controls_section(
    manifest: RunManifest, records: Sequence[EpisodeRecord], params: AnalysisParams
) -> list[ControlCondition] | None:
    """Every (control, strategy, mode) with episodes, in manifest order; None when the run has no control episode."""
    controlled = sorted((r for r in records if r.control), key=lambda r: r.run_id)
    if not controlled:
        return None
    names = list(dict.fromkeys([*manifest.controls, *sorted({str(r.control) for r in controlled})]))
    out: list[ControlCondition] = []
    for name in names:
        mine = [r for r in controlled if r.control == name]
        if not mine:
            continue
        ctx = MetricsContext.build(manifest, EpisodeTable.from_records(mine, [], manifest), params)
        found = estimates_for(ctx, [(m, ALL) for m in (*CONTROL_RATES, *CONTROL_MEANS)])
        reads = bootstrap_means(
            {
                (k.strategy, k.protection_mode): cluster_by_task(
                    ctx.table.task_id[rows],
                    ctx.table.repeat[rows],
                    np.array([read_calls(mine[i]) for i in rows]),
                    None if ctx.table.story is None else ctx.table.story[rows],
                )
                for k in ctx.keys
                if (rows := ctx.rows((k.strategy, k.protection_mode))).size
            },
            params,
        )
        for k in ctx.keys:
            condition = (k.strategy, k.protection_mode)
            rows = ctx.rows(condition)
            if not rows.size:
                continue
            out.append(
                ControlCondition(
                    control=name,
                    condition=ConditionKey(strategy=k.strategy, protection_mode=k.protection_mode),
                    episodes=int(rows.size),
                    tasks=int(np.unique(ctx.table.task_id[rows]).size),
                    failed_trials=int(ctx.table.failed[rows].sum()),
                    rates={m: found[(m, ALL)][k] for m in CONTROL_RATES},
                    means={
                        **{m: found[(m, ALL)][k] for m in CONTROL_MEANS},
                        "read_calls": reads.get(condition, empty_estimate(params)),
                    },
                )
            )
    return out


__all__ = ["CONTROL_MEANS", "CONTROL_RATES", "controls_section", "main_records", "read_calls"]
