"""Size of the paired test and coverage of the paired-difference interval when tasks share stories, by seeded
simulation: the task-level analysis (every task its own unit) against the story-level one.

A task family tells one story at several horizons: S stories x H horizons are the S*H tasks, each run R times under
both conditions a and b (0/1 outcomes). On the logit scale an episode of story s, horizon h, condition c is

    logit(base) + horizon_step * h + u_s + e_sh + sign(c) * (w_s + v_sh) / 2,      sign(a) = +1, sign(b) = -1

with a story effect ``u_s ~ N(0, story_sd^2)`` shared by both conditions and every horizon of the story, a task
effect ``e_sh ~ N(0, task_sd^2)`` shared by both conditions, a story x condition interaction
``w_s ~ N(0, tau^2)`` (in one story condition a helps, in another it hurts, at every horizon of the story: this is
what makes the differences of a story's tasks correlated) and a task x condition interaction
``v_sh ~ N(0, task_interaction_sd^2)``. The interactions are symmetric around 0, so under this null the population
mean of a task's difference of success probabilities is exactly 0 (each term has its mirror image).

Each dataset goes through the package's own functions, as a report calls them: `cluster_by_task` (with the story
labels, or without: clusters=None) and `paired_comparison`, whose ``test`` is the sign-flip test (over tasks, or
over stories) and whose ``difference`` is the bootstrap interval of the mean per-task difference (tasks resampled,
or stories). Printed per heterogeneity level tau: the rejection rate at alpha of each test (a not-testable
comparison does not reject) and the coverage of each 95% interval of the true difference 0, with Monte-Carlo
standard errors. tau = 0 is the control: without a story x condition interaction the tasks of a story are
independent in their differences and both analyses are valid.

    .venv/bin/python benchmarks/stats_stories.py [--datasets 1000] [--stories 12] [--horizons 3] [--repeats 3]
        [--taus 0,0.5,1,2] [--resamples 1000] [--seed 11]
"""

from __future__ import annotations

import argparse
import math
import platform
import shlex
import sys
import time

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit

from contextdelta.stats import AnalysisParams, ClusteredSample, PairedComparison, cluster_by_task, paired_comparison

CONFIDENCE = 0.95


