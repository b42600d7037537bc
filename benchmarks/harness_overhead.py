"""Harness overhead of ``contextdelta run-benchmark``, measured the way a user pays it.

Every configuration runs the real command as a subprocess (``python -m contextdelta run-benchmark ... --quiet``,
trace store on, as a user runs it) against the scripted server (its own subprocess) over loopback HTTP, and
again as a one-episode run of the same configuration, so start-up (imports, task loading and checks, the endpoint
check, workers or Ray starting, the reports at the end) is measured apart from the cost per model call:

- ``ratio``: the ideal latency-bound wall time (model calls x latency / concurrency) over the measured wall time
  of the run (first request at the server to the command's exit), and over the whole command (start-up included);
  ``finish s`` is the part of the run after the last request the server saw (its reply, the last records, the
  reports, the seal);
- ``bound``: the ratio a harness with no overhead at all would reach on the same run (its episodes started in
  the plan's order, each as soon as a slot is free, each taking its recorded model calls x latency): episodes are
  sequences of calls, so the last ones run with slots idle; ``of bound`` is ``ratio run`` over it, the part of the
  shortfall that is the harness's;
- ``CPU/call``: process-tree CPU (the command and its worker processes) of the full run minus that of the
  one-episode run, over the difference in model calls; Ray actors run in the cluster's processes, outside the
  command's tree, so Ray rows show the driver's CPU only;
- ``srv ms/req``: the scripted server's own CPU per chat request during the run (it shares the cores), and
  ``cores``: the command's process-tree CPU plus the server's, over the command's wall time (2.0 is every core of
  a 2-core machine busy for the whole command; Ray rows leave out the cluster's processes, as ``CPU/call`` does);
- ``latency`` and ``queue``: median and p95 of what the run recorded per model call, its time on the wire and its
  wait before the request went out (from ``raw_runs.jsonl``);
- ``user ms/call`` (the ``--cost`` pass, concurrency 1, latency 0): (command wall - time the server spent
  answering) of the full run minus the same of the one-episode run, over the difference in model calls: what a
  user waits for the harness per call, start-up apart. One pass swings by a third within minutes on shared cores,
  so the pass runs ``--cost-passes`` times (3 by default) and prints the median with the smallest and largest.

    python benchmarks/harness_overhead.py                      # latency 200 ms, concurrency 32 and 128:
                                                               # local 1 process, --workers 2, Ray; then --cost
    python benchmarks/harness_overhead.py --executors local:1 --concurrency 32 --repeats 3
    python benchmarks/harness_overhead.py --executors local:1 --concurrency 128 --repeats 1 --no-cost --no-store

Targets (issue 15): ratio 0.95 at 32 and 0.90 at 128 on 2 cores, at most 1.5 ms harness per call. Prints figures
only; run it on a quiet machine (it prints the load average before and after).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contextdelta.rundir import RunDirectory  # noqa: E402
from contextdelta.runner.plan import manifest_episodes  # noqa: E402
from contextdelta.testing import fetch_stats, serve_scripted  # noqa: E402

SMALL = ["--task-ids", "order-grinder-refund", "--strategies", "full_history", "--protection-modes", "unprotected"]


@dataclass(frozen=True)
class Measured:
    wall_s: float
    startup_s: float
    finish_s: float
    """From the last request the server saw to the command's exit: the last replies, the reports, the seal."""
    cpu_s: float
    calls: int
    busy_s: float
    episodes_line: str
    latency_ms: tuple[float, float]
    """Median and p95 of the recorded provider latency (time on the wire) over every model call."""
    queue_ms: tuple[float, float]
    """Median and p95 of the recorded wait before a request went out."""
    server_cpu_s: float
    """CPU time the scripted server spent while the command ran: it shares the machine's cores with the harness."""
    run_dir: Path


def run_command(args: list[str], latency_ms: int, results: Path) -> Measured:
    """Run one ``run-benchmark`` command to completion against a fresh scripted server; its wall, start-up,
    process-tree CPU and model calls."""
    with serve_scripted("oracle", ROOT / "tasks", latency_ms=latency_ms) as url:
        return _measure(args, url, results)


