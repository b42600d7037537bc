"""Size and power of the primary test (exact sign-flip over tasks) by seeded, vectorised simulation.

Binary outcomes with task-level random effects (`contextdelta.stats.RandomEffectsModel`): 24 tasks, 3 repeats per
condition, within-task correlation from weak (repeats nearly independent) to strong (repeats near copies, as at
temperature 0). The size table has no true difference; the power table adds a true task-level difference (a shift
of condition a on the logit scale; the rate difference it makes is printed). For contrast, each table also shows
the episode-level exact McNemar test on (task, repeat) pairs, which treats repeats as independent evidence.

    .venv/bin/python benchmarks/stats_power.py [--datasets 4000] [--tasks 24] [--repeats 3] [--seed 2024]
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from contextdelta.stats import RandomEffectsModel, histograms_of, rejections

TOTAL_SDS = (0.3, 1.0, 2.0, 4.0, 8.0)
"""Total latent SD of a task (logit scale), split evenly between the shared task effect and the task x condition
effect."""
EFFECTS = (0.75, 1.5, 3.0)
BASE_RATE = 0.3
ALPHA = 0.05


def _mcnemar_rejects(a: npt.NDArray[np.bool_], b: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    only_a, only_b = (a & ~b).sum(axis=(1, 2)), (~a & b).sum(axis=(1, 2))
    n = only_a + only_b
    p = np.where(n > 0, np.minimum(1.0, 2.0 * binom.cdf(np.minimum(only_a, only_b), n, 0.5)), 1.0)
    return np.asarray(p <= ALPHA)


def simulate(
    total_sd: float, effect: float, tasks: int, repeats: int, datasets: int, rng: np.random.Generator
) -> tuple[float, float, float]:
    """(sign-flip rejection rate, episode-level McNemar rejection rate, mean rate difference a - b)."""
    model = RandomEffectsModel(BASE_RATE, total_sd / math.sqrt(2), total_sd / math.sqrt(2), effect)
    a, b = model.simulate(tasks, repeats, datasets, rng)
    differences = a.sum(axis=2).astype(np.int64) - b.sum(axis=2)
    primary = rejections(histograms_of(differences, repeats), repeats, ALPHA)
    return float(primary.mean()), float(_mcnemar_rejects(a, b).mean()), float(a.mean() - b.mean())


def main() -> None:
    """Print the size table and the power table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--datasets", type=int, default=4000)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.datasets)
    print(f"machine: {platform.platform()} | python {platform.python_version()}")
    print(
        f"{args.tasks} tasks x {args.repeats} repeats per condition, base rate {BASE_RATE}, alpha {ALPHA}, "
        f"{args.datasets} datasets per setting, seed {args.seed}"
    )
    start = time.perf_counter()
    print()
    print(f"Size (no true difference); Monte-Carlo sd of a rate near {ALPHA}: {se:.4f}")
    header = f"{'latent sd':>9} {'within-task corr':>17} {'sign-flip (tasks)':>18} {'McNemar (episodes)':>19}"
    print(header)
    print("-" * len(header))
    for sd in TOTAL_SDS:
        correlation = RandomEffectsModel(BASE_RATE, sd / math.sqrt(2), sd / math.sqrt(2)).within_task_correlation
        primary, mcnemar, _ = simulate(sd, 0.0, args.tasks, args.repeats, args.datasets, rng)
        print(f"{sd:>9.1f} {correlation:>17.2f} {primary:>18.4f} {mcnemar:>19.4f}")
    print()
    print("Power (true task-level difference: condition a shifted by `effect` on the logit scale)")
    header = f"{'latent sd':>9} {'effect':>6} {'rate diff':>9} {'sign-flip (tasks)':>18} {'McNemar (episodes)':>19}"
    print(header)
    print("-" * len(header))
    for sd in TOTAL_SDS:
        for effect in EFFECTS:
            primary, mcnemar, difference = simulate(sd, effect, args.tasks, args.repeats, args.datasets, rng)
            print(f"{sd:>9.1f} {effect:>6.2f} {difference:>+9.3f} {primary:>18.4f} {mcnemar:>19.4f}")
    print()
    print(
        f"{len(TOTAL_SDS) * (1 + len(EFFECTS))} settings x {args.datasets} datasets in "
        f"{time.perf_counter() - start:.2f} s. McNemar's power is not comparable where its size exceeds {ALPHA}."
    )


if __name__ == "__main__":
    main()