def simulate(
    args: argparse.Namespace, tau: float, rng: np.random.Generator
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Outcomes of a and b, each ``(datasets, stories * horizons, repeats)``: task ``s * horizons + h``."""
    d, s, h, r = args.datasets, args.stories, args.horizons, args.repeats
    story = rng.normal(0.0, args.story_sd, size=(d, s, 1))
    task = rng.normal(0.0, args.task_sd, size=(d, s, h))
    story_x_condition = rng.normal(0.0, 1.0, size=(d, s, 1)) * tau
    task_x_condition = rng.normal(0.0, args.task_interaction_sd, size=(d, s, h))
    shared = logit(args.base_rate) + args.horizon_step * np.arange(h) + story + task
    half = (story_x_condition + task_x_condition) / 2.0
    p_a = expit(shared + half).reshape(d, s * h, 1)
    p_b = expit(shared - half).reshape(d, s * h, 1)
    a = (rng.random((d, s * h, r)) < p_a).astype(np.float64)
    b = (rng.random((d, s * h, r)) < p_b).astype(np.float64)
    return a, b


class Layout:
    """The per-episode task, repeat and story labels of the design (the same for every dataset)."""

    def __init__(self, stories: int, horizons: int, repeats: int) -> None:
        n_tasks = stories * horizons
        self.tasks = np.repeat([f"s{t // horizons:03d}-h{t % horizons}" for t in range(n_tasks)], repeats)
        self.repeats = np.tile(np.arange(repeats), n_tasks)
        self.stories = np.repeat([f"s{t // horizons:03d}" for t in range(n_tasks)], repeats)

    def sample(self, outcomes: npt.NDArray[np.float64], by_story: bool) -> ClusteredSample:
        return cluster_by_task(self.tasks, self.repeats, outcomes.ravel(), self.stories if by_story else None)


class Tally:
    """Rejections and interval misses of one analysis over the datasets of one setting."""

    def __init__(self) -> None:
        self.rejected = self.low = self.high = self.n = 0

    def add(self, comparison: PairedComparison, alpha: float) -> None:
        self.n += 1
        pvalue = comparison.test.pvalue
        self.rejected += pvalue is not None and pvalue <= alpha
        low, high = comparison.difference.low, comparison.difference.high
        assert low is not None and high is not None
        self.low += high < 0.0  # the interval wholly below the true difference 0
        self.high += low > 0.0

    def row(self) -> str:
        size = self.rejected / self.n
        coverage = 1.0 - (self.low + self.high) / self.n
        return (
            f"{size:>6.4f} ({math.sqrt(size * (1 - size) / self.n):.4f}) "
            f"{coverage:>6.4f} ({math.sqrt(coverage * (1 - coverage) / self.n):.4f}) {self.low:>3}/{self.high:<3}"
        )


def main() -> None:
    """Print size and coverage of the task-level and story-level analyses per heterogeneity level."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--datasets", type=int, default=1000, help="simulated datasets per heterogeneity level")
    parser.add_argument("--stories", type=int, default=12)
    parser.add_argument("--horizons", type=int, default=3, help="tasks per story (the story at each horizon)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per task and condition")
    parser.add_argument(
        "--taus", default="0,0.5,1,2", help="SDs of the story x condition interaction (logit), comma-separated"
    )
    parser.add_argument("--base-rate", type=float, default=0.5)
    parser.add_argument("--horizon-step", type=float, default=-0.5, help="logit shift per horizon step")
    parser.add_argument("--story-sd", type=float, default=1.0)
    parser.add_argument("--task-sd", type=float, default=0.5)
    parser.add_argument("--task-interaction-sd", type=float, default=0.5)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    for name in ("datasets", "stories", "horizons", "repeats", "resamples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: give 1 or more")
    if not 0.0 < args.base_rate < 1.0:
        parser.error(f"--base-rate {args.base_rate}: give a rate strictly between 0 and 1")
    taus = [float(t) for t in args.taus.split(",")]
    if any(t < 0 for t in taus):
        parser.error(f"--taus {args.taus}: give SDs of 0 or more")

    print("command: " + shlex.join([sys.executable.rsplit("/", 1)[-1], *sys.argv]))
    print(f"machine: {platform.platform()} | python {platform.python_version()}")
    print(
        f"design: {args.stories} stories x {args.horizons} horizons = {args.stories * args.horizons} tasks, "
        f"{args.repeats} repeats per task and condition; null (true mean difference 0); base rate "
        f"{args.base_rate}, horizon step {args.horizon_step:+}, story sd {args.story_sd}, task sd {args.task_sd}, "
        f"task x condition sd {args.task_interaction_sd} (logit)"
    )
    print(
        f"{args.datasets} datasets per row, {args.resamples} bootstrap resamples per interval, seed {args.seed}; "
        f"size: rejection rate at alpha {args.alpha} (nominal {args.alpha}); coverage of the {CONFIDENCE:.0%} "
        f"interval of the difference (nominal {CONFIDENCE}); (Monte-Carlo se); low/high: misses on each side"
    )
    columns = f"{'size':>15} {'coverage':>15} {'low/high':>7}"
    header = f"{'tau':>4} | {columns} | {columns}"
    print(f"{'':>4} | {'task-level (clusters=None)':<39} | {'story-level (clusters=story)':<39}")
    print(header)
    print("-" * len(header))
    layout = Layout(args.stories, args.horizons, args.repeats)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    for tau in taus:
        a, b = simulate(args, tau, rng)
        tallies = {False: Tally(), True: Tally()}
        for index in range(args.datasets):
            params = AnalysisParams(resamples=args.resamples, seed=index)
            for by_story, tally in tallies.items():
                comparison = paired_comparison(
                    layout.sample(a[index], by_story), layout.sample(b[index], by_story), params
                )
                tally.add(comparison, args.alpha)
        print(f"{tau:>4.1f} | {tallies[False].row()} | {tallies[True].row()}", flush=True)
    print(
        f"{len(taus)} rows in {time.perf_counter() - start:.0f} s (elapsed). A comparison with no discordant unit "
        "is not testable and counts as not rejected."
    )


if __name__ == "__main__":
    main()
