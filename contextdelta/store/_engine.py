"""Engines for the trace store: any SQLAlchemy URL; SQLite tuned for several writers.

SQLite gets WAL (readers never block the writer), foreign keys on, and a busy timeout. Write transactions
start with ``BEGIN IMMEDIATE``: a deferred transaction that reads first and then writes cannot wait for a
concurrent writer (SQLite answers ``database is locked`` at once instead of calling the busy handler), while an
immediate one takes the write lock up front and waits up to the busy timeout.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from contextdelta.canonical import json_dumps_function

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite writer waits for the write lock before failing."""
READ_ONLY = "contextdelta_read_only"
"""Execution option: begin a plain (deferred) transaction instead of ``BEGIN IMMEDIATE`` on SQLite."""


class StoreError(RuntimeError):
    """The trace store cannot be opened, migrated or written; the message says why (URLs are redacted)."""


class StoreUrlError(StoreError):
    """The store URL names something that is not a trace store (a file that is not a database, a folder): the
    user's setting is wrong, not the database; the message names the path and says how to fix it. The commands
    exit 2 on it, as on a malformed URL."""


def redact_database_url(url: str | URL) -> str:
    """The URL with its password hidden, safe for messages and logs."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except ArgumentError:
        return "<unparseable database URL>"
    return parsed.render_as_string(hide_password=True)


def is_sqlite(url: str | URL) -> bool:
    """Whether ``url`` names a SQLite database."""
    parsed = url if isinstance(url, URL) else make_url(url)
    return parsed.get_backend_name() == "sqlite"


def sqlite_path(url: str | URL) -> Path | None:
    """The database file of a SQLite URL; None for an in-memory database or another backend."""
    parsed = url if isinstance(url, URL) else make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    if parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


_encode = json_dumps_function()


def json_dumps(value: Any) -> str:
    """``json.dumps(value)`` (what SQLAlchemy writes a JSON column with), with the C encoder built once instead of on
    every value: a step's messages, tool calls and arguments are several JSON values per row. A module function,
    not the closure `json_dumps_function` returns: psycopg warns about closures ("may cause a resource leak")."""
    return _encode(value)


def database_problem(exc: BaseException) -> str:
    """One line saying what is wrong with a database, without SQLAlchemy's statement and parameters."""
    original = getattr(exc, "orig", None)
    text = str(original if original is not None else exc).strip().splitlines()
    return f"{type(original if original is not None else exc).__name__}: {text[0] if text else 'no detail'}"


def create_store_engine(url: str | URL, *, foreign_keys: bool = True, **kwargs: Any) -> Engine:
    """An engine for ``url``. SQLite: parent folders are created, WAL, foreign keys, busy timeout and
    ``BEGIN IMMEDIATE`` for writes; PostgreSQL and others: pre-ping pooled connections.

    ``foreign_keys=False`` is for migrations only: SQLite's batch mode recreates a table by copying it and
    dropping the old one, and with foreign keys on that drop would cascade into the child tables.
    """
    kwargs.setdefault("json_serializer", json_dumps)
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"CONTEXTDELTA_DATABASE_URL is not a database URL: {exc}") from None
    if parsed.get_backend_name() != "sqlite":
        try:
            return create_engine(parsed, pool_pre_ping=True, **kwargs)
        except (ImportError, ArgumentError) as exc:  # ArgumentError: a dialect SQLAlchemy does not know
            raise StoreError(
                f"no driver for {redact_database_url(parsed)}: {exc}. For PostgreSQL install the extra: "
                "pip install 'contextdelta[postgres]' and use postgresql+psycopg://..."
            ) from None
    path = sqlite_path(parsed)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder of the trace store {redact_database_url(parsed)}: {exc}; set "
                "CONTEXTDELTA_DATABASE_URL (or --database-url) or CONTEXTDELTA_RESULTS_DIR to a usable place"
            ) from None
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault("timeout", BUSY_TIMEOUT_MS / 1000)
    connect_args.setdefault("check_same_thread", False)
    engine = create_engine(parsed, connect_args=connect_args, **kwargs)
    _tune_sqlite(engine, in_memory=path is None, foreign_keys=foreign_keys)
    return engine


def _tune_sqlite(engine: Engine, *, in_memory: bool, foreign_keys: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        # Take transaction control from the sqlite3 module so that "begin" below decides how to begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(READ_ONLY):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
