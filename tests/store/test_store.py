"""The store when another process holds its SQLite database locked (a second run, or a user's open transaction):
opening it does not wait for the lock, and a writer that cannot finish says so when the run closes it."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import select

from contextdelta.store import EpisodeRow, Store, StoreWriter
from examples.smoke.mock_pipeline import Fixture


@contextmanager
def _locked(url: str) -> Iterator[None]:
    """Another writer holding the database's write lock (an open ``BEGIN IMMEDIATE`` transaction)."""
    connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False)
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        connection.execute("ROLLBACK")
        connection.close()


def test_a_store_locked_by_another_writer_opens_without_waiting_for_the_lock(sqlite_url: str) -> None:
    Store.open(sqlite_url).close()  # at head: opening only reads the revision
    with _locked(sqlite_url):
        started = time.monotonic()
        with Store.open(sqlite_url) as store:
            assert store.upgrade is not None and (store.upgrade.found, store.upgrade.changed) == ("versioned", False)
            assert store.episode_count() == 0  # reads go on beside the writer
        assert time.monotonic() - started < 5  # not the 30 s busy timeout, then "database is locked"


def test_a_writer_still_blocked_when_closed_says_what_is_missing(sqlite_url: str, mock_fixture: Fixture) -> None:
    store = Store.open(sqlite_url)
    store.ingest_manifest(mock_fixture.manifest)
    errors: list[str] = []
    writer = StoreWriter(store, on_error=errors.append)
    with _locked(sqlite_url):
        writer.start()
        thread = writer._thread
        writer.episode(mock_fixture.episodes[0].record)
        writer.close(timeout_s=0.5)
        assert len(errors) == 1
        assert errors[0].startswith(f"trace store {store.url}: still writing after 0.5s (is another process holding")
        assert "`contextdelta db import RUN_ID`" in errors[0]
    assert thread is not None
    thread.join(60)  # the lock released, the queued episode is written after all
    assert store.episode_count() == 1 and writer.written == 1
    store.close()


def test_a_store_file_deleted_during_a_run_is_created_again_with_its_episodes(
    sqlite_url: str, mock_fixture: Fixture
) -> None:
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    records = [e.record for e in mock_fixture.episodes]
    store = Store.open(sqlite_url)
    errors: list[str] = []
    writer = StoreWriter(store, on_error=errors.append).start()
    writer.manifest(mock_fixture.manifest)
    for record in records[:4]:
        writer.episode(record)
    writer.close()  # drained: four episodes stored
    for file in path.parent.glob(path.name + "*"):  # the database and its -wal and -shm
        file.unlink()
    writer.start()
    for record in records[4:]:  # written to the deleted file by the connections still open
        writer.episode(record)
    writer.reconcile(mock_fixture.manifest.run_group_id, records)  # what a run queues when it ends
    writer.close()
    store.close()
    assert errors == [
        f"trace store {store.url}: its file was deleted while the run wrote to it; created it again with this run's "
        "episodes (what it held of other runs is gone: load their run directories with `contextdelta db import "
        "RUN_ID`)"
    ]
    assert path.exists()
    with Store.open(sqlite_url) as reopened:
        assert reopened.episode_count(mock_fixture.manifest.run_group_id) == len(records)


