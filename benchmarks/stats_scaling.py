"""How the report statistics scale with the number of episodes.

Builds synthetic per-episode tables shaped like ``task_results.csv`` (tasks x 4 strategies x 2 protection modes
x 3 repeats) for 576, 5,760 and 57,600 episodes, computes every statistic SPEC section 10 asks for with
10,000 resamples, and prints wall time, growth factor and peak memory per size. Each size runs in a fresh
subprocess so that its peak RSS is its own. Prints figures only; asserts nothing about timings.

    .venv/bin/python benchmarks/stats_scaling.py [--tasks 24 240 2400] [--resamples 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy

from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    PairedSample,
    bootstrap_differences,
    bootstrap_means,
    bootstrap_relative_reductions,
    holm_family,
    mcnemar_exact,
    pair_by_task_repeat,
    pass_hat_k_many,
    split_by_condition,
)

STRATEGIES = ("full_history", "last_n", "semantic_summary", "typed_state_digest")
MODES = ("unprotected", "freshness_contract")
REPEATS = 3

# Realistic-looking effects: reduction costs success and raises stale actions; the contract blocks most harm.
_SUCCESS_SHIFT = {"full_history": 0.0, "last_n": -0.9, "semantic_summary": -0.6, "typed_state_digest": -0.2}
_STALE_BASE = {"full_history": 0.05, "last_n": 0.35, "semantic_summary": 0.25, "typed_state_digest": 0.10}
_TOKENS = {"full_history": 9000.0, "last_n": 3500.0, "semantic_summary": 4500.0, "typed_state_digest": 4000.0}


def make_table(n_tasks: int, seed: int = 7) -> dict[str, npt.NDArray[Any]]:
    """A synthetic episode table: one entry per (task, strategy, mode, repeat), as parallel arrays."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(1.0, 1.2, n_tasks)  # task logit of success under full_history
    rows = [(t, s, m, r) for t in range(n_tasks) for s in STRATEGIES for m in MODES for r in range(REPEATS)]
    task = np.array([f"task-{t:05d}" for t, _, _, _ in rows])
    strategy = np.array([s for _, s, _, _ in rows])
    mode = np.array([m for _, _, m, _ in rows])
    repeat = np.array([r for _, _, _, r in rows], dtype=np.int64)
    task_index = np.array([t for t, _, _, _ in rows])
    protected = mode == "freshness_contract"
    logit = difficulty[task_index] + np.vectorize(_SUCCESS_SHIFT.get)(strategy) + 0.4 * protected
    success = rng.random(len(rows)) < 1.0 / (1.0 + np.exp(-logit))
    stale_p = np.vectorize(_STALE_BASE.get)(strategy)
    stale_count = rng.binomial(2, stale_p)
    # Under the contract a stale write is blocked before it reaches the business logic: rarely harmful.
    harmful = (stale_count > 0) & (~protected | (rng.random(len(rows)) < 0.05))
    tokens = rng.gamma(8.0, np.vectorize(_TOKENS.get)(strategy) / 8.0).round()
    return {
        "task_id": task,
        "strategy": strategy,
        "protection_mode": mode,
        "repeat": repeat,
        "success": success,
        "stale_action_count": stale_count,
        "harmful": harmful,
        "tokens": tokens,
    }


