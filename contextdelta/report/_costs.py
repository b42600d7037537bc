"""The prompt-caching section of the metrics pipeline: per condition the prompt tokens split by the provider's
cache, the cache-hit ratio and the cost with and without caching; per strategy whether its saving versus
full_history survives caching.

Keeping the full history keeps a provider's prompt cache warm (each request starts with the previous one), while a
summary, a digest or a sliding window rewrites the prefix and loses it. A strategy that sends fewer tokens can
therefore cost as much or more once cached tokens are billed at their lower rate: the token-reduction table alone
can have the wrong sign in dollars. Costs use the prices the run recorded (``RunManifest.prices``); a run without
them gets no section.
"""

from __future__ import annotations

import numpy as np

from contextdelta.report._conditions import estimates_for, paired_reductions
from contextdelta.report._context import ALL, MetricsContext
from contextdelta.report._models import (
    CachingCondition,
    CachingReduction,
    CachingSection,
    SurvivesCaching,
    TokenTotal,
)
from contextdelta.report._table import CACHING_METRICS
from contextdelta.stats import Estimate

CACHING_TOKENS = ("prompt_tokens", "cached_prompt_tokens", "cache_write_tokens", "uncached_prompt_tokens")
CACHING_COSTS = ("cost_with_caching_usd", "cost_without_caching_usd")


def _total(values: np.ndarray) -> TokenTotal:  # type: ignore[type-arg]
    known = values[~np.isnan(values)]
    return TokenTotal(total=float(known.sum()), n_known=int(known.size), n_unknown=int(values.size - known.size))


def survives(without_caching: Estimate, with_caching: Estimate) -> SurvivesCaching:
    """Whether a saving survives caching (see `CachingReduction.survives`)."""
    if without_caching.estimate is None or with_caching.estimate is None:
        return "no_price"
    if without_caching.estimate <= 0:
        return "no_saving"
    if with_caching.low is not None and with_caching.low > 0:
        return "yes"
    if with_caching.high is not None and with_caching.high < 0:
        return "reversed"
    return "unclear"


def caching_section(ctx: MetricsContext) -> CachingSection | None:
    """The section, or None when the run recorded no prices (or the table lacks the caching values)."""
    prices = ctx.manifest.prices
    if prices is None or any(m not in ctx.table.values for m in CACHING_METRICS):
        return None
    table = ctx.table
    means = estimates_for(ctx, [(m, ALL) for m in CACHING_COSTS])
    conditions = []
    for k in ctx.keys:
        rows = ctx.rows((k.strategy, k.protection_mode))
        reported = rows[table.values["cache_reported"][rows] == 1.0]
        prompt = float(np.nansum(table.values["prompt_tokens"][reported]))
        cached = float(np.nansum(table.values["cached_prompt_tokens"][reported]))
        conditions.append(
            CachingCondition(
                condition=k,
                episodes=int(rows.size),
                cache_reported=int(reported.size),
                tokens={m: _total(table.values[m][rows]) for m in CACHING_TOKENS},
                cache_hit_ratio=cached / prompt if prompt > 0 else None,
                costs={m: _total(table.values[m][rows]) for m in CACHING_COSTS},
                means={m: means[(m, ALL)][k] for m in CACHING_COSTS},
            )
        )
    return CachingSection(
        prices=dict(prices),
        definitions=dict(CACHING_METRICS),
        conditions=conditions,
        reductions=_reductions(ctx),
    )


def _reductions(ctx: MetricsContext) -> list[CachingReduction]:
    """Each strategy's paired cost reduction versus full_history in the same mode, without and with caching."""
    return [
        CachingReduction(
            condition=k,
            baseline=baseline,
            without_caching=found["cost_without_caching_usd"],
            with_caching=found["cost_with_caching_usd"],
            survives=survives(found["cost_without_caching_usd"], found["cost_with_caching_usd"]),
        )
        for k, baseline, found in paired_reductions(ctx, CACHING_COSTS)
    ]
