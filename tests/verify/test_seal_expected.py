"""A run that must carry a seal (it has receipts, or it records a contextdelta version that seals every run
directory) and has none had its seal removed after the run: verify fails naming the directory, the field and the
remedy; report, export, compare, replay, attribute and the dashboard warn; ``db import`` refuses it. A run from
before receipts (0.1.0, no receipts) is still checked the way it always was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS, RunDirectory, version_writes_seal
from contextdelta.verify import seal_problems, verify_run
from tests.report import runs

cli = CliRunner()


def _strip_seal(path: Path, *, receipts: bool = True, version: str | None = None) -> None:
    """Remove the seal from the manifest (keeping the runner's form), and optionally the receipts file; optionally
    record another contextdelta version."""
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    manifest.pop("seal")
    if version is not None:
        manifest["environment"]["contextdelta"] = version
    (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if not receipts:
        (path / RAW_RUNS_RECEIPTS).unlink()


@pytest.fixture
def stripped(tmp_path: Path) -> Path:
    path = runs.copy_run(runs.single_task_run(), tmp_path)
    _strip_seal(path)
    return path


def test_versions_that_seal_every_run_directory() -> None:
    assert not version_writes_seal("0.1.0") and not version_writes_seal("0.1.9")
    assert version_writes_seal("0.2.0") and version_writes_seal("0.6.0") and version_writes_seal("1.0.0rc1")
    assert version_writes_seal("not a version")  # no release wrote it: an edit, so the seal is expected


@pytest.mark.slow
def test_verify_fails_a_run_whose_seal_was_removed(stripped: Path) -> None:
    result = verify_run(stripped)
    assert result.seal_expected and not result.ok
    (missing,) = [d for d in result.divergences if d.field == f"{MANIFEST} seal"]
    assert missing.run_id == stripped.name
    assert str(stripped) in missing.detail and "removed after the run" in missing.detail
    assert f"restore {MANIFEST} as the run wrote it" in missing.detail
    assert "raw_runs.receipts.jsonl" in missing.detail  # why this run must have one
    assert not any("carries no hash chain" in n for n in result.notes)
    out = cli.invoke(app, ["verify", stripped.name, "--results-dir", str(stripped.parent)])
    assert out.exit_code == 1 and f"{stripped.name}: {MANIFEST} seal: missing from" in out.stdout


@pytest.mark.slow
def test_without_receipts_too_the_recorded_version_expects_a_seal(tmp_path: Path) -> None:
    path = runs.copy_run(runs.single_task_run(), tmp_path)
    _strip_seal(path, receipts=False)
    result = verify_run(path)
    assert result.seal_expected and not result.ok
    (missing,) = [d.detail for d in result.divergences if d.field == f"{MANIFEST} seal"]
    assert "every version since 0.2.0 seals each run directory" in missing
    # writing 0.1.0 into the manifest does not help while the receipts are there: only a sealing run writes them
    old = runs.copy_run(runs.single_task_run(), tmp_path / "old")
    _strip_seal(old, version="0.1.0")
    assert RunDirectory(old).seal_expected(RunDirectory(old).read_manifest())
    # without them too, the run reads as one from before receipts: the documented limit of a seal without a key
    (old / RAW_RUNS_RECEIPTS).unlink()
    assert not RunDirectory(old).seal_expected(RunDirectory(old).read_manifest())


@pytest.mark.slow
def test_an_incomplete_status_with_the_seal_removed_is_an_edit_not_a_run_to_resume(stripped: Path) -> None:
    manifest = json.loads((stripped / MANIFEST).read_text(encoding="utf-8"))
    manifest["status"] = "incomplete"
    (stripped / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    result = verify_run(stripped)  # not refused as incomplete (exit 2)
    assert f"{MANIFEST} seal" in [d.field for d in result.divergences]


def test_a_run_from_before_receipts_needs_no_seal(legacy: Path) -> None:
    directory = RunDirectory(legacy)
    assert not directory.seal_expected(directory.read_manifest())
    assert seal_problems(legacy, unsealed_ok=True) == []
    assert seal_problems(legacy) == [
        f"{legacy.name}: seal: none (written before receipts): its records cannot be checked"
    ]


@pytest.mark.slow
def test_a_run_from_before_receipts_verifies_without_a_seal(legacy: Path) -> None:
    result = verify_run(legacy)
    assert result.ok and not result.seal_expected
    assert any("carries no hash chain" in n for n in result.notes)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "what"),
    [
        (["report"], "the numbers below come"),
        (["export", "--format", "inspect", "--out", "{out}"], "the export comes"),
        (["replay"], "the replay comes"),
        (["attribute"], "the attribution comes"),
    ],
)
def test_readers_warn_about_a_run_whose_seal_was_removed(
    stripped: Path, legacy: Path, tmp_path: Path, command: list[str], what: str
) -> None:
    for path, warned in ((stripped, True), (legacy, False)):
        args = [c.replace("{out}", str(tmp_path / f"{path.name}.json")) for c in command]
        result = cli.invoke(app, [args[0], path.name, *args[1:], "--results-dir", str(path.parent)])
        assert result.exit_code == 0, result.output
        message = " ".join(result.stderr.split())
        if warned:
            assert f"warning: run {path.name} was changed after its run" in message
            assert f"{MANIFEST} seal: missing from" in message and f"{what} from the changed files" in message
        else:
            assert "warning" not in message


@pytest.mark.slow
def test_compare_warns_about_a_run_whose_seal_was_removed(stripped: Path, tmp_path: Path) -> None:
    other = runs.copy_run(runs.single_task_run(), tmp_path / "other")
    shutil.move(other, stripped.parent / "intact")
    result = cli.invoke(app, ["compare", stripped.name, "intact", "--results-dir", str(stripped.parent)])
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert f"warning: run {stripped.name} was changed after its run" in message
    assert "the comparison comes from the changed files" in message and "run intact was" not in message


@pytest.mark.slow
def test_the_dashboard_flags_a_run_whose_seal_was_removed(stripped: Path, legacy: Path) -> None:
    from contextdelta.dashboard.data import load_run

    changed = load_run(stripped).changed
    assert changed and f"{MANIFEST} seal: missing from" in changed[0]
    assert load_run(legacy).changed == ()


@pytest.mark.slow
def test_db_import_refuses_a_changed_run_naming_the_file(stripped: Path, legacy: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = ["--results-dir", str(stripped.parent), "--database-url", url]
    result = cli.invoke(app, ["db", "import", stripped.name, *args])
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert f"cannot import {stripped}" in message and f"{MANIFEST} seal: missing from" in message

    edited = runs.copy_run(runs.single_task_run(), tmp_path / "edited")
    lines = (edited / RAW_RUNS).read_text(encoding="utf-8").splitlines(keepends=True)
    lines[0] = lines[0].replace('"final_answer"', '"max_steps"', 1)
    (edited / RAW_RUNS).write_text("".join(lines), encoding="utf-8")
    result = cli.invoke(app, ["db", "import", edited.name, "--results-dir", str(edited.parent), "--database-url", url])
    assert result.exit_code == 2
    assert f"{RAW_RUNS} line 1" in " ".join(result.stderr.split())

    intact = runs.copy_run(runs.single_task_run(), tmp_path / "intact")
    result = cli.invoke(app, ["db", "import", intact.name, "--results-dir", str(intact.parent), "--database-url", url])
    assert result.exit_code == 0, result.output
    result = cli.invoke(app, ["db", "import", legacy.name, "--results-dir", str(legacy.parent), "--database-url", url])
    assert result.exit_code == 0, result.output
