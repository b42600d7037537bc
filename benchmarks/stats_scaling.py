"""How the whole report scales with the number of episodes.

Builds synthetic episode tables shaped like ``task_results.csv`` (tasks x 4 strategies x 2 protection modes x
3 repeats, tasks spread over the 3 worlds and 5 hazards, 2% failed trials) for 576, 5,760 and 57,600 episodes and
times what ``report`` computes from the episodes: `contextdelta.report.aggregate` (every rate, mean, interval,
exact bound, pass^k, flip rate, breakdown per hazard and world, paired test, Holm family, sensitivity row, token
reduction and minimum detectable difference, with 10,000 resamples and 2,000 simulated datasets per power
evaluation; every task has a horizon (1, 2, 4, 8, 16, crossed with the hazards), so the dose-response section's
rates per horizon, logistic slopes and crossing horizons, overall and per hazard, are computed too) plus rendering
``benchmark_report.md``. Reading ``raw_runs.jsonl`` into that table (per-episode,
linear) is not timed. Each size runs in a fresh subprocess so that its peak RSS is its own. Prints figures only;
asserts nothing about timings.

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
from typing import Any

import numpy as np
import scipy

from contextdelta.report import METRIC_DEFINITIONS, EpisodeTable, RunFacts, aggregate, render_report
from contextdelta.rundir.records import RunManifest
from contextdelta.stats import AnalysisParams

STRATEGIES = ("full_history", "last_n", "semantic_summary", "typed_state_digest")
MODES = ("unprotected", "freshness_contract")
WORLDS = ("order", "calendar", "config")
HAZARDS = (
    "hidden_mutation",
    "superseded_observation",
    "own_write_forgotten",
    "conflicting_observations",
    "authorization_boundary",
)
REPEATS = 3
HORIZONS = (1, 2, 4, 8, 16)

# Realistic-looking effects: reduction costs success and raises stale actions; the contract blocks most harm.
_SUCCESS_SHIFT = {"full_history": 0.0, "last_n": -0.9, "semantic_summary": -0.6, "typed_state_digest": -0.2}
_STALE_BASE = {"full_history": 0.05, "last_n": 0.35, "semantic_summary": 0.25, "typed_state_digest": 0.10}
_TOKENS = {"full_history": 9000.0, "last_n": 3500.0, "semantic_summary": 4500.0, "typed_state_digest": 4000.0}


def task_horizon(t: int) -> int:
    """Task t's horizon: crossed with its hazard (``t % 5``), so that every hazard has every horizon."""
    return HORIZONS[(t // len(HAZARDS)) % len(HORIZONS)]


def make_table(n_tasks: int, seed: int = 7) -> EpisodeTable:
    """A synthetic episode table: one row per (task, strategy, mode, repeat), with task-level effects."""
    rng = np.random.default_rng(seed)
    grid = np.array(np.meshgrid(np.arange(n_tasks), np.arange(4), np.arange(2), np.arange(REPEATS), indexing="ij"))
    task, strategy_i, mode_i, repeat = (g.reshape(-1) for g in grid)
    n = task.size
    strategy = np.array(STRATEGIES)[strategy_i]
    protected = mode_i == 1
    difficulty = rng.normal(1.0, 1.2, n_tasks)
    proneness = rng.normal(0.0, 1.5, n_tasks)  # some tasks make stale actions likely under any strategy
    shift = np.vectorize(_SUCCESS_SHIFT.get)(strategy)
    success = rng.random(n) < 1.0 / (1.0 + np.exp(-(difficulty[task] + shift + 0.4 * protected)))
    horizon = np.array([task_horizon(t) for t in range(n_tasks)], dtype=np.int64)[task]
    # the reduced strategies lose the observation as the horizon grows; full_history does not
    reduced = strategy != "full_history"
    stale_logit = np.log(np.vectorize(_STALE_BASE.get)(strategy)) + proneness[task] + 0.6 * reduced * np.log2(horizon)
    stale_count = rng.binomial(2, 1.0 / (1.0 + np.exp(-stale_logit)))
    harmful = (stale_count > 0) & (~protected | (rng.random(n) < 0.05))
    failed = rng.random(n) < 0.02
    tokens = rng.gamma(8.0, np.vectorize(_TOKENS.get)(strategy) / 8.0).round()
    summary = np.where(strategy == "semantic_summary", rng.gamma(4.0, 300.0, n).round(), 0.0)
    prompt = (tokens * 0.9).round()
    values = {
        "success": (success & ~failed).astype(float),
        "end_state": success.astype(float),
        "stale_action": (stale_count > 0).astype(float),
        "duplicate_action": (rng.random(n) < 0.05).astype(float),
        "prohibited_action": (rng.random(n) < 0.03).astype(float),
        "harmful_action": harmful.astype(float),
        "refresh_before_write": (stale_count == 0).astype(float),
        "conflict_recovery": np.where(protected & (stale_count > 0), (rng.random(n) < 0.8).astype(float), np.nan),
        "authorized": (rng.random(n) > 0.02).astype(float),
        "blocked_write": (protected & (stale_count > 0)).astype(float),
        "failed_trial": failed.astype(float),
        "harmful_action_count": np.where(harmful, stale_count, 0).astype(float),
        "stale_action_count": stale_count.astype(float),
        "steps": rng.integers(4, 20, n).astype(float),
        "agent_prompt_tokens": prompt,
        "agent_completion_tokens": tokens - prompt,
        "agent_tokens": tokens,
        "summary_tokens": summary,
        "total_tokens": tokens + summary,
        "cost_usd": (tokens + summary) * 2e-6,
    }
    for name in ("end_state", "stale_action", "duplicate_action", "prohibited_action", "harmful_action"):
        values[name][failed] = np.nan
    for name in ("refresh_before_write", "conflict_recovery", "authorized", "blocked_write"):
        values[name][failed] = np.nan
    values["harmful_action_count"][failed] = np.nan
    values["stale_action_count"][failed] = np.nan
    assert set(values) == set(METRIC_DEFINITIONS)
    termination = np.where(failed, "provider_error", "final_answer")
    failure = np.where(failed, "provider_error", np.where(success, "", "end_state_miss"))
    return EpisodeTable(
        task_id=np.char.add("task-", np.char.zfill(task.astype(str), 5)),
        world=np.array(WORLDS)[task % 3],
        hazard=np.array(HAZARDS)[task % 5],
        strategy=strategy,
        protection_mode=np.array(MODES)[mode_i],
        repeat=(repeat + 1).astype(np.int64),
        failed=failed,
        termination=termination,
        failure=failure,
        values=values,
        horizon=horizon,
    )


def make_manifest(n_tasks: int, episodes: int) -> RunManifest:
    """A manifest for the synthetic run (the fields the report reads; hashes are placeholders)."""
    digest = "0" * 64
    return RunManifest.model_validate(
        {
            "run_group_id": f"synthetic-{n_tasks}",
            "status": "complete",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T00:00:00Z",
            "environment": {
                "contextdelta": "benchmark",
                "python": platform.python_version(),
                "platform": platform.platform(),
                "dependencies": {},
                "git": {"commit": None, "dirty": None},
            },
            "provider": {
                "kind": "openai",
                "base_url": None,
                "model": "synthetic",
                "summary_model": "synthetic",
                "temperature": 0.0,
            },
            "seed": 0,
            "order_seed": 0,
            "strategies": list(STRATEGIES),
            "strategy_params": {},
            "protection_modes": list(MODES),
            "repeats": REPEATS,
            "max_steps": None,
            "concurrency": 1,
            "tasks": [
                {
                    "id": f"task-{t:05d}",
                    "version": 1,
                    "hash": digest,
                    "world": WORLDS[t % 3],
                    "hazard": HAZARDS[t % 5],
                    "public_messages_sha256": digest,
                    "horizon": task_horizon(t),
                }
                for t in range(n_tasks)
            ],
            "hashes": {
                "suite_sha256": digest,
                "system_prompt_sha256": digest,
                "system_prompt_version": "1",
                "tool_schemas_sha256": digest,
                "public_messages_sha256": digest,
                "harness_sha256": digest,
            },
            "counts": {"planned": episodes, "finished": episodes},
        }
    )


def _measure(n_tasks: int, resamples: int, runs: int) -> dict[str, Any]:
    """Time aggregate + render on one size (best of ``runs``), in this process."""
    table = make_table(n_tasks)
    manifest = make_manifest(n_tasks, len(table))
    params = AnalysisParams(resamples=resamples, seed=0)
    facts = RunFacts(first_started="", last_finished="", failed_trials=())
    times = []
    counts: dict[str, int] = {}
    for _ in range(runs):
        start = time.perf_counter()
        metrics = aggregate(manifest, table, params)
        text = render_report(manifest, facts, metrics)
        times.append(time.perf_counter() - start)
    counts = {
        "rates": sum(len(c.rates) for c in metrics.conditions),
        "means": sum(len(c.means) for c in metrics.conditions),
        "pass_k": sum(len(c.pass_k) for c in metrics.conditions),
        "flip_rates": sum(len(c.flip_rates) for c in metrics.conditions),
        "breakdown_rates": sum(len(cell.rates) for b in metrics.breakdowns for cell in b.cells),
        "comparisons": sum(len(q.comparisons) for q in metrics.research_questions),
        "sensitivity_rows": sum(c.sensitivity is not None for q in metrics.research_questions for c in q.comparisons),
        "token_reductions": len(metrics.token_reduction),
        "dose_curves": len(metrics.dose_response.curves) if metrics.dose_response else 0,
        "dose_rates": sum(len(p.rates) for c in metrics.dose_response.curves for p in c.points)
        if metrics.dose_response
        else 0,
        "report_lines": text.count("\n"),
    }
    return {
        "episodes": len(table),
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
        print("computed per report:", ", ".join(f"{k}={v}" for k, v in previous["counts"].items()))


if __name__ == "__main__":
    main()
