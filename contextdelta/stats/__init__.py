"""Statistics for ContextDelta reports (SPEC section 10): pure numpy/scipy, deterministic given a seed.

Typical use from a per-episode table::

    samples = split_by_condition(list(zip(strategy, mode)), task_id, repeat, success)
    rates = bootstrap_means(samples, params)                       # rate + 95% interval per condition
    pass_k = pass_hat_k_many(samples, ks=[1, 2, 3], params=params)
    pairs = {name: pair_by_task_repeat(samples[a], samples[b]) for name, (a, b) in comparisons.items()}
    deltas = bootstrap_differences(pairs, params)                  # paired difference a - b
    tests = holm_family({name: mcnemar_exact(p) for name, p in pairs.items()})

Every result is a pydantic model without NaN: see `EstimateStatus` for empty, constant and one-task data.
"""

from contextdelta.stats._bootstrap import (
    bootstrap_difference,
    bootstrap_differences,
    bootstrap_mean,
    bootstrap_means,
    bootstrap_relative_reduction,
    bootstrap_relative_reductions,
)
from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._passk import pass_hat_k, pass_hat_k_many
from contextdelta.stats._receipt import analysis_sha256
from contextdelta.stats._results import Estimate, EstimateStatus, McNemarResult, PassK
from contextdelta.stats._samples import (
    ClusteredSample,
    PairedSample,
    cluster_by_task,
    pair_by_task_repeat,
    split_by_condition,
)
from contextdelta.stats._significance import holm_adjust, holm_family, mcnemar_exact, mcnemar_pvalue

__all__ = [
    "DEFAULT_PARAMS",
    "AnalysisParams",
    "ClusteredSample",
    "Estimate",
    "EstimateStatus",
    "McNemarResult",
    "PairedSample",
    "PassK",
    "analysis_sha256",
    "bootstrap_difference",
    "bootstrap_differences",
    "bootstrap_mean",
    "bootstrap_means",
    "bootstrap_relative_reduction",
    "bootstrap_relative_reductions",
    "cluster_by_task",
    "holm_adjust",
    "holm_family",
    "mcnemar_exact",
    "mcnemar_pvalue",
    "pair_by_task_repeat",
    "pass_hat_k",
    "pass_hat_k_many",
    "split_by_condition",
]