def _measure(args: list[str], url: str, results: Path) -> Measured:
    command = [sys.executable, "-m", "contextdelta", "run-benchmark", "--base-url", url, "--model", "scripted-oracle"]
    command += ["--tasks", str(ROOT / "tasks"), "--results-dir", str(results), "--quiet", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    server_cpu = fetch_stats(url)["process_cpu_s"]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(process.pid, 0)  # rusage of the command and every process it waited for
    ended = time.monotonic()
    wall = ended - started
    process.returncode = os.waitstatus_to_exitcode(status)
    out, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"run-benchmark failed ({process.returncode}):\n{err[-3000:]}")
    served = fetch_stats(url)
    first = served["first_arrival_monotonic"] or started  # the server's monotonic clock is this machine's
    lines = [line for line in err.splitlines() if "episodes" in line]
    latency, queue = recorded_waits(Path(out.strip().splitlines()[-1]))
    return Measured(
        wall_s=wall,
        startup_s=max(0.0, first - started),
        finish_s=max(0.0, ended - (served["last_arrival_monotonic"] or ended)),
        cpu_s=usage.ru_utime + usage.ru_stime,
        calls=served["requests"],
        busy_s=served["busy_s"],
        episodes_line=lines[-1].strip() if lines else out.strip(),
        latency_ms=latency,
        queue_ms=queue,
        server_cpu_s=served["process_cpu_s"] - server_cpu,
        run_dir=Path(out.strip().splitlines()[-1]),
    )


