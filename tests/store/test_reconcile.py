"""The trace store is reconciled with raw_runs.jsonl when a run resumes and when it ends: episodes a killed session's
writer thread never stored are inserted, none is duplicated, and the run group's counts are the run directory's;
``db import`` of the same directory changes nothing."""

from __future__ import annotations

import json
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
    assert "4 episodes (0 added, 0 updated, 0 repaired, 4 unchanged)" in imported.stdout


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


def _edit(url: str, *statements: str) -> None:
    """Run SQL on the store file with the sqlite3 module, as a user editing it by hand would."""
    import sqlite3

    connection = sqlite3.connect(url.removeprefix("sqlite:///"))
    with connection:
        for statement in statements:
            assert connection.execute(statement).rowcount >= 1, statement
    connection.close()


GRINDER = "order-grinder-refund.full_history.unprotected.r1"
DESK = "order-desk-cancel.full_history.freshness_contract.r1"
LEGACY = "cfg-legacy-cleanup.last_n.unprotected.r1"
SPLIT = "order-split-refund.last_n.unprotected.r1"
REVIEW = "cal-design-review.full_history.unprotected.r1"


def _reorder_keys(url: str, run_id: str) -> None:
    """Write an episode's final_state and verdict JSON with their keys in reverse order (as jsonb would reorder)."""
    import sqlite3

    connection = sqlite3.connect(url.removeprefix("sqlite:///"))
    with connection:
        for column in ("verdict", "final_state"):
            (text,) = connection.execute(f"SELECT {column} FROM episodes WHERE run_id = ?", (run_id,)).fetchone()
            value = json.loads(text)
            reordered = json.dumps(dict(reversed(value.items())), separators=(",", ":"))
            assert reordered != text
            connection.execute(f"UPDATE episodes SET {column} = ? WHERE run_id = ?", (reordered, run_id))
    connection.close()


def _episode(run_id: str) -> str:
    return f"(SELECT id FROM episodes WHERE run_id = '{run_id}')"


def test_db_import_repairs_rows_edited_in_the_database(sqlite_url: str, mock_run: Path) -> None:
    args = ["db", "import", "mock-pipeline", "--results-dir", str(mock_run.parent), "--database-url", sqlite_url]
    assert runner.invoke(app, args).exit_code == 0
    _edit(
        sqlite_url,
        f"UPDATE episodes SET success = 0 WHERE run_id = '{DESK}'",  # the one success, made a failure
        f"UPDATE steps SET messages = '[]' WHERE step = 2 AND episode_id = {_episode(GRINDER)}",
        f"UPDATE tool_events SET result = 'ok' WHERE seq = 3 AND episode_id = {_episode(LEGACY)}",
        f"DELETE FROM steps WHERE step = 4 AND episode_id = {_episode(SPLIT)}",
        f"DELETE FROM hidden_mutations WHERE episode_id = {_episode(REVIEW)}",
        # a JSON false written as 0 is another value (SQL would read it as a number)
        "UPDATE episodes SET verdict = json_set(verdict, '$.end_state', 0) "
        "WHERE run_id = 'cfg-legacy-cleanup.full_history.unprotected.r1'",
        # the same JSON written another way (no spaces) is the same value: not a difference
        "UPDATE episodes SET verdict = json(verdict) WHERE run_id = 'cfg-staging-access.full_history.unprotected.r1'",
    )
    _reorder_keys(sqlite_url, "cfg-staging-access.full_history.unprotected.r1")
    with Store.open(sqlite_url) as store:  # an episode the run directory does not hold, added to its run group
        store.ingest_episode(RunDirectory(mock_run).read_episodes()[0].model_copy(update={"run_id": "stray"}))
    repaired = runner.invoke(app, args)
    assert repaired.exit_code == 0, repaired.output
    assert "10 episodes (0 added, 0 updated, 6 repaired, 4 unchanged, 1 removed)" in repaired.stdout
    assert "; removed 1 episode of the run group not in raw_runs.jsonl: stray\n" in repaired.stdout
    assert (
        f"repaired 6 episodes whose rows differed from raw_runs.jsonl: {GRINDER}: steps[step=2].messages; "
        f"{LEGACY}: tool_events[seq=3].result; cfg-legacy-cleanup.full_history.unprotected.r1: episodes.verdict; "
        "and 3 more"
    ) in repaired.stdout
    again = runner.invoke(app, args)
    assert "10 episodes (0 added, 0 updated, 0 repaired, 10 unchanged)" in again.stdout
    assert "repaired" not in again.stdout.replace("0 repaired", "")
    records = {r.run_id: r for r in RunDirectory(mock_run).read_episodes()}
    with Store.open(sqlite_url) as store, store.read_session() as session:
        desk = session.scalars(select(EpisodeRow).where(EpisodeRow.run_id == DESK)).one()
        assert desk.success is True
        grinder = session.scalars(select(EpisodeRow).where(EpisodeRow.run_id == GRINDER)).one()
        assert [s.messages for s in grinder.steps] == [list(s.messages) for s in records[GRINDER].trace.steps]
        split = session.scalars(select(EpisodeRow).where(EpisodeRow.run_id == SPLIT)).one()
        assert [s.step for s in split.steps] == [s.step for s in records[SPLIT].trace.steps]
        review = session.scalars(select(EpisodeRow).where(EpisodeRow.run_id == REVIEW)).one()
        assert len(review.mutations) == 1
        assert store.episode_count() == 10


