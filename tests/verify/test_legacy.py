"""A run directory written before issue 19 (old seed rule, old task_results.csv columns, metrics schema 1) still
loads and verifies (its reports of the older metrics schema get a note), and `report --write` rebuilds them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RAW_RUNS, RunDirectory, SeedRule
from contextdelta.runner import EpisodeSpec, episode_seed
from contextdelta.verify import verify_run
from tests.report import runs
from tests.verify.conftest import LEGACY


def test_the_fixture_is_what_it_says() -> None:
    manifest = json.loads((LEGACY / "run_manifest.json").read_text())
    assert "seed_rule" not in manifest
    assert "harmful_action" not in (LEGACY / "task_results.csv").read_text().splitlines()[0].split(",")
    assert json.loads((LEGACY / "aggregate_metrics.json").read_text())["schema_version"] == 1


def test_an_old_run_loads_with_the_old_seed_rule_and_its_seeds_verify(legacy: Path) -> None:
    directory = RunDirectory(legacy)
    manifest = directory.read_manifest()
    assert manifest.seed_rule is SeedRule.CONDITION
    for record in directory.read_episodes():
        spec = EpisodeSpec(record.task_id, record.strategy, record.protection_mode, record.repeat)
        assert record.episode_seed == episode_seed(manifest.seed, spec, SeedRule.CONDITION)
        assert record.episode_seed != episode_seed(manifest.seed, spec, SeedRule.TASK_REPEAT)
    result = verify_run(legacy)
    assert result.ok, result.lines()
    assert any("carries no hash chain" in n for n in result.notes)  # written before receipts existed
    assert not (legacy / "raw_runs.receipts.jsonl").exists() and manifest.seal is None
    (note,) = [n for n in result.notes if "metrics schema 1" in n]
    assert f"contextdelta report {manifest.run_group_id} --write" in note


def test_report_write_rebuilds_the_old_reports_and_then_everything_matches(legacy: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["report", legacy.name, "--write", "--results-dir", str(legacy.parent)])
    assert result.exit_code == 0, result.output
    assert "| episode seed rule | from (run seed, task, strategy, mode, repeat)" in result.stdout
    assert verify_run(legacy).ok
    assert json.loads((legacy / "aggregate_metrics.json").read_text())["schema_version"] == 2


def test_a_changed_episode_seed_is_named(legacy: Path) -> None:
    lines = (legacy / RAW_RUNS).read_text().splitlines()
    record = json.loads(lines[0])
    record["episode_seed"] += 1
    lines[0] = json.dumps(record)
    (legacy / RAW_RUNS).write_text("\n".join(lines) + "\n")
    found = [d for d in verify_run(legacy).divergences if d.field == "episode_seed"]
    assert [d.run_id for d in found] == [record["run_id"]]
    assert "seed rule (condition)" in found[0].detail


@pytest.mark.slow
def test_a_new_run_cannot_pass_off_its_reports_as_an_old_schema(tmp_path: Path) -> None:
    path = runs.copy_run(runs.oracle_pair_run(), tmp_path)
    data = json.loads((path / "aggregate_metrics.json").read_text())
    data["schema_version"] = 1
    (path / "aggregate_metrics.json").write_text(json.dumps(data))
    found = verify_run(path).divergences
    # the seal names the edited file; re-deriving it names both reports as of the wrong schema
    assert [d.field for d in found] == ["aggregate_metrics.json", "aggregate_metrics.json", "benchmark_report.md"]
    assert found[0].detail.startswith("edited after the run")
    # nor by dropping the seed rule from its manifest: every seed and the plan hash then diverge
    manifest = json.loads((path / "run_manifest.json").read_text())
    del manifest["seed_rule"]
    (path / "run_manifest.json").write_text(json.dumps(manifest))
    fields = [d.field for d in verify_run(path).divergences]
    assert "plan_sha256" in fields and fields.count("episode_seed") == 12


def test_a_torn_last_line_of_an_old_run_is_named_as_torn(legacy: Path) -> None:
    data = (legacy / RAW_RUNS).read_bytes()
    (legacy / RAW_RUNS).write_bytes(data[:-300])
    found = verify_run(legacy).divergences
    torn = [d for d in found if d.field == RAW_RUNS and "is torn: cut short" in d.detail]
    last = json.loads(data.splitlines()[-1])["run_id"]
    assert [d.run_id for d in torn] == [last]
    assert not any("planned episode missing" in d.detail for d in found)
