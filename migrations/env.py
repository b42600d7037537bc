"""Alembic environment of the trace store.

``contextdelta db upgrade`` (and every command that opens the store) runs the migrations programmatically and
hands over its connection in ``config.attributes["connection"]``. The ``alembic`` command line works too, for
writing new revisions: ``alembic -c migrations/alembic.ini revision -m "..."`` (the database URL comes from
``-x url=...``, else ``CONTEXTDELTA_DATABASE_URL`` / ``.env``).

``render_as_batch`` makes ALTERs work on SQLite (a table is rebuilt by copy); the store opens migration
connections with foreign keys off so that a rebuild never cascades into child tables.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from contextdelta.settings import Settings
from contextdelta.store._engine import create_store_engine
from contextdelta.store._models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or Settings().database_url
    )


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    """``alembic upgrade --sql``: print the SQL instead of running it."""
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_store_engine(_url(), foreign_keys=False)
    try:
        with engine.connect() as own:
            _run(own)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
