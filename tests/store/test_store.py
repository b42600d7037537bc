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
        assert (
            f"repaired 1 episode(s) whose rows differed from raw_runs.jsonl: {records[0].run_id}: episodes.success"
            in (caplog.text)
        )
        with store.read_session() as session:
            assert session.scalars(select(EpisodeRow.success).where(EpisodeRow.run_id == records[0].run_id)).one() is (
                records[0].verdict.success
            )
