"""Real run directories for the report, verify and attribution tests, built once per test session.

Each builder runs a small matrix against the scripted HTTP server (deterministic policies) with the real runner
(which writes the report files), under one session-wide temporary results folder. Tests must not
modify these directories: copy one (`copy_run`) before tampering with it.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

from contextdelta.rundir.layout import RunDirectory
from contextdelta.rundir.records import EpisodeRecord
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.testing import serve_scripted

TASKS = Path(__file__).resolve().parents[2] / "tasks"
STRATEGIES = ["full_history", "last_n", "semantic_summary", "typed_state_digest"]
MODES = ["unprotected", "freshness_contract"]
TRUST_TASKS = ["cfg-rate-limit-double", "order-desk-cancel", "order-grinder-refund"]
UNSAFE_TASKS = ["cal-assistant-scope", "cal-onsite-loop", "order-address-after-ship"]


@functools.cache
def results_dir() -> Path:
    """The session's results folder (removed at exit)."""
    path = Path(tempfile.mkdtemp(prefix="contextdelta-report-tests-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def _run(policy: str, task_ids: list[str], prompt_cache: str = "off", **options: object) -> Path:
    fields: dict[str, object] = {
        "tasks_dir": TASKS,
        "model": f"scripted-{policy}",
        "results_dir": results_dir(),
        "task_ids": task_ids,
        "strategies": STRATEGIES,
        "protection_modes": MODES,
        "repeats": 1,
        "concurrency": 4,
    }
    fields.update(options)
    with serve_scripted(policy, TASKS, in_process=True, prompt_cache=prompt_cache) as url:
        fields["base_url"] = url
        outcome = run_benchmark(BenchmarkRequest.model_validate(fields))
    return outcome.path


CACHED_PRICES = {
    "scripted-context_trusting": {
        "input_per_mtok": 2.0,
        "output_per_mtok": 8.0,
        "cached_input_per_mtok": 0.5,
        "cache_write_per_mtok": 2.5,
    }
}
"""The cached run's price table: cache reads at a quarter of the input rate, writes at 1.25 times it."""


@functools.cache
def cached_run() -> Path:
    """context_trusting on the trusting tasks, full_history, last_n and typed_state_digest, unprotected, one request
    at a time, against a server that simulates a prompt cache (reads and writes reported) and priced with cache
    rates (9 episodes)."""
    prices = results_dir() / "cached-prices.json"
    prices.write_text(json.dumps(CACHED_PRICES))
    return _run(
        "context_trusting",
        TRUST_TASKS,
        prompt_cache="reads_and_writes",
        strategies=["full_history", "last_n", "typed_state_digest"],
        protection_modes=["unprotected"],
        concurrency=1,
        price_table=prices,
    )


HORIZON_TASKS = Path(__file__).resolve().parents[2] / "tasks" / "horizon"
SUPERSEDED_FAMILY = "order-address-shipped"
"""A superseded_observation family: the listing that shows the order changed is the observation its horizon counts
from."""


def family_tasks(family: str, per_horizon: int) -> list[str]:
    """The first ``per_horizon`` task ids (sorted) of each horizon of ``family`` in the checked-in horizon suite."""
    by_horizon: dict[str, list[str]] = {}
    for path in sorted(HORIZON_TASKS.rglob(f"{family}-h*.yaml")):
        horizon = path.stem[len(family) + 2 :].split("-")[0]
        by_horizon.setdefault(horizon, []).append(path.stem)
    return [task for ids in by_horizon.values() for task in ids[:per_horizon]]


@functools.cache
def horizon_run() -> Path:
    """context_trusting on 4 tasks per horizon (1, 2, 4, 8, 16) of the superseded_observation family
    order-address-shipped, full_history and last_n (n = 3), both modes, 1 repeat (80 episodes): under last_n the
    listing that shows the change leaves the window once the horizon exceeds 3."""
    tasks = family_tasks(SUPERSEDED_FAMILY, 4)
    with serve_scripted("context_trusting", HORIZON_TASKS, in_process=True) as url:
        request = {
            "tasks_dir": HORIZON_TASKS,
            "model": "scripted-context_trusting",
            "results_dir": results_dir(),
            "task_ids": tasks,
            "strategies": ["full_history", "last_n"],
            "protection_modes": MODES,
            "repeats": 1,
            "concurrency": 4,
            "base_url": url,
        }
        return run_benchmark(BenchmarkRequest.model_validate(request)).path


@functools.cache
def trusting_run() -> Path:
    """context_trusting on 3 tasks, every strategy and mode, 2 repeats (48 episodes): stale actions under
    full_history (never_refreshed) and end-state misses."""
    return _run("context_trusting", TRUST_TASKS, repeats=2)


@functools.cache
def unsafe_run() -> Path:
    """unsafe on 3 tasks, every strategy and mode (24 episodes): duplicates, superseded views, forbidden calls."""
    return _run("unsafe", UNSAFE_TASKS)


@functools.cache
def oracle_pair_run() -> Path:
    """oracle on the trusting run's tasks, full_history and last_n, unprotected, 2 repeats (12 episodes, all pass)."""
    return _run(
        "oracle", TRUST_TASKS, strategies=["full_history", "last_n"], protection_modes=["unprotected"], repeats=2
    )


@functools.cache
def single_task_run() -> Path:
    """oracle on one task (4 episodes, all pass): the one-task, all-pass degenerate case."""
    return _run("oracle", ["cfg-search-ramp"], strategies=["full_history", "typed_state_digest"])


@functools.cache
def max_steps_run() -> Path:
    """oracle with a 2-step limit on a 4-step task (1 episode that ends at the step limit)."""
    return _run(
        "oracle", ["order-desk-cancel"], strategies=["full_history"], protection_modes=["unprotected"], max_steps=2
    )


@functools.cache
def shard_run() -> Path:
    """oracle on the trusting tasks, full_history and last_n, unprotected, shard 1/2 of the plan (3 of its 6
    episodes): a complete run directory that holds part of a plan."""
    return _run(
        "oracle", TRUST_TASKS, strategies=["full_history", "last_n"], protection_modes=["unprotected"], shard="1/2"
    )


@functools.cache
def incomplete_run() -> Path:
    """oracle with a price and a budget that one episode exhausts: status incomplete, 1 of 3 episodes."""
    prices = results_dir() / "prices.json"
    prices.write_text(json.dumps({"scripted-oracle": {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}))
    return _run(
        "oracle",
        TRUST_TASKS,
        strategies=["full_history"],
        protection_modes=["unprotected"],
        concurrency=1,
        price_table=prices,
        max_cost_usd=0.001,
    )


def records(path: Path) -> dict[str, EpisodeRecord]:
    """The episodes of a run directory by run id."""
    return {r.run_id: r for r in RunDirectory(path).read_episodes()}


def copy_run(path: Path, into: Path) -> Path:
    """A copy of a run directory under ``into`` (same name), safe to tamper with."""
    target = into / path.name
    shutil.copytree(path, target)
    return target


def _context_length_run(fail: str, protection_modes: list[str], repeats: int, concurrency: int) -> Path:
    """context_trusting on the trusting run's tasks, full_history and last_n, against a server that refuses the
    requests ``fail`` names (the scripted server's ``fail_context_length``) as too long for the context window."""
    fields: dict[str, object] = {
        "tasks_dir": TASKS,
        "model": "scripted-context_trusting",
        "results_dir": results_dir(),
        "task_ids": TRUST_TASKS,
        "strategies": ["full_history", "last_n"],
        "protection_modes": protection_modes,
        "repeats": repeats,
        "concurrency": concurrency,
    }
    with serve_scripted("context_trusting", TASKS, in_process=True, fail_context_length=fail) as url:
        fields["base_url"] = url
        return run_benchmark(BenchmarkRequest.model_validate(fields)).path


@functools.cache
def faulted_run() -> Path:
    """context_trusting on 3 tasks, full_history and last_n, both modes, 2 repeats, one request at a time, with the
    server refusing every 19th request as too long for the context window (24 episodes, some failed trials)."""
    return _context_length_run("every:19", MODES, repeats=2, concurrency=1)


@functools.cache
def unsafe_controls_run() -> Path:
    """unsafe on 3 tasks, full_history and last_n, unprotected, with the no_mutation control (12 episodes): the
    control episodes fail too (duplicates, forbidden calls), apart from the main matrix."""
    return _run(
        "unsafe",
        UNSAFE_TASKS,
        strategies=["full_history", "last_n"],
        protection_modes=["unprotected"],
        controls=["no_mutation"],
    )


@functools.cache
def failed_pair_run() -> Path:
    """context_trusting on the trusting run's tasks, full_history and last_n, unprotected, with the server answering
    every request context_length_exceeded (6 episodes, every one a failed trial: no safety verdict anywhere)."""
    return _context_length_run("all", ["unprotected"], repeats=1, concurrency=2)