def full_report(table: dict[str, npt.NDArray[Any]], params: AnalysisParams) -> dict[str, int]:
    """Every statistic of SPEC section 10 for one table; returns how many of each were computed."""
    conditions: list[Hashable] = list(zip(table["strategy"].tolist(), table["protection_mode"].tolist(), strict=True))
    metrics = {
        "success": table["success"].astype(np.float64),
        "stale": (table["stale_action_count"] > 0).astype(np.float64),
        "harmful": table["harmful"].astype(np.float64),
        "tokens": table["tokens"],
    }
    by_metric = {
        name: split_by_condition(conditions, table["task_id"], table["repeat"], values)
        for name, values in metrics.items()
    }
    rate_samples: dict[tuple[str, Hashable], ClusteredSample] = {
        (name, condition): sample
        for name in ("success", "stale", "harmful")
        for condition, sample in by_metric[name].items()
    }
    rates = bootstrap_means(rate_samples, params)
    pass_k = pass_hat_k_many(by_metric["success"], ks=[1, 2, 3], params=params)

    families: dict[str, dict[str, tuple[str, tuple[str, str], tuple[str, str]]]] = {
        "RQ1": {
            f"{s} vs full_history ({m})": ("success", (s, m), ("full_history", m))
            for m in MODES
            for s in STRATEGIES[1:]
        },
        "RQ2": {
            f"typed_state_digest vs semantic_summary ({m})": (
                "success",
                ("typed_state_digest", m),
                ("semantic_summary", m),
            )
            for m in MODES
        },
        "RQ3": {
            f"freshness_contract vs unprotected ({s})": ("harmful", (s, "freshness_contract"), (s, "unprotected"))
            for s in STRATEGIES
        },
    }
    pairs: dict[str, PairedSample] = {}
    tests = {}
    for family, comparisons in families.items():
        for name, (metric, a, b) in comparisons.items():
            pairs[name] = pair_by_task_repeat(by_metric[metric][a], by_metric[metric][b])
        tests[family] = holm_family({name: mcnemar_exact(pairs[name]) for name in comparisons})
    differences = bootstrap_differences(pairs, params)
    token_pairs = {
        (s, m): pair_by_task_repeat(by_metric["tokens"][(s, m)], by_metric["tokens"][("full_history", m)])
        for m in MODES
        for s in STRATEGIES[1:]
    }
    reductions = bootstrap_relative_reductions(token_pairs, params)
    return {
        "rates": len(rates),
        "pass_k": sum(len(v) for v in pass_k.values()),
        "mcnemar": sum(len(v) for v in tests.values()),
        "differences": len(differences),
        "token_reductions": len(reductions),
    }


def _measure(n_tasks: int, resamples: int, runs: int) -> dict[str, Any]:
    """Time the full report on one size (best of ``runs``), in this process."""
    table = make_table(n_tasks)
    params = AnalysisParams(resamples=resamples, seed=0)
    times = []
    counts: dict[str, int] = {}
    for _ in range(runs):
        start = time.perf_counter()
        counts = full_report(table, params)
        times.append(time.perf_counter() - start)
    return {
        "episodes": int(table["task_id"].size),
        "tasks": n_tasks,
        "best_s": min(times),
        "median_s": float(np.median(times)),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "counts": counts,
    }


def main() -> None:
    """Run every size in a fresh subprocess and print a table of figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, nargs="+", default=[24, 240, 2400])
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per size; the best is reported")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_measure(args.child, args.resamples, args.runs)))
        return

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {platform.platform()} | {platform.machine()} | python {platform.python_version()}")
    print(f"cpus: os.cpu_count()={os.cpu_count()} usable={affinity} | numpy {np.__version__} scipy {scipy.__version__}")
    print(f"resamples={args.resamples}, best of {args.runs} runs per size, each size in a fresh process")
    print()
    header = "   episodes  tasks   best s  median s  growth  x episodes  peak MiB"
    print(header)
    print("-" * len(header))
    previous: dict[str, Any] | None = None
    for n_tasks in args.tasks:
        command = [sys.executable, __file__, "--child", str(n_tasks), "--resamples", str(args.resamples)]
        done = subprocess.run([*command, "--runs", str(args.runs)], check=True, capture_output=True, text=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        growth, scale = "-", "-"
        if previous is not None:
            growth = f"{figures['best_s'] / previous['best_s']:.1f}x"
            scale = f"{figures['episodes'] / previous['episodes']:.0f}x"
        print(
            f"{figures['episodes']:>9} {figures['tasks']:>6} {figures['best_s']:>8.3f} {figures['median_s']:>9.3f}"
            f" {growth:>7} {scale:>11} {figures['peak_rss_mib']:>9.0f}"
        )
        previous = figures
    if previous is not None:
        print()
        print("statistics per report:", ", ".join(f"{k}={v}" for k, v in previous["counts"].items()))


if __name__ == "__main__":
    main()
