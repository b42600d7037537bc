"""`power` from a pilot whose comparison has no task with a value in both conditions (every episode a failed
trial) says "no data", never "more than 20,000" tasks simulated from nothing."""

from __future__ import annotations

import functools
from pathlib import Path

from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.report import plan_run, render_power_plan
from contextdelta.rundir.layout import RunDirectory
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.stats import AnalysisParams
from contextdelta.testing import serve_scripted
from tests.report import runs


@functools.cache
def all_failed_run() -> Path:
    """oracle on 2 tasks, full_history and last_n, unprotected, the server refusing every request as too long for
    the context window: every one of the 4 episodes is a failed trial."""
    fields: dict[str, object] = {
        "tasks_dir": runs.TASKS,
        "model": "scripted-oracle",
        "results_dir": runs.results_dir(),
        "task_ids": runs.TRUST_TASKS[:2],
        "strategies": ["full_history", "last_n"],
        "protection_modes": ["unprotected"],
        "repeats": 1,
        "concurrency": 2,
    }
    with serve_scripted("oracle", runs.TASKS, in_process=True, fail_context_length="every:1") as url:
        fields["base_url"] = url
        return run_benchmark(BenchmarkRequest.model_validate(fields)).path


def test_a_comparison_without_pilot_tasks_is_no_data() -> None:
    directory = RunDirectory(all_failed_run())
    episodes = directory.read_episodes()
    assert episodes and all(r.failed for r in episodes)
    plan = plan_run(directory.read_manifest(), episodes, 0.2, repeats=[1, 2], params=AnalysisParams(power_datasets=100))
    (row,) = plan.comparisons  # RQ1, stale action: no verdict anywhere
    assert row.pilot_tasks == 0 and row.tasks_needed == {"1": None, "2": None}
    text = render_power_plan(plan)
    assert "| RQ1 | last_n vs full_history (unprotected) | 0 of 0 | no data | 0.0500 | no data | no data |" in text
    assert "more than" not in text
    assert any("no pilot task with a value in both conditions" in note for note in plan.notes)


def test_the_report_of_a_comparison_without_values_says_no_data_and_why() -> None:
    """The report said "no task has episodes in both conditions" (each task had an episode in both, failed trials
    without a verdict) and "detectable with 80% power: none up to 100 pp (every task switched)", simulated from
    nothing."""
    text = (all_failed_run() / "benchmark_report.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| last_n vs full_history (unprotected) |"))
    assert row.endswith("| 2 | 0 / 0 of 0 | no data |"), row
    assert "none up to" not in text and "no task has episodes in both conditions" not in text
    assert (
        "- last_n vs full_history (unprotected): no task has a stale_action value in both conditions: 2 pairs of "
        "episodes involve a failed trial, which has no verdict; nothing to compare." in text
    )


def test_power_on_a_pilot_with_no_value_anywhere_exits_2_and_names_the_retry() -> None:
    """`power` printed a table of "no data" cells and exited 0 (a plan with nothing planned); its note said "1 of
    1 comparison ... their cells"."""
    run = all_failed_run()
    directory = RunDirectory(run)
    plan = plan_run(
        directory.read_manifest(), directory.read_episodes(), 0.2, params=AnalysisParams(power_datasets=100)
    )
    assert any("its cells say no data" in note for note in plan.notes), plan.notes
    out = CliRunner().invoke(app, ["power", "--pilot", str(run), "--difference", "0.2"])
    assert out.exit_code == 2 and out.stdout == ""
    text = " ".join(out.stderr.split())
    assert "nothing to compute: the pilot's one comparison (last_n vs full_history (unprotected)) has no task" in text
    assert f"`contextdelta run-benchmark --resume {run.name} --retry-failed`" in text


def test_a_report_written_before_no_data_power_was_null_still_verifies(tmp_path: Path) -> None:
    """The comparison without data records null power and the reason; a report written before (power_at_largest 0,
    largest_difference 1, no reason) verifies MATCH with a note, and a changed number in it is still named."""
    import json

    from contextdelta.rundir.layout import AGGREGATE_METRICS
    from contextdelta.verify import verify_run

    path = runs.copy_run(all_failed_run(), tmp_path)
    data = json.loads((path / AGGREGATE_METRICS).read_text())
    (comparison,) = [c for q in data["research_questions"] for c in q["comparisons"]]
    found = comparison["detectable"]
    assert (found["power_at_largest"], found["largest_difference"]) == (None, None) and found["no_data"]
    del found["no_data"]
    found.update(power_at_largest=0.0, largest_difference=1.0)
    (path / AGGREGATE_METRICS).write_text(json.dumps(data, indent=2) + "\n")
    assert RunDirectory(path).reseal_files()
    result = verify_run(path)
    assert result.ok, result.divergences
    assert any("no simulated power" in n for n in result.notes), result.notes
    found["power_at_largest"] = 0.5
    (path / AGGREGATE_METRICS).write_text(json.dumps(data, indent=2) + "\n")
    assert RunDirectory(path).reseal_files()
    fields = {d.field for d in verify_run(path).divergences}
    assert any(f.endswith("detectable.power_at_largest") for f in fields), fields


def test_power_on_an_external_agents_pilot_with_no_value_names_no_retry_failed() -> None:
    """run-external and serve-world have no --retry-failed: the message told an external agent's pilot to re-run
    its failed trials with run-benchmark, which refuses an external run."""
    from contextdelta.report._power import no_data_message
    from contextdelta.rundir.records import ExternalAgentInfo

    directory = RunDirectory(all_failed_run())
    manifest = directory.read_manifest()
    plan = plan_run(manifest, directory.read_episodes(), 0.2, params=AnalysisParams(power_datasets=100))
    external = manifest.model_copy(
        update={"external_agent": ExternalAgentInfo(agent="outside", transport="stdio", command="agent")}
    )
    why = no_data_message(external, plan)
    assert why is not None and "nothing to compute" in why
    assert "run-benchmark" not in why and "Run the agent again into a new run" in why