def test_the_writer_reconciling_a_run_repairs_an_edited_row_and_counts_it(
    sqlite_url: str, mock_fixture: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    records = [e.record for e in mock_fixture.episodes]
    with Store.open(sqlite_url) as store:
        store.ingest_manifest(mock_fixture.manifest)
        for record in records:
            store.ingest_episode(record)
        connection = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
        with connection:
            connection.execute("UPDATE episodes SET success = 1 WHERE run_id = ?", (records[0].run_id,))
        connection.close()
        writer = StoreWriter(store).start()
        writer.reconcile(mock_fixture.manifest.run_group_id, records)  # what a run queues when it ends
        writer.close()
        assert (writer.reconciled, writer.errors) == (1, [])
        assert f"repaired 1 episode whose rows differed from raw_runs.jsonl: {records[0].run_id}: episodes.success" in (
            caplog.text
        )
        with store.read_session() as session:
            assert session.scalars(select(EpisodeRow.success).where(EpisodeRow.run_id == records[0].run_id)).one() is (
                records[0].verdict.success
            )


def test_a_run_ending_on_a_store_another_process_holds_locked_waits_the_stall_limit_then_names_the_import(
    sqlite_url: str, mock_run: Path, mock_fixture: Fixture
) -> None:
    """Another process holds the SQLite file's write lock for the whole end of a run: the run's end waits no more
    than CLOSE_STALL_S past the writer's last statement (it waited 120 s), says the episodes are missing, and
    names the command that loads the run directory later, which then does."""
    import subprocess
    import sys

    from typer.testing import CliRunner

    from contextdelta.cli import app
    from contextdelta.rundir import RunEnd, RunStart
    from contextdelta.store import StoreRecorder
    from contextdelta.store._store import CLOSE_STALL_S

    Store.open(sqlite_url).close()  # migrated before the other process takes the lock
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
            sqlite_url.removeprefix("sqlite:///"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == "locked\n"
    records = tuple(e.record for e in mock_fixture.episodes)
    errors: list[str] = []
    try:
        recorder = StoreRecorder.open(sqlite_url, errors.append)
        assert recorder is not None
        thread = recorder.writer._thread
        recorder.start(RunStart(mock_run, mock_fixture.manifest, len(records), (), len(records)))
        for record in records:
            recorder.episode(record)
        started = time.monotonic()
        recorder.finish(RunEnd(mock_run, mock_fixture.manifest, records, len(records)))
        waited = time.monotonic() - started
    finally:
        holder.stdin.close()  # the other process lets go
        holder.wait(30)
    assert CLOSE_STALL_S - 1 <= waited < CLOSE_STALL_S + 10, waited  # not the old 120 s
    assert len(errors) == 1, errors
    command = f"contextdelta db import {mock_run.resolve()} --database-url {sqlite_url}"
    assert errors[0] == (
        f"trace store {sqlite_url}: no write got through for {CLOSE_STALL_S:g}s (is another process holding the "
        "database locked?); stopped waiting, and the episodes not yet written are missing from it. The run "
        f"directory is complete: load it later with `{command}`"
    )
    assert thread is not None
    thread.join(120)  # the lock released, the writer left behind finishes or gives up
    result = CliRunner().invoke(app, command.split()[1:])
    assert result.exit_code == 0, result.output
    with Store.open(sqlite_url) as store:
        assert store.episode_count(mock_fixture.manifest.run_group_id) == len(records)


def _written_by_a_writer(
    sqlite_url: str, fixture: Fixture, monkeypatch: pytest.MonkeyPatch, edit: str | None
) -> tuple[list[str], StoreWriter, Store]:
    """A writer stores every episode of the fixture, then (``edit``) another connection changes a row, then the
    writer reconciles the run as a run's end does; returns the run ids whose rows the reconciliation read back."""
    from contextdelta.store._ingest import stored_episode_values as reader

    read: list[str] = []

    def counting(session: object, run_group_id: str, run_ids: list[str]) -> object:
        read.extend(run_ids)
        return reader(session, run_group_id, run_ids)  # type: ignore[arg-type]

    monkeypatch.setattr("contextdelta.store._store.stored_episode_values", counting)
    records = [e.record for e in fixture.episodes]
    store = Store.open(sqlite_url)
    writer = StoreWriter(store).start()
    writer.manifest(fixture.manifest)
    for record in records:
        writer.episode(record)
    deadline = time.monotonic() + 60
    while writer.written < len(records) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.written == len(records)
    if edit is not None:
        connection = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
        with connection:
            connection.execute(edit, (records[0].run_id,))
        connection.close()
    writer.reconcile(fixture.manifest.run_group_id, records)  # what a run queues when it ends
    writer.close()
    return read, writer, store


def test_a_writer_that_stored_every_episode_itself_ends_the_run_without_reading_them_back(
    sqlite_url: str, mock_fixture: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, writer, store = _written_by_a_writer(sqlite_url, mock_fixture, monkeypatch, edit=None)
    assert (read, writer.reconciled, writer.errors) == ([], 0, [])
    assert store.episode_count(mock_fixture.manifest.run_group_id) == len(mock_fixture.episodes)
    store.close()


def test_a_row_another_connection_edits_while_the_writer_runs_is_read_back_and_repaired_at_the_end(
    sqlite_url: str, mock_fixture: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [e.record for e in mock_fixture.episodes]
    edit = "UPDATE episodes SET success = NOT success WHERE run_id = ?"
    read, writer, store = _written_by_a_writer(sqlite_url, mock_fixture, monkeypatch, edit=edit)
    assert sorted(read) == sorted(r.run_id for r in records)  # every episode compared, not only the edited one
    assert (writer.reconciled, writer.errors) == (1, [])
    with store.read_session() as session:
        assert session.scalars(select(EpisodeRow.success).where(EpisodeRow.run_id == records[0].run_id)).one() is (
            records[0].verdict.success
        )
    store.close()
