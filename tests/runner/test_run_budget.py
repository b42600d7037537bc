"""The run's budget as a running episode checks it (``Costing.run_budget`` over a :class:`RunSpend`): the driver's
recorded spend and the running episodes of this process add up; an episode's own entry leaves with it."""

from __future__ import annotations

from contextdelta.agent import EpisodeTotals
from contextdelta.providers import Price, Usage
from contextdelta.runner.episode import Costing, RunSpend

PRICES = {"m": Price(input_per_mtok=1.0, output_per_mtok=0.0)}


def spent(usd: float) -> EpisodeTotals:
    """Totals of one agent call that cost ``usd`` at :data:`PRICES`."""
    return EpisodeTotals(agent_calls=1, agent_usage=Usage(prompt_tokens=round(usd * 1_000_000)))


def test_recorded_and_running_spend_add_up_to_the_budget() -> None:
    costing = Costing(PRICES, "m", "m", max_cost_usd=1.0)
    spend = RunSpend()
    a, b = costing.budget_check(spend, "a"), costing.budget_check(spend, "b")
    assert a is not None and b is not None
    assert a(spent(0.4)) is None and b(spent(0.4)) is None  # 0.8 running
    spend.set_recorded(0.1)  # the driver recorded another episode (another worker's, say)
    assert a(spent(0.4)) is None  # 0.9
    reason = a(spent(0.5))  # a spent 0.1 more: 1.0
    assert reason is not None and reason.startswith("run cost $1.0000") and "--max-cost-usd $1.0" in reason
    assert b(spent(0.4)) is not None  # b, with nothing more spent, may not make another call either
    del spend.running["a"]  # a returned: the driver now counts its record
    spend.set_recorded(0.6)
    assert b(spent(0.3)) is None  # 0.9


def test_no_budget_means_no_check_and_an_unknown_cost_is_refused() -> None:
    assert Costing(PRICES, "m", "m").budget_check(RunSpend(), "a") is None
    check = Costing(PRICES, "m", "m", max_cost_usd=5.0).budget_check(RunSpend(), "a")
    assert check is not None
    unknown = EpisodeTotals(agent_calls=1, usage_complete=False)
    assert "cannot be enforced" in (check(unknown) or "")
