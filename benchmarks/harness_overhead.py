"""Harness overhead of run-benchmark against the scripted server over loopback HTTP.

Runs the default matrix (every task x 4 strategies x 2 modes x 3 repeats = 576 episodes) and prints:
episodes/s, median and p95 harness milliseconds per step (episode wall time minus the time spent inside provider
calls, divided by model calls), and peak RSS of the harness process. With ``--latency-ms 200 --concurrency 32`` it
also prints the ratio of the ideal latency-bound wall time (model calls x latency / concurrency) to the measured
wall time. Targets (issue 5): harness median <= 5 ms/step, ratio >= 0.85, peak RSS <= 500 MB. Prints figures only.

    python benchmarks/harness_overhead.py                       # overhead pass, concurrency 1
    python benchmarks/harness_overhead.py --latency-ms 200 --concurrency 32

With concurrency above 1 the per-step harness time also contains time an episode waited while others ran on the
same event loop, so the overhead figure is taken at concurrency 1 by default.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contextdelta.runner import BenchmarkRequest, run_benchmark  # noqa: E402
from contextdelta.testing import serve_scripted  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=int, default=0, help="Scripted server latency per call.")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policy", default="oracle")
    parser.add_argument("--tasks", type=Path, default=ROOT / "tasks")
    args = parser.parse_args()
    load_before = os.getloadavg()  # other processes on the machine change every figure below

    with (
        tempfile.TemporaryDirectory() as results,
        serve_scripted(args.policy, args.tasks, latency_ms=args.latency_ms) as url,
    ):
        started = time.perf_counter()
        outcome = run_benchmark(
            BenchmarkRequest(
                tasks_dir=args.tasks,
                base_url=url,
                model=f"scripted-{args.policy}",
                results_dir=Path(results),
                repeats=args.repeats,
                concurrency=args.concurrency,
            )
        )
        wall = time.perf_counter() - started
    records = outcome.records
    per_step_ms: list[float] = []
    calls = 0
    for record in records:
        totals = record.trace.totals
        provider_s = sum((s.response.elapsed_s or s.response.latency_s) for s in record.trace.steps if s.response)
        provider_s += sum(c.latency_s for s in record.trace.steps for c in s.context.summary_calls)
        model_calls = totals.agent_calls + totals.summary_calls
        calls += model_calls
        per_step_ms.append(1000 * max(0.0, record.wall_s - provider_s) / max(1, model_calls))
    per_step_ms.sort()
    latencies = sorted(s.response.latency_s for r in records for s in r.trace.steps if s.response)
    queued = sorted(s.response.queue_s or 0.0 for r in records for s in r.trace.steps if s.response)
    p95 = per_step_ms[min(len(per_step_ms) - 1, int(0.95 * len(per_step_ms)))]
    own = resource.getrusage(resource.RUSAGE_SELF)
    server = resource.getrusage(resource.RUSAGE_CHILDREN)  # the scripted server, waited for on exit
    rss_mb = own.ru_maxrss / 1024
    machine = f"{platform.platform()} | {platform.machine()} | cpus={os.cpu_count()}"
    load = ", ".join(f"{x:.1f}" for x in load_before)
    print(f"machine: {machine} | python {platform.python_version()} | load average before the run: {load}")
    print(
        f"matrix: {len(records)} episodes ({outcome.manifest.counts.succeeded} succeeded), {calls} model calls, "
        f"policy={args.policy}, latency={args.latency_ms} ms, concurrency={args.concurrency}"
    )
    print(f"wall time: {wall:.1f} s | episodes/s: {len(records) / wall:.2f}")
    print(
        f"provider latency (time on the wire): median {1000 * statistics.median(latencies):.1f} ms | "
        f"p95 {1000 * latencies[int(0.95 * (len(latencies) - 1))]:.1f} ms | wait before the wire (queue_s): "
        f"median {1000 * statistics.median(queued):.1f} ms | p95 {1000 * queued[int(0.95 * (len(queued) - 1))]:.1f} ms"
    )
    print(f"harness ms per model call: median {statistics.median(per_step_ms):.2f} | p95 {p95:.2f}")
    print(f"peak RSS (harness process): {rss_mb:.0f} MB")
    own_ms = 1000 * (own.ru_utime + own.ru_stime) / calls
    server_ms = 1000 * (server.ru_utime + server.ru_stime) / calls
    print(
        f"CPU per model call: harness process {own_ms:.2f} ms (client, harness, grading, files), "
        f"scripted server {server_ms:.2f} ms"
    )
    if args.latency_ms:
        ideal = calls * args.latency_ms / 1000 / args.concurrency
        print(f"ideal latency-bound wall time: {ideal:.1f} s | measured {wall:.1f} s | ratio {ideal / wall:.3f}")


if __name__ == "__main__":
    main()
