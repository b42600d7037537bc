"""Migrations on real SQLite files: fresh, Alembic-less (first revision's tables with rows), older revision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, MetaData, create_engine, func, inspect, select, text

from contextdelta.rundir.layout import RunDirectory
from contextdelta.store import (
    Base,
    Store,
    StoreError,
    alembic_config,
    create_store_engine,
    current_revision,
    head_revision,
    migrations_dir,
    revisions,
    upgrade_database,
)
from contextdelta.store._ingest import VERDICT_COLUMNS, episode_row
from examples.smoke.mock_pipeline import Fixture


def _count(url: str, table: str) -> int:
    engine = create_engine(url)
    with engine.connect() as connection:
        value = int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    engine.dispose()
    return value


def _migrate_to(url: str, revision: str, *, keep_version_table: bool = True) -> None:
    engine = create_store_engine(url, foreign_keys=False)
    with engine.connect() as connection:
        command.upgrade(alembic_config(connection), revision)
        connection.commit()
        if not keep_version_table:
            connection.execute(text("DROP TABLE alembic_version"))
            connection.commit()
    engine.dispose()


def _insert_rows(connection: Connection, fixture: Fixture) -> int:
    """Insert the fixture's run group and episodes with plain SQL into whatever tables the database has (the
    first revision's, here), dropping columns it does not have yet. Returns the episodes inserted."""
    meta = MetaData()
    meta.reflect(connection)

    def insert(table: str, values: dict[str, Any]) -> Any:
        columns = {c.name for c in meta.tables[table].columns}
        kept = {k: v for k, v in values.items() if k in columns}
        key = connection.execute(meta.tables[table].insert().values(kept)).inserted_primary_key
        assert key is not None
        return key[0]

    manifest = fixture.manifest
    insert(
        "run_groups",
        {
            "id": manifest.run_group_id,
            "status": manifest.status.value,
            "created_at": manifest.created_at,
            "updated_at": manifest.updated_at,
            "finished_at": manifest.finished_at,
            "provider_kind": "openai",
            "base_url": None,
            "model": manifest.provider.model,
            "summary_model": manifest.provider.summary_model,
            "temperature": 0.0,
            "seed": manifest.seed,
            "repeats": manifest.repeats,
            "strategies": manifest.strategies,
            "protection_modes": manifest.protection_modes,
            "suite_sha256": manifest.hashes.suite_sha256,
            "harness_sha256": manifest.hashes.harness_sha256,
            "planned": 10,
            "finished": 10,
            "succeeded": 1,
            "failed": 1,
            "manifest": {"note": "hand-inserted"},
            "source_path": None,
            "ingested_at": "2026-01-01T00:00:00Z",
        },
    )
    for labelled in fixture.episodes:
        row = episode_row(labelled.record, None)
        values = {c.key: getattr(row, c.key) for c in Base.metadata.tables["episodes"].columns if c.key != "id"}
        # as the versions before migration 0005 stored it: a failed trial with its graders' findings
        values.update({name: getattr(labelled.record.verdict, name) for name in VERDICT_COLUMNS})
        episode_id = insert("episodes", values)
        children: list[tuple[list[Any], str]] = [
            (row.steps, "steps"),
            (row.tool_events, "tool_events"),
            (row.mutations, "hidden_mutations"),
        ]
        for items, table in children:
            for item in items:
                keys = [c.key for c in Base.metadata.tables[table].columns if c.key != "id"]
                insert(table, {**{k: getattr(item, k) for k in keys}, "episode_id": episode_id})
    connection.commit()
    return len(fixture.episodes)


def test_migrations_ship_with_the_package() -> None:
    assert (migrations_dir() / "env.py").is_file()
    assert revisions() == ["0001", "0002", "0003", "0004", "0005"]
    assert head_revision() == "0005"


def test_fresh_database_is_created_at_head_with_sqlite_tuning(sqlite_url: str) -> None:
    report = upgrade_database(sqlite_url)
    assert (report.found, report.before, report.after) == ("fresh", None, "0005")
    assert Path(sqlite_url.removeprefix("sqlite:///")).is_file()
    store = Store.open(sqlite_url)
    assert store.upgrade is not None and not store.upgrade.changed  # already at head: nothing replayed
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar_one() >= 1000
        tables = set(inspect(connection).get_table_names())
    store.close()
    assert {"run_groups", "episodes", "steps", "tool_events", "hidden_mutations", "proxy_traces"} <= tables
    assert current_revision(create_engine(sqlite_url)) == "0005"