def recorded_waits(run_dir: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    """(median, p95) in ms of every step's recorded ``latency_s`` and ``queue_s`` in a run directory."""
    latency: list[float] = []
    queue: list[float] = []
    with (run_dir / "raw_runs.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            for step in json.loads(line)["trace"]["steps"]:
                response = step.get("response") or {}
                if response.get("latency_s") is not None:
                    latency.append(1000 * response["latency_s"])
                    queue.append(1000 * (response.get("queue_s") or 0.0))

    def summary(values: list[float]) -> tuple[float, float]:
        ordered = sorted(values) or [math.nan]
        return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]

    return summary(latency), summary(queue)


def schedule_bound(run_dir: Path, concurrency: int, latency_s: float) -> float:
    """The ratio a harness with no overhead at all would reach on this run: its episodes started in the plan's
    order (the seeded shuffle), each as soon as one of ``concurrency`` slots is free, each taking its recorded
    model calls x ``latency_s``. Below 1 because episodes are sequences of calls: the last ones run with slots
    idle (a packing bound, not a harness cost)."""
    calls: dict[str, int] = {}
    with (run_dir / "raw_runs.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            totals = record["trace"]["totals"]
            calls[record["run_id"]] = totals["agent_calls"] + totals["summary_calls"]
    _, started = manifest_episodes(RunDirectory(run_dir).read_manifest())
    slots = [0.0] * concurrency
    for spec in started:
        heapq.heapreplace(slots, slots[0] + calls[spec.run_id] * latency_s)
    return sum(calls.values()) * latency_s / concurrency / max(slots)


def executor_args(name: str) -> tuple[str, list[str]]:
    kind, _, workers = name.partition(":")
    if kind == "ray":
        label = "Ray (local cluster" + (f", {workers} actors)" if workers else ")")
        return label, ["--executor", "ray", *(["--workers", workers] if workers else [])]
    count = workers or "1"
    return ("local, 1 process" if count == "1" else f"local, --workers {count}"), ["--workers", count]


def spread(values: list[float]) -> str:
    """``median [min, max]`` of ``values`` (the median alone for one value)."""
    median = f"{statistics.median(values):.2f}"
    return median if len(values) == 1 else f"{median} [{min(values):.2f}, {max(values):.2f}]"


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--concurrency", default="32,128", help="Comma-separated concurrency levels.")
    parser.add_argument("--executors", default="local:1,local:2,ray", help="local:N (workers), ray[:N], or none.")
    parser.add_argument("--repeats", type=int, default=3, help="Repeats of the full default matrix.")
    parser.add_argument("--cost", action=argparse.BooleanOptionalAction, default=True, help="The user-view pass.")
    parser.add_argument(
        "--cost-passes", type=int, default=3, help="Passes of the user-view measurement (median, min and max)."
    )
    parser.add_argument(
        "--store",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-store: the runs without the trace store.",
    )
    args = parser.parse_args()
    if args.cost_passes < 1:
        parser.error(f"--cost-passes {args.cost_passes}: give 1 or more (or --no-cost to skip the pass)")
    levels = [int(c) for c in args.concurrency.split(",") if c]
    print(f"machine: {platform.platform()} | cpus={os.cpu_count()} | python {platform.python_version()}")
    print(f"load average before: {load()}")
    print(
        f"matrix: every task x every default strategy x 2 modes x {args.repeats} repeats; scripted server (oracle), "
        f"latency {args.latency_ms} ms; trace store {'on (SQLite)' if args.store else 'off (--no-store)'}"
    )
    header = (
        f"{'executor':<28} {'conc':>4} {'calls':>6} {'start-up s':>10} {'run s':>7} {'finish s':>8} {'ideal s':>7} "
        f"{'ratio run':>9} {'ratio cmd':>9} {'bound':>5} {'of bound':>8} {'CPU/call ms':>11} {'srv ms/req':>10} "
        f"{'cores':>5} {'latency ms med/p95':>18} {'queue ms med/p95':>16}"
    )
    print(header)
    for name in [n for n in args.executors.split(",") if n and n != "none"]:  # none: the cost pass only
        label, extra = executor_args(name)
        for level in levels:
            with tempfile.TemporaryDirectory() as results:
                base = [*extra, "--concurrency", str(level), *([] if args.store else ["--no-store"])]
                small = run_command([*base, *SMALL, "--repeats", "1"], args.latency_ms, Path(results))
                full = run_command([*base, "--repeats", str(args.repeats)], args.latency_ms, Path(results))
                bound = schedule_bound(full.run_dir, level, args.latency_ms / 1000)
            run_s = full.wall_s - full.startup_s
            ideal = full.calls * args.latency_ms / 1000 / level
            cpu = 1000 * (full.cpu_s - small.cpu_s) / max(1, full.calls - small.calls)
            print(
                f"{label:<28} {level:>4} {full.calls:>6} {full.startup_s:>10.2f} {run_s:>7.2f} {full.finish_s:>8.2f} "
                f"{ideal:>7.2f} "
                f"{ideal / run_s:>9.3f} {ideal / full.wall_s:>9.3f} {bound:>5.3f} {ideal / run_s / bound:>8.3f}"
                f" {cpu:>11.2f} {1000 * full.server_cpu_s / full.calls:>10.2f}"
                f" {(full.cpu_s + full.server_cpu_s) / full.wall_s:>5.2f}"
                f" {full.latency_ms[0]:>8.1f} / {full.latency_ms[1]:<7.1f}"
                f" {full.queue_ms[0]:>6.1f} / {full.queue_ms[1]:<7.1f}",
                flush=True,
            )
    if args.cost:
        users: list[float] = []
        cpus: list[float] = []
        smalls: list[Measured] = []
        for _ in range(args.cost_passes):  # one pass swings by a third from minute to minute on shared cores
            serial = ["--workers", "1", "--concurrency", "1"]
            with tempfile.TemporaryDirectory() as results:
                small = run_command([*serial, *SMALL, "--repeats", "1"], 0, Path(results))
                full = run_command([*serial, "--repeats", "1"], 0, Path(results))
            calls = full.calls - small.calls
            users.append(1000 * ((full.wall_s - full.busy_s) - (small.wall_s - small.busy_s)) / calls)
            cpus.append(1000 * (full.cpu_s - small.cpu_s) / calls)
            smalls.append(small)
        print(
            f"cost pass (latency 0, concurrency 1, 1 process, {full.calls} calls; median [min, max] of "
            f"{args.cost_passes} pass(es)): harness per call, user's view {spread(users)} ms (command wall minus "
            f"server answering time), CPU {spread(cpus)} ms; start-up apart: a one-episode command takes "
            f"{spread([m.wall_s for m in smalls])} s wall, {spread([m.cpu_s for m in smalls])} s CPU "
            f"({small.calls} calls)"
        )
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
