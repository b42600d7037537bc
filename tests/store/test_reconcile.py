"""The trace store is reconciled with raw_runs.jsonl when a run resumes and when it ends: episodes a killed session's
writer thread never stored are inserted, none is duplicated, and the run group's counts are the run directory's;
``db import`` of the same directory changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import delete, select
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RunDirectory
from contextdelta.store import EpisodeRow, MutationRow, RunGroupRow, StepRow, Store, ToolEventRow, record_sha256
from contextdelta.testing import serve_scripted

TASKS = Path(__file__).resolve().parents[2] / "tasks"
runner = CliRunner()


def _stored(url: str, group: str) -> dict[str, str]:
    with Store.open(url) as store:
        return store.episode_digests(group)


@pytest.mark.slow
def test_resume_inserts_what_a_killed_session_never_stored(sqlite_url: str, tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, in_process=True) as url:
        common = ["--base-url", url, "--model", "scripted-oracle", "--quiet", "--database-url", sqlite_url]
        first = runner.invoke(
            app,
            [
                *("run-benchmark", "--tasks", str(TASKS), "--results-dir", str(tmp_path / "runs")),
                *("--task-ids", "order-grinder-refund,cfg-search-ramp", "--strategies", "full_history,last_n"),
                *("--protection-modes", "unprotected", "--repeats", "1", *common),
            ],
        )
        assert first.exit_code == 0, first.output
        path = Path(first.stdout.strip().splitlines()[-1])
        records = {r.run_id: r for r in RunDirectory(path).read_episodes()}
        group = path.name
        assert _stored(sqlite_url, group) == {k: record_sha256(r) for k, r in records.items()}
        # what a SIGKILL leaves: the writer thread died with two episodes queued, the run group counts four
        lost = sorted(records)[:2]
        with Store.open(sqlite_url) as store, store.session() as session:
            ids = list(session.scalars(select(EpisodeRow.id).where(EpisodeRow.run_id.in_(lost))))
            for child in (StepRow, ToolEventRow, MutationRow):
                session.execute(delete(child).where(child.episode_id.in_(ids)))
            session.execute(delete(EpisodeRow).where(EpisodeRow.id.in_(ids)))
        assert len(_stored(sqlite_url, group)) == 2
        resumed = runner.invoke(app, ["run-benchmark", "--resume", str(path), *common])
        assert resumed.exit_code == 0, resumed.output
    assert _stored(sqlite_url, group) == {k: record_sha256(r) for k, r in records.items()}
    with Store.open(sqlite_url) as store, store.read_session() as session:
        row = session.get(RunGroupRow, group)
        assert row is not None and (row.finished, row.status) == (4, "complete")
        assert store.episode_count(group) == 4
    imported = runner.invoke(
        app, ["db", "import", group, "--results-dir", str(path.parent), "--database-url", sqlite_url]
    )
    assert imported.exit_code == 0, imported.output
    assert "4 episodes (0 added, 0 updated, 4 unchanged)" in imported.stdout


def test_reconcile_adds_missing_and_replaces_changed_records_once(sqlite_url: str, mock_run: Path) -> None:
    directory = RunDirectory(mock_run)
    records = directory.read_episodes()
    manifest = directory.read_manifest()
    with Store.open(sqlite_url) as store:
        store.ingest_manifest(manifest)
        for record in records[:3]:
            store.ingest_episode(record)
        first = store.reconcile(manifest.run_group_id, records)
        again = store.reconcile(manifest.run_group_id, records)
        assert (first.added, first.updated, first.unchanged) == (len(records) - 3, 0, 3)
        assert (again.added, again.updated, again.unchanged) == (0, 0, len(records))
        assert store.episode_count(manifest.run_group_id) == len(records)
