"""Statistics for ContextDelta reports (SPEC section 10): pure numpy/scipy, deterministic given a seed.

The unit of inference is the task: repeats of a task are near copies at temperature 0 and never count as
independent evidence. Typical use from a per-episode table::

    samples = split_by_condition(list(zip(strategy, mode)), task_id, repeat, stale)   # one sample per condition
    rates = bootstrap_rates(samples, params)          # rate + hierarchical task-cluster interval (or exact bound)
    flips = flip_rates(samples, params)               # share of tasks whose repeats disagree
    pass_k = pass_hat_k_many(samples, ks=[1, 2, 3], params=params)
    found = paired_comparisons({name: (samples[a], samples[b]) for name, (a, b) in planned.items()}, params)
    tests = holm_family({name: c.test for name, c in found.items()})      # untestable members leave the family
    mdd = minimum_detectable_difference(PilotModel.from_pairs(pair_by_task(...)), n_tasks, repeats, 0.05 / m)
    curves = dose_curves({key: DoseInput(samples_by_horizon, threshold=0.10)}, params)   # rate per horizon, slope

Every result is a pydantic model without NaN: see `EstimateStatus` for empty, degenerate and one-task data.
"""

from contextdelta.stats._bootstrap import (
    TaskValues,
    bootstrap_mean,
    bootstrap_means,
    bootstrap_rate,
    bootstrap_rates,
    bootstrap_relative_reduction,
    bootstrap_relative_reductions,
    check_binary,
    task_level_estimates,
)
from contextdelta.stats._exact import exact_bound
from contextdelta.stats._flip import FLIP_NEEDS_REPEATS, flip_rates
from contextdelta.stats._horizon import DoseCurve, DoseInput, dose_curves, horizon_params, logistic_slopes
from contextdelta.stats._paired import paired_comparison, paired_comparisons
from contextdelta.stats._params import (
    DEFAULT_PARAMS,
    MIN_TASKS_FOR_COVERAGE,
    AnalysisParams,
    ShareInterval,
    TaskInterval,
)
from contextdelta.stats._passk import pass_hat_k, pass_hat_k_many
from contextdelta.stats._power import (
    DEFAULT_DATASETS,
    NO_PILOT_DATA,
    SIMULATION_EXACT_LIMIT,
    TARGET_POWER,
    DetectableDifference,
    PilotModel,
    RandomEffectsModel,
    StoryPilotModel,
    histograms_of,
    minimum_detectable_difference,
    pilot_design,
    rejections,
    tasks_needed,
)
from contextdelta.stats._precision import fixed, printed_decimals, rounded_half_even
from contextdelta.stats._receipt import analysis_sha256
from contextdelta.stats._results import (
    Estimate,
    EstimateStatus,
    HorizonCrossing,
    InfiniteEnd,
    LogisticSlope,
    PairedComparison,
    PairTable,
    PassK,
    SignFlipMethod,
    SignFlipTest,
    SlopeStatus,
)
from contextdelta.stats._samples import (
    ClusteredSample,
    PairedSample,
    TaskPairs,
    cluster_by_task,
    pair_by_task,
    pair_by_task_repeat,
    split_by_condition,
)
from contextdelta.stats._signflip import ENUMERATION_LIMIT, MONTE_CARLO_PATTERNS, sign_flip_test, unit_differences
from contextdelta.stats._significance import holm_adjust, holm_family, pair_table

__all__ = [
    "DEFAULT_DATASETS",
    "DEFAULT_PARAMS",
    "ENUMERATION_LIMIT",
    "FLIP_NEEDS_REPEATS",
    "MIN_TASKS_FOR_COVERAGE",
    "MONTE_CARLO_PATTERNS",
    "NO_PILOT_DATA",
    "SIMULATION_EXACT_LIMIT",
    "TARGET_POWER",
    "AnalysisParams",
    "ClusteredSample",
    "DetectableDifference",
    "DoseCurve",
    "DoseInput",
    "Estimate",
    "EstimateStatus",
    "HorizonCrossing",
    "InfiniteEnd",
    "LogisticSlope",
    "PairTable",
    "PairedComparison",
    "PairedSample",
    "PassK",
    "PilotModel",
    "RandomEffectsModel",
    "ShareInterval",
    "SignFlipMethod",
    "SignFlipTest",
    "SlopeStatus",
    "StoryPilotModel",
    "TaskInterval",
    "TaskPairs",
    "TaskValues",
    "analysis_sha256",
    "bootstrap_mean",
    "bootstrap_means",
    "bootstrap_rate",
    "bootstrap_rates",
    "bootstrap_relative_reduction",
    "bootstrap_relative_reductions",
    "check_binary",
    "cluster_by_task",
    "dose_curves",
    "exact_bound",
    "fixed",
    "flip_rates",
    "histograms_of",
    "holm_adjust",
    "holm_family",
    "horizon_params",
    "logistic_slopes",
    "minimum_detectable_difference",
    "pair_by_task",
    "pair_by_task_repeat",
    "pair_table",
    "paired_comparison",
    "paired_comparisons",
    "pass_hat_k",
    "pass_hat_k_many",
    "pilot_design",
    "printed_decimals",
    "rejections",
    "rounded_half_even",
    "sign_flip_test",
    "split_by_condition",
    "task_level_estimates",
    "tasks_needed",
    "unit_differences",
]
