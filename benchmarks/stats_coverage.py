"""Coverage of the report's 95% intervals by seeded simulation: how often they hold the true value.

Binary outcomes with task-level random effects (`contextdelta.stats.RandomEffectsModel`, as in
`stats_power.py`): tasks drawn from a population, repeats of a task correlated through the task's latent effect.
Each dataset goes through the package's own functions, as a run's report calls them:

- a rate: `bootstrap_rate` (hierarchical task-cluster bootstrap; an exact Clopper-Pearson bound over tasks when it
  degenerates) on condition b; the true value is the population mean of a task's success probability;
- a paired difference: `paired_comparison(a, b).difference` (task-bootstrap interval of the mean per-task
  difference, expanded percentile levels unless ``--task-interval percentile``); the true value is the population
  mean of the per-task difference of probabilities.

Coverage is the share of datasets whose interval holds the true value, with its Monte-Carlo standard error;
``low``/``high`` count the misses on each side (the interval wholly below, or above, the true value).

    .venv/bin/python benchmarks/stats_coverage.py [--datasets 1000] [--resamples 2000] [--repeats 3] [--seed 7]
        [--task-interval expanded_percentile|percentile]
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from dataclasses import dataclass
from typing import get_args

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit

from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    EstimateStatus,
    RandomEffectsModel,
    TaskInterval,
    bootstrap_rate,
    cluster_by_task,
    paired_comparison,
)

LEVEL = 0.95
TASKS = (24, 48, 96)


@dataclass(frozen=True)
class Setting:
    base_rate: float
    total_sd: float
    """Total latent SD of a task (logit scale), split evenly between the shared task effect and the task x
    condition effect, as in `stats_power.py`."""
    effect: float

    def model(self) -> RandomEffectsModel:
        half = self.total_sd / math.sqrt(2)
        return RandomEffectsModel(self.base_rate, half, half, self.effect)


SETTINGS = (
    Setting(0.5, 2.0, 0.0),  # task rates spread around one half (population mean 0.50), no difference
    Setting(0.03, 2.0, 0.0),  # a low rate, as a stale-action rate is (mean 0.096): skewed task means
    Setting(0.01, 2.0, 0.0),  # a rare outcome (mean 0.044): many tasks at 0
    Setting(0.01, 4.0, 0.0),  # low, repeats near copies (mean 0.147)
    Setting(0.3, 2.0, 1.5),  # a true difference (+0.22)
)


def population_mean(base_rate: float, sd: float, shift: float = 0.0) -> float:
    """E[expit(logit(base_rate) + shift + Z)], Z ~ N(0, sd^2), by Gauss-Hermite quadrature."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(160)
    return float(weights @ expit(logit(base_rate) + shift + sd * nodes) / math.sqrt(2 * math.pi))


def sample(outcomes: npt.NDArray[np.bool_]) -> ClusteredSample:
    tasks, repeats = outcomes.shape
    ids = np.repeat([f"t{i:03d}" for i in range(tasks)], repeats)
    return cluster_by_task(ids, np.tile(np.arange(repeats), tasks), outcomes.ravel())


def main() -> None:
    """Print the coverage of the rate and the paired-difference intervals per setting and number of tasks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--task-interval",
        choices=get_args(TaskInterval),
        default=AnalysisParams().task_interval,
        help="interval of the task-level statistics (the paired difference); `percentile`: as before 0.6.0",
    )
    args = parser.parse_args()
    for name in ("datasets", "resamples", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: give 1 or more")
    rng = np.random.default_rng(args.seed)
    se = math.sqrt(LEVEL * (1 - LEVEL) / args.datasets)
    print(f"machine: {platform.platform()} | python {platform.python_version()}")
    print(
        f"{args.repeats} repeats per task and condition, {args.datasets} datasets per row, {args.resamples} bootstrap "
        f"resamples per interval (the report's default is 10,000), seed {args.seed}, task-level intervals "
        f"{args.task_interval}; nominal {LEVEL:.2f}, "
        f"Monte-Carlo sd of a coverage near it {se:.4f}"
    )
    header = (
        f"{'base':>5} {'latent sd':>9} {'effect':>6} {'tasks':>5} | {'rate true':>9} {'coverage':>8} {'low/high':>9}"
        f" {'exact':>5} | {'diff true':>9} {'coverage':>8} {'low/high':>9}"
    )
    print(header)
    print("-" * len(header))
    start = time.perf_counter()
    for setting in SETTINGS:
        model = setting.model()
        rate_true = population_mean(setting.base_rate, setting.total_sd)
        diff_true = population_mean(setting.base_rate, setting.total_sd, setting.effect) - rate_true
        for tasks in TASKS:
            a, b = model.simulate(tasks, args.repeats, args.datasets, rng)
            rate = {"in": 0, "low": 0, "high": 0, "exact": 0}
            diff = {"in": 0, "low": 0, "high": 0}
            for index in range(args.datasets):
                params = AnalysisParams(resamples=args.resamples, seed=index, task_interval=args.task_interval)
                found = bootstrap_rate(sample(b[index]), params)
                difference = paired_comparison(sample(a[index]), sample(b[index]), params).difference
                rate["exact"] += found.status == EstimateStatus.EXACT_BOUND
                for counts, estimate, truth in ((rate, found, rate_true), (diff, difference, diff_true)):
                    assert estimate.low is not None and estimate.high is not None
                    side = "low" if estimate.high < truth else "high" if estimate.low > truth else "in"
                    counts[side] += 1
            print(
                f"{setting.base_rate:>5.2f} {setting.total_sd:>9.1f} {setting.effect:>6.2f} {tasks:>5} | "
                f"{rate_true:>9.4f} {rate['in'] / args.datasets:>8.4f} {rate['low']:>4}/{rate['high']:<4}"
                f" {rate['exact']:>5} | {diff_true:>+9.4f} {diff['in'] / args.datasets:>8.4f}"
                f" {diff['low']:>4}/{diff['high']:<4}",
                flush=True,
            )
    print(
        f"{len(SETTINGS) * len(TASKS)} rows in {time.perf_counter() - start:.0f} s. `exact`: datasets whose rate "
        f"interval is the exact bound (every task at the same value)."
    )


if __name__ == "__main__":
    main()
