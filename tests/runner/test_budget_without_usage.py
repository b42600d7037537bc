"""``--max-cost-usd`` against an endpoint that leaves ``usage`` out of one reply, over real HTTP with the scripted
server's ``no_usage``: the run still stops (what it spent cannot be bounded), its stop reason names the episode, the
step, the endpoint and the fix, and a resume against an endpoint that reports usage goes on to the end."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RunStatus
from contextdelta.runner import EXIT_INCOMPLETE, run_benchmark
from contextdelta.testing import FaultPlan, ScriptedServer
from contextdelta.verify import verify_run
from tests.runner.conftest import SMALL, TASKS, benchmark_request

runner = CliRunner()
TWO = {"strategies": ["full_history", "last_n"], "protection_modes": ["unprotected", "freshness_contract"]}


def _prices(folder: Path) -> Path:
    path = folder / "prices.json"
    path.write_text(json.dumps({"scripted-oracle": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}))
    return path


def test_a_reply_without_usage_stops_the_run_naming_where_and_the_run_resumes(tmp_path: Path) -> None:
    prices = _prices(tmp_path)
    results = tmp_path / "results"
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(no_usage="at:2")) as server:
        first = run_benchmark(
            benchmark_request(server.base_url, results, price_table=prices, max_cost_usd=100.0, concurrency=1, **TWO)
        )
        manifest = first.manifest
        assert manifest.status is RunStatus.INCOMPLETE and manifest.counts.finished == 1
        (record,) = first.records
        assert record.trace.termination.value == "budget_exceeded" and record.cost_usd is None
        assert manifest.stop_reason == (
            f"--max-cost-usd $100.0 cannot be enforced: {server.base_url} reported no token usage for step 2 of "
            f"episode {record.run_id} (the agent's call), so what the run spent is unknown; run without "
            "--max-cost-usd (a run needs no price then), or against an endpoint that reports usage, then continue "
            "the run with --resume"
        )
        assert "run without --max-cost-usd" in (record.trace.error or "")

        server.faults = FaultPlan()  # the endpoint reports usage again
        second = run_benchmark(benchmark_request(server.base_url, results, resume=str(first.path)))
        assert second.manifest.status is RunStatus.COMPLETE, second.manifest.stop_reason
        assert (second.manifest.counts.finished, second.manifest.counts.failed) == (12, 1)
        # the failed trial re-run too: every episode now has a verdict and a cost
        third = run_benchmark(benchmark_request(server.base_url, results, resume=str(first.path), retry_failed=True))
    assert third.manifest.status is RunStatus.COMPLETE
    assert (third.manifest.counts.finished, third.manifest.counts.failed) == (12, 0)
    assert all(r.cost_usd is not None for r in third.records)
    assert verify_run(third.path).ok


def test_a_reply_without_usage_in_this_session_still_stops_a_resumed_run(tmp_path: Path) -> None:
    """The strict stop holds in every session: a resume whose own episode reports no usage stops again."""
    prices = _prices(tmp_path)
    results = tmp_path / "results"
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(no_usage="at:2")) as server:
        first = run_benchmark(
            benchmark_request(server.base_url, results, price_table=prices, max_cost_usd=100.0, concurrency=1, **TWO)
        )
        server.faults = FaultPlan(no_usage="at:5")  # the 3rd call of the resumed session's 1st episode
        second = run_benchmark(benchmark_request(server.base_url, results, resume=str(first.path), concurrency=1))
    assert second.manifest.status is RunStatus.INCOMPLETE
    assert second.manifest.counts.finished == 2
    assert "reported no token usage for step 3 of episode " in (second.manifest.stop_reason or "")


def test_the_command_prints_where_usage_was_missing_and_exits_3(tmp_path: Path) -> None:
    prices = _prices(tmp_path)
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(no_usage="at:1")) as server:
        args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", server.base_url, "--model", "scripted-oracle"]
        args += ["--results-dir", str(tmp_path / "results"), "--task-ids", ",".join(SMALL), "--repeats", "1"]
        args += ["--quiet", "--no-store", "--concurrency", "1", "--strategies", "full_history"]
        args += ["--price-table", str(prices), "--max-cost-usd", "5"]
        result = runner.invoke(app, args)
    assert result.exit_code == EXIT_INCOMPLETE == 3, result.output
    (line,) = [text for text in result.stderr.splitlines() if "is incomplete:" in text]
    assert f"{server.base_url} reported no token usage for step 1 of episode " in line
    assert "run without --max-cost-usd" in line and "then continue the run with --resume" in line
