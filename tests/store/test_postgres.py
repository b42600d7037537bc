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
