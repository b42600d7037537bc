"""The store on PostgreSQL (psycopg): migrations and an import against a real server.

The server comes from ``CONTEXTDELTA_TEST_POSTGRES_URL`` (default
``postgresql+psycopg://contextdelta:contextdelta@127.0.0.1:5432/contextdelta_test``; ``.ci/run`` starts one).
Outside CI the test skips, saying why, when no server answers; in CI (``CI`` set) it fails instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from contextdelta.store import Store, upgrade_database

DEFAULT_URL = "postgresql+psycopg://contextdelta:contextdelta@127.0.0.1:5432/contextdelta_test"

pytestmark = pytest.mark.postgres


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty database on the server, dropped afterwards."""
    base = os.environ.get("CONTEXTDELTA_TEST_POSTGRES_URL", DEFAULT_URL)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'contextdelta[postgres]')")
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    name = f"contextdelta_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        admin.dispose()
        _unavailable(
            f"no PostgreSQL server at {make_url(base).render_as_string(hide_password=True)}: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        )
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must start PostgreSQL: see .ci/run)")
    pytest.skip(f"{reason}; set CONTEXTDELTA_TEST_POSTGRES_URL to run this test")


def test_migrations_and_import_on_postgres(postgres_url: str, mock_run: Path) -> None:
    report = upgrade_database(postgres_url)
    assert (report.found, report.before, report.after) == ("fresh", None, "0005")
    assert upgrade_database(postgres_url).found == "versioned"
    engine = create_engine(postgres_url)
    with engine.connect() as connection:
        assert "ix_episodes_failure_mode" in {i["name"] for i in inspect(connection).get_indexes("episodes")}
    engine.dispose()

    with Store.open(postgres_url) as store:
        first = store.import_run(mock_run)
        second = store.import_run(mock_run)
        assert (first.added, second.unchanged) == (10, 10)
        assert store.episode_count("mock-pipeline") == 10


def test_import_repairs_edited_rows_on_postgres(postgres_url: str, mock_run: Path) -> None:
    """Rows read back from PostgreSQL (JSON parsed by psycopg, double precision, booleans) equal the ones a record
    gives: a second import repairs nothing; rows edited with SQL, jsonb-reordered JSON aside, are repaired."""
    grinder = "order-grinder-refund.full_history.unprotected.r1"
    desk = "order-desk-cancel.full_history.freshness_contract.r1"
    staging = "cfg-staging-access.full_history.unprotected.r1"
    with Store.open(postgres_url) as store:
        store.import_run(mock_run)
        assert (store.import_run(mock_run).repaired, store.import_run(mock_run).unchanged) == (0, 10)
        with store.engine.begin() as connection:
            connection.execute(text("UPDATE episodes SET success = NOT success WHERE run_id = :r"), {"r": desk})
            connection.execute(
                text(
                    "UPDATE steps SET messages = messages::jsonb::json WHERE episode_id IN "
                    "(SELECT id FROM episodes WHERE run_id = :r)"
                ),
                {"r": staging},
            )  # the same JSON with its keys reordered and respaced by jsonb: not a difference
            connection.execute(
                text(
                    "UPDATE tool_events SET arguments = '{\"order_id\": 1}' WHERE seq = 0 AND episode_id = "
                    "(SELECT id FROM episodes WHERE run_id = :r)"
                ),
                {"r": grinder},
            )
        report = store.import_run(mock_run)
        assert (report.added, report.updated, report.repaired, report.unchanged) == (0, 0, 2, 8)
        assert report.repairs == [f"{grinder}: tool_events[seq=0].arguments", f"{desk}: episodes.success"]
        assert store.import_run(mock_run).unchanged == 10
