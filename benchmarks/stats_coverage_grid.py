"""Coverage of every interval a condition's row prints (rate, pass^k, flip rate), over a grid of runs' shapes.

A statistician's check of the report's 95% intervals: tasks drawn from a population with task random effects
(a task's success probability ``expit(mu + sd * Z)``, ``Z ~ N(0, 1)``, ``mu`` set so that the population mean rate
is the row's), each task run ``repeats`` times, every dataset analysed by the package's own functions as the
report calls them (`bootstrap_rate`, `pass_hat_k_many` for k = 1..repeats, `flip_rates`). The true values:

- rate: the population mean of a task's probability ``E[p]``;
- pass^k, both estimates (``all``: the share of tasks whose first k repeats pass; ``unb``: the mean of
  C(c,k)/C(n,k)): ``E[p^k]``;
- flip rate (repeats >= 2): ``1 - E[p^r] - E[(1-p)^r]``.

Each line: coverage (the share of datasets whose closed interval holds the truth, an end within 1e-9 of it counting
as equal) with its Monte-Carlo standard error,
the misses below/above (interval wholly below the truth / wholly above), and the mean width. The summary gives,
per statistic, the lowest coverage at each number of tasks and the rows below 0.94.

    nice -n 10 .venv/bin/python benchmarks/stats_coverage_grid.py [--datasets 600] [--resamples 200] [--seed 11]
        [--latent-sd 2.0] [--tasks 12 24 30 60 96] [--repeats 1 3 5] [--rates 0.05 0.2 0.5 0.8 0.95]
        [--share-interval clopper_pearson|bootstrap] [--cluster-interval expanded_percentile|percentile]
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from collections import defaultdict
from typing import get_args

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq
from scipy.special import expit

from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    Estimate,
    ShareInterval,
    TaskInterval,
    bootstrap_rate,
    cluster_by_task,
    flip_rates,
    pass_hat_k_many,
)

LEVEL = 0.95
FLOOR = 0.94
"""A row below this coverage (at 1,000 datasets about 1.5 Monte-Carlo standard errors under 0.95) is reported."""

TIE = 1e-9
"""How far apart an interval's end and the truth may be and still count as equal."""

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(160)


def moment(mu: float, sd: float, power: int, complement: bool = False) -> float:
    """``E[p^power]`` (or ``E[(1 - p)^power]``) for ``p = expit(mu + sd * Z)``, by Gauss-Hermite quadrature."""
    p = expit(mu + sd * _NODES)
    return float(_WEIGHTS @ ((1.0 - p) if complement else p) ** power / math.sqrt(2.0 * math.pi))


def location(mean: float, sd: float) -> float:
    """The ``mu`` whose population mean rate ``E[p]`` is ``mean``."""
    return float(brentq(lambda mu: moment(mu, sd, 1) - mean, -40.0, 40.0))


def sample(outcomes: npt.NDArray[np.bool_]) -> ClusteredSample:
    tasks, repeats = outcomes.shape
    ids = np.repeat([f"t{i:03d}" for i in range(tasks)], repeats)
    return cluster_by_task(ids, np.tile(np.arange(repeats), tasks), outcomes.ravel())


def estimates(outcomes: npt.NDArray[np.bool_], params: AnalysisParams) -> dict[str, Estimate]:
    """Every interval of one condition's row, by the name the table prints."""
    data = sample(outcomes)
    repeats = outcomes.shape[1]
    out = {"rate": bootstrap_rate(data, params)}
    for k, found in pass_hat_k_many({0: data}, list(range(1, repeats + 1)), params)[0].items():
        out[f"pass^{k} all"] = found.all_pass
        out[f"pass^{k} unb"] = found.unbiased
    if repeats >= 2:
        out["flip"] = flip_rates({0: data}, params)[0]
    return out


def truths(mu: float, sd: float, repeats: int) -> dict[str, float]:
    out = {"rate": moment(mu, sd, 1)}
    for k in range(1, repeats + 1):
        out[f"pass^{k} all"] = out[f"pass^{k} unb"] = moment(mu, sd, k)
    if repeats >= 2:
        out["flip"] = 1.0 - moment(mu, sd, repeats) - moment(mu, sd, repeats, complement=True)
    return out


