"""`contextdelta power --pilot RUN_ID --difference D`, and `report --resamples/--bootstrap-seed` recorded for
verify."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy.stats import binom
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.report import plan_run
from contextdelta.rundir.layout import AGGREGATE_METRICS, BENCHMARK_REPORT, RunDirectory
from contextdelta.verify import verify_run
from tests.report import runs

cli = CliRunner()


def invoke(*args: str, results: Path | None = None) -> tuple[int, str, str]:
    result = cli.invoke(app, [*args, "--results-dir", str(results or runs.results_dir())])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_power_plans_every_comparison_and_repeats_do_not_help_when_the_pilot_repeats_agree() -> None:
    pilot = runs.trusting_run()
    code, out, _ = invoke("power", "--pilot", pilot.name, "--difference", "0.10", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert (plan["difference"], plan["target_power"], plan["pilot_repeats"]) == (0.1, 0.8, 2)
    rows = plan["comparisons"]
    assert len(rows) == 6 + 4 + 4
    for row in rows:
        assert set(row["tasks_needed"]) == {"1", "2", "3", "5"}
        # every repeat of a pilot task agrees (a scripted policy): the model takes repeats as copies
        assert len(set(row["tasks_needed"].values())) == 1
    rq1 = [r for r in rows if r["question"] == "RQ1"]
    assert all(r["level"] == pytest.approx(0.05 / 6) for r in rq1)
    # no discordant pilot task: a run needs k tasks to switch, 2 * 2^-k <= level, with 80% probability
    needed = math.ceil(math.log2(2 / (0.05 / 6)))
    closed = min(n for n in range(2, 400) if binom.sf(needed - 1, n, 0.10) >= 0.8)
    assert all(abs(r["tasks_needed"]["3"] - closed) <= max(3, closed // 10) for r in rq1)
    code, text, _ = invoke("power", "--pilot", pilot.name, "--difference", "0.10")
    assert code == 0 and f"# Power plan from pilot {pilot.name}" in text and "| RQ3 | freshness_contract" in text
    assert "first number of tasks n from which the next max(5, n/20) numbers of tasks also reach" in text


def test_power_says_when_a_difference_is_out_of_reach_and_notes_a_one_repeat_pilot() -> None:
    directory = RunDirectory(runs.unsafe_run())
    plan = plan_run(directory.read_manifest(), directory.read_episodes(), 0.9, repeats=[1], max_tasks=64)
    assert any("one repeat per task" in note for note in plan.notes)
    assert all(
        c.tasks_needed["1"] is None
        for c in plan.comparisons
        if c.largest_difference is None or c.largest_difference < 0.9
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--difference", "0"], "--difference"),
        (["--difference", "1.5"], "--difference"),
        (["--difference", "0.1", "--repeats", "two"], "--repeats"),
        (["--difference", "0.1", "--repeats", "0"], "--repeats"),
        (["--difference", "0.1", "--repeats", "3,1000000"], "--repeats must list numbers from 1 to 1000"),
        (["--difference", "0.1", "--repeats", "99999999999999999999"], "--repeats must list numbers from 1 to 1000"),
    ],
)
def test_power_refuses_bad_flags(args: list[str], message: str) -> None:
    code, _, err = invoke("power", "--pilot", runs.oracle_pair_run().name, *args)
    assert code == 2 and message in " ".join(err.split())


def test_report_resamples_and_seed_are_recorded_and_verify_uses_them(tmp_path: Path) -> None:
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    code, out, err = invoke("report", path.name, "--resamples", "2000", "--bootstrap-seed", "5", results=tmp_path)
    recorded = (
        "2000 resamples, bootstrap seed 5, task-level intervals expanded_percentile, rate intervals "
        "expanded_percentile, pass^k and flip-rate intervals clopper_pearson (verify uses them)"
    )
    assert code == 0 and recorded in " ".join(err.split())
    analysis = json.loads((path / AGGREGATE_METRICS).read_text())["analysis"]
    assert (analysis["resamples"], analysis["seed"]) == (2000, 5)
    assert out == (path / BENCHMARK_REPORT).read_text() and "2000 resamples, bootstrap seed 5" in out
    assert verify_run(path).ok
    # without the flags, report uses the recorded values again
    code, again, _ = invoke("report", path.name, results=tmp_path)
    assert code == 0 and again == out


def test_report_task_interval_switches_the_method_both_ways_and_verify_follows(tmp_path: Path) -> None:
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    code, plain, err = invoke("report", path.name, "--task-interval", "percentile", results=tmp_path)
    assert code == 0 and "task-level intervals percentile, rate intervals" in " ".join(err.split())
    assert "task_interval" not in json.loads((path / AGGREGATE_METRICS).read_text())["analysis"]
    assert "**Task-level intervals**" not in plain and verify_run(path).ok
    code, again, _ = invoke("report", path.name, results=tmp_path)  # the recorded method stays
    assert code == 0 and again == plain
    code, expanded, _ = invoke("report", path.name, "--task-interval", "expanded_percentile", results=tmp_path)
    assert code == 0 and "**Task-level intervals**" in expanded and verify_run(path).ok
    assert json.loads((path / AGGREGATE_METRICS).read_text())["analysis"]["task_interval"] == "expanded_percentile"
    code, _, err = invoke("report", path.name, "--task-interval", "bca", results=tmp_path)
    assert code == 2 and "--task-interval must be one of expanded_percentile, percentile, not 'bca'" in err


def test_report_refuses_a_resample_count_no_memory_holds(tmp_path: Path) -> None:
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    before = (path / AGGREGATE_METRICS).read_bytes()
    code, _, err = invoke("report", path.name, "--resamples", "99999999999", results=tmp_path)
    words = " ".join(w for w in err.split() if w != "│")
    assert code == 2 and "--resamples': 99999999999 is out of range; allowed: from 1 to 100000" in words
    assert "Traceback" not in err and (path / AGGREGATE_METRICS).read_bytes() == before


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_power_refuses_a_pilot_without_a_pair_and_says_what_to_run(fmt: str) -> None:
    """A pilot of one condition printed a table header without rows and exited 0."""
    pilot = runs.max_steps_run()  # full_history / unprotected only
    code, out, err = invoke("power", "--pilot", pilot.name, "--difference", "0.2", "--format", fmt)
    assert code == 2 and out == ""
    text = " ".join(err.split())
    assert "nothing to compute: the pilot has episodes of 1 condition (full_history / unprotected)" in text
    assert "RQ1 a reduced strategy and full_history in one protection mode" in text
    assert "`contextdelta run-benchmark --strategies full_history,last_n --protection-modes unprotected" in text
