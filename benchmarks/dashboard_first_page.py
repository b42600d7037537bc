"""Time to the first page of the dashboard on a 576-episode run (issue 16's target: under 3 s after the server is
up). Generates the run once with the scripted server (context_trusting, the 24 core tasks x 6 strategies x 2
protection modes x 2 repeats), then, ``--runs`` times: starts ``contextdelta dashboard`` on it in a fresh process,
waits for Streamlit's health check (the server is up), and loads the first page in headless Chromium (over the
DevTools protocol, `tests/dashboard/cdp.py`), timing from the navigation until the page shows the run: the Runs
page (the root URL), and, in another fresh process, the Conditions page as the first page (as a pasted link opens
it). After the Runs page the other pages follow at once in the same browser session, each timed on its first
visit and again on a reload. Prints figures only; fails when the browser made a request that leaves loopback.

    python benchmarks/dashboard_first_page.py [--runs 3] [--results-dir DIR]

With ``--results-dir`` the newest run directory in DIR is used instead of a generated one (nothing is written).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contextdelta.dashboard import list_runs  # noqa: E402
from contextdelta.runner import BenchmarkRequest, run_benchmark  # noqa: E402
from contextdelta.testing import serve_scripted  # noqa: E402
from tests.dashboard.cdp import chromium_page, find_chromium  # noqa: E402

TASKS = ROOT / "tasks"
STRATEGIES = [
    "full_history",
    "last_n",
    "semantic_summary",
    "typed_state_digest",
    "tool_result_clearing",
    "token_budget_trim",
]
"""The six built-in strategies: 24 tasks x 6 x 2 modes x 2 repeats = 576 episodes."""


def generate(results: Path) -> Path:
    """The 576-episode scripted run, written under ``results``."""
    with serve_scripted("context_trusting", TASKS, in_process=True) as url:
        request = BenchmarkRequest.model_validate(
            {
                "tasks_dir": TASKS,
                "model": "scripted-context_trusting",
                "base_url": url,
                "results_dir": results,
                "strategies": STRATEGIES,
                "protection_modes": ["unprotected", "freshness_contract"],
                "repeats": 2,
                "concurrency": 8,
            }
        )
        return run_benchmark(request).path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the dashboard exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"the dashboard did not answer on {url} within {timeout_s}s")


COPY = "-b"
"""The Compare page compares the run with a copy of it in a folder of this name more (the dashboard refuses a run
compared with itself): the same work as comparing two runs of its size."""


def served_folder(run: Path, work: Path) -> Path:
    """A results folder for the dashboard in ``work``: the run and a copy of it (files hard-linked where the file
    system allows, else copied); the user's results folder is only read."""

    def link_or_copy(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    served = work / "served"
    served.mkdir()
    for name in (run.name, run.name + COPY):
        shutil.copytree(run, served / name, copy_function=link_or_copy)
    return served


def pages_after_runs(run_id: str, episodes: int) -> list[tuple[str, str, list[str]]]:
    """The pages visited after the Runs page, in order: (name, path, texts that show it rendered); ``episodes`` is
    the run's number of finished episodes, which the Episodes page lists unfiltered."""
    return [
        ("conditions", f"/conditions?run={run_id}", ["Task-level comparisons", "Difference from full_history"]),
        ("episodes", f"/episodes?run={run_id}", ["Episodes", f"{episodes} of {episodes} episodes"]),
        ("search", f"/episodes?run={run_id}&q=refund", ["Episodes", "contain “refund”"]),
        ("atlas", f"/atlas?run={run_id}", ["Failure atlas", "failed episode"]),
        ("episode", f"/episode?run={run_id}", ["Timeline", run_id]),
        ("compare", f"/compare?a={run_id}&b={run_id}{COPY}", ["Compare", "harmful action", "run a - run b"]),
    ]


def entry_pages(run_id: str, episodes: int, first: str) -> list[tuple[str, str, list[str]]]:
    """The pages of one fresh dashboard process: the Runs page and the rest, or the Conditions page alone."""
    if first == "conditions":
        return [
            (
                "conditions (first page)",
                f"/conditions?run={run_id}",
                ["Task-level comparisons", "Difference from full_history"],
            )
        ]
    return [("runs (first page)", "/", ["Runs", run_id, "newest first"]), *pages_after_runs(run_id, episodes)]


def one_round(
    chromium: str, results: Path, run_id: str, episodes: int, work: Path, first: str
) -> dict[str, tuple[float, float]]:
    """(first visit, reload) seconds per page on a freshly started dashboard whose first page is ``first``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    timings: dict[str, tuple[float, float]] = {}
    with chromium_page(chromium, width=1366, height=900) as page:
        process = subprocess.Popen(
            [sys.executable, "-m", "contextdelta", "dashboard", "--results-dir", str(results), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "CONTEXTDELTA_DATABASE_URL": f"sqlite:///{work / f'store-{port}.db'}"},
        )
        try:
            started = time.perf_counter()
            wait_healthy(url, process)
            timings["server up (from the command's start)"] = (time.perf_counter() - started, 0.0)
            for name, path, expect in entry_pages(run_id, episodes, first):
                timings[name] = (page.time_to_render(url + path, expect), page.time_to_render(url + path, expect))
            outside = page.outside_requests()
            if outside:
                raise SystemExit(f"requests that leave loopback: {outside}")
        finally:
            process.terminate()
            process.wait(timeout=30)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="Fresh dashboard processes to time (default 3).")
    parser.add_argument("--results-dir", type=Path, help="Use the newest run in this folder instead of generating.")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("headless Chromium is not installed (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="contextdelta-dashboard-bench-") as tmp:
        work = Path(tmp)
        if args.results_dir is not None:
            results = args.results_dir
            found = [s for s in list_runs(results) if s.readable]
            if not found:
                raise SystemExit(f"no readable run directory in {results}")
            path, finished = found[0].path, found[0].finished
            if not finished:
                raise SystemExit(f"the newest run directory in {results}, {path.name}, has no finished episode")
            episodes = finished
        else:
            started = time.perf_counter()
            path = generate(work / "results")
            episodes = sum(1 for _ in (path / "raw_runs.jsonl").open())
            print(f"generated {path.name}: {episodes} episodes in {time.perf_counter() - started:.1f} s")
        run_id = path.name  # the dashboard picks runs by folder name
        results = served_folder(path, work)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"machine: {platform.platform()} | cpus={os.cpu_count()} | python {platform.python_version()} | load {load}"
        )
        rounds = [
            {
                **one_round(chromium, results, run_id, episodes, work, "runs"),
                **one_round(chromium, results, run_id, episodes, work, "conditions"),
            }
            for _ in range(args.runs)
        ]
    print(f"run {run_id} ({episodes} episodes); {args.runs} fresh dashboard processes per entry page; seconds from")
    print("navigation until the page shows the run (first visit after the server is up | reload); after the Runs")
    print("page the others follow at once, each on its first visit:")
    up = [r["server up (from the command's start)"][0] for r in rounds]
    print(f"  server up (health check answers, from the command's start): median {statistics.median(up):.2f} s")
    for name in rounds[0]:
        if name.startswith("server up"):
            continue
        first = [r[name][0] for r in rounds]
        again = [r[name][1] for r in rounds]
        print(
            f"  {name}: median {statistics.median(first):.2f} s, slowest {max(first):.2f} s"
            f" | reload median {statistics.median(again):.2f} s"
        )


if __name__ == "__main__":
    main()