def main() -> None:
    """Print the coverage of each interval per number of tasks, repeats and mean rate, then a summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--datasets", type=int, default=600)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--latent-sd", type=float, default=2.0, help="task effect SD on the logit scale")
    parser.add_argument("--tasks", type=int, nargs="+", default=[12, 24, 30, 60, 96])
    parser.add_argument("--repeats", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.2, 0.5, 0.8, 0.95])
    parser.add_argument(
        "--share-interval",
        choices=get_args(ShareInterval),
        default=AnalysisParams().share_interval,
        help="interval of pass^k and the flip rate; `bootstrap`: as reports written by 0.13.0 and earlier",
    )
    parser.add_argument(
        "--cluster-interval",
        choices=get_args(TaskInterval),
        default=AnalysisParams().cluster_interval,
        help="interval of the rate; `percentile`: as reports written by 0.13.0 and earlier",
    )
    args = parser.parse_args()
    for name in ("datasets", "resamples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: give 1 or more")
    if min(args.tasks) < 2 or min(args.repeats) < 1 or not all(0.0 < r < 1.0 for r in args.rates):
        parser.error("--tasks from 2, --repeats from 1, --rates strictly between 0 and 1")
    rng = np.random.default_rng(args.seed)
    print(f"machine: {platform.platform()} | python {platform.python_version()}")
    print(
        f"latent task sd {args.latent_sd:g} (logit scale), {args.datasets} datasets per row, "
        f"{args.resamples} bootstrap resamples per interval (the report's default is 10,000), seed {args.seed}, "
        f"pass^k and flip-rate intervals {args.share_interval}, rate intervals {args.cluster_interval}; nominal "
        f"{LEVEL:.2f}, Monte-Carlo sd of a coverage near it {math.sqrt(LEVEL * (1 - LEVEL) / args.datasets):.4f}"
    )
    header = (
        f"{'tasks':>5} {'reps':>4} {'mean':>5} {'statistic':<12} {'truth':>7} {'coverage':>8} {'mc sd':>6} "
        f"{'low/high':>9} {'width':>6}"
    )
    print(header)
    print("-" * len(header))
    start = time.perf_counter()
    worst: dict[str, dict[int, float]] = defaultdict(dict)
    below: list[str] = []
    for tasks in args.tasks:
        for repeats in args.repeats:
            for mean in args.rates:
                mu = location(mean, args.latent_sd)
                truth = truths(mu, args.latent_sd, repeats)
                p = expit(mu + args.latent_sd * rng.standard_normal((args.datasets, tasks)))
                outcomes = rng.random((args.datasets, tasks, repeats)) < p[..., None]
                counts: dict[str, list[float]] = {name: [0, 0, 0, 0.0] for name in truth}
                for index in range(args.datasets):
                    params = AnalysisParams(
                        resamples=args.resamples,
                        seed=index,
                        share_interval=args.share_interval,
                        cluster_interval=args.cluster_interval,
                    )
                    for name, found in estimates(outcomes[index], params).items():
                        assert found.low is not None and found.high is not None, (name, found)
                        value = truth[name]
                        # an end equal to the truth holds it: a rate's percentile ends are multiples of 1/tasks,
                        # and a truth such as 0.5 of 12 tasks sits on one up to its quadrature's rounding
                        under, over = found.high < value - TIE, found.low > value + TIE
                        counts[name][0 if under else 2 if over else 1] += 1
                        counts[name][3] += found.high - found.low
                for name, (low, inside, high, width) in counts.items():
                    coverage = inside / args.datasets
                    sd = math.sqrt(max(coverage * (1 - coverage), 1e-12) / args.datasets)
                    line = (
                        f"{tasks:>5} {repeats:>4} {mean:>5.2f} {name:<12} {truth[name]:>7.4f} {coverage:>8.4f} "
                        f"{sd:>6.4f} {int(low):>4}/{int(high):<4} {width / args.datasets:>6.3f}"
                    )
                    print(line, flush=True)
                    family = name.split(" ")[0] if name.startswith("pass^") else name
                    key = f"{family} {name.split(' ')[1]}" if name.startswith("pass^") else name
                    worst[key][tasks] = min(worst[key].get(tasks, 1.0), coverage)
                    if coverage < FLOOR:
                        below.append(line)
    print(f"{len(args.tasks) * len(args.repeats) * len(args.rates)} cells in {time.perf_counter() - start:.0f} s")
    print()
    print("lowest coverage per statistic and number of tasks (over repeats and mean rates):")
    print(f"{'statistic':<12} " + " ".join(f"{t:>6}" for t in args.tasks))
    for key in sorted(worst, key=lambda k: (k.split("^")[0], k)):
        print(f"{key:<12} " + " ".join(f"{worst[key].get(t, float('nan')):>6.3f}" for t in args.tasks))
    print()
    print(f"rows below {FLOOR}: {len(below)}")
    for line in below:
        print(line)


if __name__ == "__main__":
    main()
