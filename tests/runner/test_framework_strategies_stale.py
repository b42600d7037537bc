"""Issue 14's acceptance: with the scripted server's context_trusting policy, tool_result_clearing and
token_budget_trim act on stale state exactly on the superseded-observation tasks whose decisive observation (the
listing that shows the change) they drop, and full_history never does.

context_trusting acts on what its context shows: when the listing that shows the change is gone, the ticket's
quoted (superseded) snapshot is all it has, so it writes from it. tool_result_clearing (trigger 6, keep 3) clears
the listing once more than three tool calls follow it; token_budget_trim (budget 1,200 tokens) drops its group once
the newer groups fill the budget. At horizon 1 both keep the listing and no write is stale; at the longer horizon
every task gets a stale write, each sent from a context the strategy had reduced."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextdelta.rundir import EpisodeRecord
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.testing import serve_scripted
from contextdelta.worlds import ToolKind
from tests.report.runs import HORIZON_TASKS

FAMILIES = ("order-address-shipped", "calendar-meeting-moved")
HORIZONS = {"tool_result_clearing": 16, "token_budget_trim": 4}
"""For each strategy, a horizon at which the listing is out of what it keeps."""


def _tasks(horizon: int, per_family: int = 2) -> list[str]:
    found: list[str] = []
    for family in FAMILIES:
        found += sorted(p.stem for p in HORIZON_TASKS.rglob(f"{family}-h{horizon:02d}-*.yaml"))[:per_family]
    return found


def _reduced_at_stale_writes(record: EpisodeRecord) -> list[bool]:
    """For each stale write of the episode, whether the strategy had dropped or cleared part of the history in the
    context of the step that sent it."""
    stale = {flag.seq for flag in record.verdict.event_flags if flag.stale}
    return [
        bool(record.trace.steps[event.step - 1].context.removed)
        for event in record.trace.tool_events()
        if event.actor == "agent" and event.kind is ToolKind.WRITE and event.seq in stale
    ]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", sorted(HORIZONS))
def test_a_strategy_acts_stale_where_it_dropped_the_decisive_observation(strategy: str, tmp_path: Path) -> None:
    short, long = _tasks(1), _tasks(HORIZONS[strategy])
    with serve_scripted("context_trusting", HORIZON_TASKS) as url:
        outcome = run_benchmark(
            BenchmarkRequest.model_validate(
                {
                    "tasks_dir": HORIZON_TASKS,
                    "base_url": url,
                    "model": "scripted-context_trusting",
                    "results_dir": tmp_path,
                    "task_ids": short + long,
                    "strategies": ["full_history", strategy],
                    "protection_modes": ["unprotected"],
                    "repeats": 1,
                }
            )
        )
    by = {(r.task_id, r.strategy): r for r in outcome.records}
    for task in short + long:
        assert by[(task, "full_history")].verdict.stale_action_count == 0, task
    for task in short:  # the listing is still kept: no stale action
        assert by[(task, strategy)].verdict.stale_action_count == 0, task
    for task in long:  # the listing was dropped before the write: the superseded snapshot is acted on
        reduced = by[(task, strategy)]
        assert reduced.verdict.stale_action_count >= 1, task
        # and every stale write was sent from a context the strategy had reduced
        assert _reduced_at_stale_writes(reduced) and all(_reduced_at_stale_writes(reduced)), task