def test_the_orm_models_match_the_migrations(sqlite_url: str) -> None:
    upgrade_database(sqlite_url)
    engine = create_engine(sqlite_url)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_alembic_less_database_from_the_first_revision_keeps_its_rows(sqlite_url: str, mock_fixture: Fixture) -> None:
    _migrate_to(sqlite_url, "0001", keep_version_table=False)
    engine = create_engine(sqlite_url)
    with engine.connect() as connection:
        inserted = _insert_rows(connection, mock_fixture)
        assert "alembic_version" not in inspect(connection).get_table_names()
        assert "failure_mode" not in {c["name"] for c in inspect(connection).get_columns("episodes")}
    engine.dispose()
    steps_before = _count(sqlite_url, "steps")
    events_before = _count(sqlite_url, "tool_events")
    mutations_before = _count(sqlite_url, "hidden_mutations")

    report = upgrade_database(sqlite_url)

    assert (report.found, report.before, report.after) == ("unversioned", "0001", "0005")
    assert _count(sqlite_url, "episodes") == inserted
    assert (_count(sqlite_url, "steps"), _count(sqlite_url, "tool_events")) == (steps_before, events_before)
    assert _count(sqlite_url, "hidden_mutations") == mutations_before > 0
    with create_engine(sqlite_url).connect() as connection:
        columns = {c["name"] for c in inspect(connection).get_columns("episodes")}
        assert {"failure_mode", "failure_cause"} <= columns
        # migration 0005: a failed trial's verdict columns are null, every other episode keeps its verdict
        rows = connection.execute(text("SELECT failed, end_state, stale_action_count FROM episodes")).all()
        assert {(bool(f), e is None, c is None) for f, e, c in rows} == {(True, True, True), (False, False, False)}
        assert "ix_episodes_failure_mode" in {i["name"] for i in inspect(connection).get_indexes("episodes")}
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "0005"
    assert upgrade_database(sqlite_url).found == "versioned"  # and a second start is a no-op


@pytest.mark.slow
def test_re_import_after_upgrade_fills_in_failure_modes(sqlite_url: str, mock_fixture: Fixture, mock_run: Path) -> None:
    _migrate_to(sqlite_url, "0001", keep_version_table=False)
    engine = create_engine(sqlite_url)
    with engine.connect() as connection:
        _insert_rows(connection, mock_fixture)
    engine.dispose()
    store = Store.open(sqlite_url)
    report = store.import_run(RunDirectory(mock_run))
    assert (report.added, report.updated, report.unchanged) == (0, 0, 10)  # same records: nothing replaced
    from contextdelta.store import EpisodeRow

    with store.read_session() as session:
        modes = dict(session.execute(select(EpisodeRow.run_id, EpisodeRow.failure_mode)).all())
    store.close()
    assert modes == {e.record.run_id: e.failure_mode for e in mock_fixture.episodes}


def test_database_at_the_first_revision_is_upgraded_to_head(sqlite_url: str, mock_fixture: Fixture) -> None:
    _migrate_to(sqlite_url, "0001")
    engine = create_engine(sqlite_url)
    with engine.connect() as connection:
        inserted = _insert_rows(connection, mock_fixture)
    assert current_revision(engine) == "0001"
    engine.dispose()

    report = upgrade_database(sqlite_url)

    assert (report.found, report.before, report.after) == ("versioned", "0001", "0005")
    assert _count(sqlite_url, "episodes") == inserted
    with create_engine(sqlite_url).connect() as connection:
        assert "first_byte_s" in {c["name"] for c in inspect(connection).get_columns("proxy_traces")}


def test_head_tables_made_without_alembic_are_stamped_not_replayed(sqlite_url: str, mock_run: Path) -> None:
    Path(sqlite_url.removeprefix("sqlite:///")).parent.mkdir(parents=True)
    engine = create_engine(sqlite_url)
    Base.metadata.create_all(engine)
    store = Store(create_store_engine(sqlite_url))
    store.import_run(RunDirectory(mock_run))
    store.close()
    report = upgrade_database(sqlite_url)
    assert (report.found, report.before, report.after) == ("unversioned", "0005", "0005")
    assert _count(sqlite_url, "episodes") == 10


def test_foreign_tables_without_a_version_table_are_refused(sqlite_url: str) -> None:
    Path(sqlite_url.removeprefix("sqlite:///")).parent.mkdir(parents=True)
    engine = create_engine(sqlite_url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE episodes (id INTEGER PRIMARY KEY, something TEXT)"))
    with pytest.raises(StoreError, match="match no known revision"):
        upgrade_database(sqlite_url)


def test_a_newer_revision_than_this_code_knows_is_a_clear_error(sqlite_url: str) -> None:
    upgrade_database(sqlite_url)
    engine = create_engine(sqlite_url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(StoreError, match="does not know"):
        upgrade_database(sqlite_url)


def test_counting_helper_agrees_with_the_store(sqlite_url: str, mock_run: Path) -> None:
    store = Store.open(sqlite_url)
    store.import_run(mock_run)
    from contextdelta.store import EpisodeRow

    with store.read_session() as session:
        assert session.execute(select(func.count()).select_from(EpisodeRow)).scalar_one() == store.episode_count()
    store.close()


def test_a_store_in_a_folder_nothing_can_write_names_the_folder_not_a_lock_file() -> None:
    # /proc refuses new files even to root (a read-only folder does not)
    with pytest.raises(StoreError) as raised:
        upgrade_database("sqlite:////proc/contextdelta-store.db")
    assert str(raised.value) == (
        "cannot open the trace store sqlite:////proc/contextdelta-store.db: cannot write in its folder /proc (No "
        "such file or directory); set --database-url or CONTEXTDELTA_DATABASE_URL to a SQLite file in a writable "
        "folder"
    )


def test_a_file_that_is_not_a_database_is_named_left_as_it_is_and_the_fix_said(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as raised:
        upgrade_database(f"sqlite:///{path}")
    assert str(raised.value) == (
        f"cannot open the trace store sqlite:///{path}: DatabaseError: file is not a database; set --database-url or "
        "CONTEXTDELTA_DATABASE_URL to the trace store or to a new file (this one is left as it is)"
    )
    assert path.read_text() == "my notes, not a database\n" * 200