def test_reconcile_repairs_rows_and_names_the_first_differing_column(sqlite_url: str, mock_run: Path) -> None:
    directory = RunDirectory(mock_run)
    records = directory.read_episodes()
    with Store.open(sqlite_url) as store:
        store.import_run(directory)
        _edit(
            sqlite_url,
            # true written as 5: SQLite's bool() would read it as true again
            f"UPDATE episodes SET success = 5, final_answer = NULL WHERE run_id = '{DESK}'",
            f"UPDATE episodes SET latency_s = latency_s + 0.5 WHERE run_id = '{REVIEW}'",
            # the record's hash, and the superseded attempts as text that is not JSON: a repair, not another record
            "UPDATE episodes SET record_sha256 = 'x' WHERE run_id = "
            "'cfg-legacy-cleanup.semantic_summary.unprotected.r1'",
            "UPDATE episodes SET superseded_attempts = 'garbage' WHERE run_id = "
            "'order-grinder-refund.last_n.unprotected.r1'",
            # text that is not JSON in a JSON column: read as unreadable, not a crash
            f"UPDATE steps SET summary_calls = 'not json' WHERE step = 1 AND episode_id = {_episode(LEGACY)}",
            f"UPDATE hidden_mutations SET versions_after = '{{}}' WHERE episode_id = {_episode(GRINDER)}",
            f"INSERT INTO tool_events (episode_id, seq, step, call_index, tool, outcome, result, stale, duplicate, "
            f"prohibited, state_before, state_after) VALUES ({_episode(SPLIT)}, 99, 1, 0, 'x', 'ok', '', 0, 0, 0, "
            "'a', 'b')",
        )
        store.ingest_episode(records[0].model_copy(update={"run_id": "stray.full_history.unprotected.r1"}))
        report = store.reconcile("mock-pipeline", records)
        assert (report.added, report.updated, report.repaired, report.unchanged) == (0, 0, 7, 3)
        assert report.removed == ["stray.full_history.unprotected.r1"]  # in the store, not in the run directory
        assert store.episode_count("mock-pipeline") == len(records)
        assert report.repairs == [
            f"{GRINDER}: hidden_mutations[position=0].versions_after",
            f"{LEGACY}: steps[step=1].summary_calls",
            "cfg-legacy-cleanup.semantic_summary.unprotected.r1: episodes.record_sha256",
            f"{SPLIT}: tool_events[seq=99] (not in the record)",
            "order-grinder-refund.last_n.unprotected.r1: episodes.superseded_attempts",
            f"{REVIEW}: episodes.latency_s",
            f"{DESK}: episodes.success",  # the first of its two edited columns
        ]
        again = store.reconcile("mock-pipeline", records)
        assert (again.repaired, again.unchanged) == (0, 10)
        assert store.episode_digests("mock-pipeline") == {r.run_id: record_sha256(r) for r in records}
        with store.read_session() as session:
            desk = session.scalars(select(EpisodeRow).where(EpisodeRow.run_id == DESK)).one()
            assert (desk.success, desk.final_answer) == (
                True,
                next(r for r in records if r.run_id == DESK).trace.final_answer,
            )
