"""Time to first error of ``contextdelta run-benchmark``: how long a user waits to learn that a flag, a setting or
the endpoint is wrong (issue 13's target: within 2 s on 2 cores). Each case runs the command as a user would, in a
fresh process, ``--runs`` times, and prints the median and the slowest wall time with the exit status and the
error's first words. Prints figures only.

    python benchmarks/startup_time.py [--runs 5]

Cases: a numeric flag out of range; an invalid setting in the environment; an endpoint that refuses connections;
a base URL without ``/v1`` (the scripted server, started once beforehand); a server that rejects ``tools``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contextdelta.testing import serve_scripted  # noqa: E402


def measure(args: list[str], env: dict[str, str], runs: int, cwd: str) -> tuple[list[float], int, str]:
    times: list[float] = []
    code, first = 0, ""
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "contextdelta", "run-benchmark", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
        )
        times.append(time.perf_counter() - started)
        code = done.returncode
        lines = [line.strip(" │╭╰─") for line in done.stderr.splitlines() if line.strip(" │╭╰─")]
        first = next((line for line in lines if line.startswith(("error:", "Invalid value"))), "")[:90]
    return times, code, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine: {platform.platform()} | cpus={os.cpu_count()} | python {platform.python_version()} | load {load}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTDELTA_") and k != "OPENAI_API_KEY"}
    tasks = ["--tasks", str(ROOT / "tasks"), "--no-store", "--quiet", "--model", "scripted-oracle"]
    with (
        tempfile.TemporaryDirectory() as work,
        serve_scripted("oracle", ROOT / "tasks") as url,
        serve_scripted("oracle", ROOT / "tasks", reject_tools=True) as no_tools,
    ):
        results = ["--results-dir", str(Path(work) / "results")]
        cases = [
            ("flag out of range (--concurrency 0)", ["--concurrency", "0"], env),
            ("invalid setting (CONTEXTDELTA_SEED=abc)", [*tasks, *results], {**env, "CONTEXTDELTA_SEED": "abc"}),
            ("endpoint refuses connections", [*tasks, *results, "--base-url", "http://127.0.0.1:9/v1"], env),
            ("base URL without /v1", [*tasks, *results, "--base-url", url.removesuffix("/v1")], env),
            ("endpoint rejects tools", [*tasks, *results, "--base-url", no_tools], env),
        ]
        for name, case_args, case_env in cases:
            times, code, first = measure(case_args, case_env, args.runs, work)
            print(
                f"{name}: median {statistics.median(times):.2f} s | slowest {max(times):.2f} s | exit {code} | {first}"
            )


if __name__ == "__main__":
    main()
