"""run-benchmark --controls no_mutation: every episode again with the hidden mutations off, graded by the task's
no-mutation control, kept out of the main conditions, reported beside them, and verified."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.dashboard.data import summarize_run
from contextdelta.report import build_report
from contextdelta.rundir.layout import AGGREGATE_METRICS, BENCHMARK_REPORT, TASK_RESULTS, RunDirectory
from contextdelta.runner import BenchmarkError, BenchmarkRequest, EpisodeSpec, episode_seed, run_benchmark
from tests.runner.conftest import TASKS

HIDDEN = ["cal-design-review", "order-desk-cancel"]  # context_trusting acts stale on these with full_history
runner = CliRunner()


def _request(url: str, tmp_path: Path, **overrides: object) -> BenchmarkRequest:
    fields: dict[str, object] = {
        "tasks_dir": TASKS,
        "base_url": url,
        "model": "scripted-context_trusting",
        "results_dir": tmp_path,
        "task_ids": HIDDEN,
        "strategies": ["full_history", "last_n"],
        "protection_modes": ["unprotected", "freshness_contract"],
        "repeats": 1,
        "controls": ["no_mutation"],
    }
    fields.update(overrides)
    return BenchmarkRequest.model_validate(fields)


def test_a_control_episode_shares_its_main_episodes_seed_and_has_its_own_id() -> None:
    main = EpisodeSpec("t", "last_n", "unprotected", 2)
    control = EpisodeSpec("t", "last_n", "unprotected", 2, "no_mutation")
    assert control.run_id == "t.last_n.unprotected.no_mutation.r2" and main.run_id == "t.last_n.unprotected.r2"
    assert episode_seed(5, main) == episode_seed(5, control)


@pytest.mark.slow
def test_the_control_runs_every_episode_without_mutations_and_is_reported_apart(
    trusting_url: str, tmp_path: Path
) -> None:
    outcome = run_benchmark(_request(trusting_url, tmp_path))
    manifest = outcome.manifest
    assert manifest.controls == ["no_mutation"]
    assert manifest.counts.planned == manifest.counts.finished == 2 * 2 * 2 * 2
    controls = [r for r in outcome.records if r.control == "no_mutation"]
    main = [r for r in outcome.records if r.control is None]
    assert len(controls) == len(main) == 8
    for record in controls:
        assert record.trace.mutation_events() == []  # nothing changed behind the agent
        assert record.verdict.stale_action_count == 0
        assert record.verdict.success, (record.run_id, record.verdict.reasons)
        twin = next(r for r in main if r.run_id == record.run_id.replace(".no_mutation", ""))
        assert twin.episode_seed == record.episode_seed and twin.task_hash == record.task_hash
    stale_main = {r.run_id for r in main if r.verdict.stale_action_count}
    assert {rid.split(".")[1] for rid in stale_main} >= {"full_history"}  # the hazard is real in the main matrix

    with (outcome.path / TASK_RESULTS).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["control"] for r in rows} == {"", "no_mutation"}

    metrics = json.loads((outcome.path / AGGREGATE_METRICS).read_text())
    assert metrics["episodes"]["finished"] == 16
    main_succeeded = sum(1 for r in main if r.verdict.success and not r.failed)
    assert main_succeeded < 8 and metrics["episodes"]["succeeded"] == main_succeeded + 8  # every control passes
    assert metrics["episodes"]["main_matrix"] == {"finished": 8, "succeeded": main_succeeded, "failed_trials": 0}
    summary = summarize_run(outcome.path)  # the dashboard's Runs page: the main matrix's success
    assert (summary.planned, summary.finished, summary.succeeded) == (8, 8, main_succeeded)
    assert all(c["episodes"] == 2 for c in metrics["conditions"])  # main conditions hold main episodes only
    by_condition = {(c["condition"]["strategy"], c["condition"]["protection_mode"]): c for c in metrics["controls"]}
    assert set(by_condition) == {
        (s, m) for s in ("full_history", "last_n") for m in ("unprotected", "freshness_contract")
    }
    for c in by_condition.values():
        assert c["control"] == "no_mutation" and c["episodes"] == 2 and c["tasks"] == 2
        assert c["rates"]["success"]["estimate"] == 1.0 and c["rates"]["stale_action"]["estimate"] == 0.0
        assert c["means"]["read_calls"]["estimate"] > 0
    full = next(
        c
        for c in metrics["conditions"]
        if c["condition"]["strategy"] == "full_history" and c["condition"]["protection_mode"] == "unprotected"
    )
    assert full["rates"]["stale_action"]["estimate"] == 1.0  # main: stale; control: never

    report = (outcome.path / BENCHMARK_REPORT).read_text()
    assert "## Control condition: nothing changes" in report
    assert (
        f"| episodes | 16 finished of 16 planned; {main_succeeded + 8} succeeded; 0 failed trials (control episodes "
        f"included); main matrix: {main_succeeded} of 8 succeeded, 0 failed trials |"
    ) in report
    atlas = (outcome.path / "failure_atlas.md").read_text().splitlines()[2]
    assert "of 8 finished in the main matrix (16 planned, control episodes included: they never enter" in atlas, atlas
    attribute = runner.invoke(app, ["attribute", outcome.path.name, "--results-dir", str(tmp_path)])
    assert "16 episodes (8 control episodes among them, which failure_atlas.md leaves out):" in " ".join(
        attribute.stdout.split()
    )
    verify = runner.invoke(app, ["verify", outcome.path.name, "--results-dir", str(tmp_path)])
    assert verify.exit_code == 0, verify.output
    assert verify.stdout.splitlines()[0] == "MATCH"
    rebuilt = build_report(manifest, RunDirectory(outcome.path).read_episodes())
    assert rebuilt.metrics.controls is not None and len(rebuilt.metrics.controls) == 4
    power = runner.invoke(
        app, ["power", "--pilot", outcome.path.name, "--difference", "0.2", "--results-dir", str(tmp_path)]
    )  # the control episodes are no condition's: a pilot with controls plans from its main matrix
    assert power.exit_code == 0, power.output
    assert f"# Power plan from pilot {outcome.path.name}" in power.stdout


@pytest.mark.slow
def test_an_unknown_control_is_refused_before_anything_is_written(trusting_url: str, tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="--controls: unknown control condition 'quiet'"):
        run_benchmark(_request(trusting_url, tmp_path, controls=["quiet"]))
    assert list(tmp_path.iterdir()) == []


def test_a_run_without_controls_has_no_control_column_or_section(trusting_url: str, tmp_path: Path) -> None:
    outcome = run_benchmark(
        _request(
            trusting_url,
            tmp_path,
            controls=None,
            task_ids=HIDDEN[:1],
            strategies=["full_history"],
            protection_modes=["unprotected"],
        )
    )
    header = (outcome.path / TASK_RESULTS).read_text().splitlines()[0]
    assert "control" not in header.split(",")
    assert "controls" not in json.loads((outcome.path / AGGREGATE_METRICS).read_text())
    assert outcome.manifest.controls == []


@pytest.mark.slow
def test_compare_leaves_the_control_episodes_out(trusting_url: str, tmp_path: Path) -> None:
    """A run with controls compares like the same run without them: controls are no condition of their own."""
    from contextdelta.report import compare_runs

    with_controls = run_benchmark(_request(trusting_url, tmp_path / "a", protection_modes=["unprotected"]))
    without = run_benchmark(_request(trusting_url, tmp_path / "b", protection_modes=["unprotected"], controls=None))
    main = [r for r in with_controls.records if not r.control]
    assert len(main) < len(with_controls.records)
    pooled = compare_runs(with_controls.manifest, with_controls.records, without.manifest, without.records)
    plain = compare_runs(with_controls.manifest, main, without.manifest, without.records)
    assert pooled.model_dump() == plain.model_dump()
    for family in pooled.families:
        for row in family.comparisons:
            assert row.rate_a.n_episodes == row.rate_b.n_episodes
