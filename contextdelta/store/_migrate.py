"""Schema migrations: find the Alembic scripts, recognise what a database holds, and upgrade it to head.

Three starting points are upgraded without replaying tables that exist and without losing rows:

* a fresh database (none of the store's tables): every revision runs;
* a database whose tables were made without Alembic (no ``alembic_version`` table, e.g. by
  ``Base.metadata.create_all`` or an older tool): its tables and columns are compared with the schema each
  revision produces (computed by running the migrations on an in-memory SQLite database, so the revisions stay
  the one definition of the schema); the newest revision it fully contains is stamped, then the rest run;
* a database at an older revision: the missing revisions run.

The scripts live in ``migrations/`` at the repository root (SPEC section 1). A source checkout and an editable
install find them next to the package; a wheel installs them under ``<prefix>/share/contextdelta/migrations``
(pyproject ``data-files``).
"""

from __future__ import annotations

import contextlib
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, Engine, create_engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool

from contextdelta.store._engine import (
    READ_ONLY,
    StoreError,
    StoreUrlError,
    create_store_engine,
    database_problem,
    redact_database_url,
    sqlite_path,
)
from contextdelta.store._models import Base

VERSION_TABLE = "alembic_version"
STORE_TABLES: frozenset[str] = frozenset(Base.metadata.tables)
"""Every table the store owns at head."""


def migrations_dir() -> Path:
    """The folder holding Alembic's ``env.py`` and ``versions/``; StoreError when it cannot be found."""
    candidates = [
        Path(__file__).resolve().parents[2] / "migrations",  # source checkout, editable install
        Path(sys.prefix) / "share" / "contextdelta" / "migrations",  # wheel (data-files)
    ]
    for candidate in candidates:
        if (candidate / "env.py").is_file() and (candidate / "versions").is_dir():
            return candidate
    raise StoreError("cannot find the migrations folder; looked in: " + ", ".join(str(c) for c in candidates))


def alembic_config(connection: Connection | None = None) -> Config:
    """A programmatic Alembic configuration (no ``alembic.ini`` needed); ``connection`` is the one to migrate."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def revisions() -> list[str]:
    """Every revision id, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def head_revision() -> str:
    """The newest revision id."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise StoreError("the migrations folder holds no revision")
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is stamped with; None when it has no version table (or an empty one)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


@dataclass(frozen=True)
class UpgradeReport:
    """What :func:`upgrade_database` found and did."""

    found: str
    """``fresh`` (no store tables), ``unversioned`` (tables without a version table) or ``versioned``."""
    before: str | None
    """The revision before the upgrade (for ``unversioned``: the revision its tables were recognised as)."""
    after: str
    """The revision after the upgrade (always head)."""

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _tables(connection: Connection) -> dict[str, set[str]]:
    inspector = inspect(connection)
    return {name: {c["name"] for c in inspector.get_columns(name)} for name in inspector.get_table_names()}


_signatures: dict[str, dict[str, set[str]]] | None = None


def revision_signatures() -> dict[str, dict[str, set[str]]]:
    """Per revision, the store's tables and their columns once that revision has run (from an in-memory run)."""
    global _signatures
    if _signatures is None:
        engine = create_engine("sqlite://", poolclass=StaticPool)
        found: dict[str, dict[str, set[str]]] = {}
        with engine.connect() as connection:
            for revision in revisions():
                command.upgrade(alembic_config(connection), revision)
                connection.commit()
                found[revision] = {n: c for n, c in _tables(connection).items() if n != VERSION_TABLE}
        engine.dispose()
        _signatures = found
    return _signatures


def recognise_revision(tables: dict[str, set[str]]) -> str | None:
    """The newest revision whose every table and column ``tables`` contains; None when none matches."""
    for revision, signature in reversed(revision_signatures().items()):
        if all(name in tables and columns <= tables[name] for name, columns in signature.items()):
            return revision
    return None


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """One migrator at a time: a lock file beside a SQLite database, an advisory lock on PostgreSQL."""
    path = sqlite_path(engine.url)
    if path is not None:
        try:
            import fcntl
        except ImportError:  # not POSIX: no cross-process lock
            yield
            return
        lock = path.with_name(path.name + ".migrate.lock")
        try:
            opened = lock.open("a")
        except OSError as exc:  # the store could not be created or written there either
            raise StoreError(
                f"cannot open the trace store {redact_database_url(engine.url)}: cannot write in its folder "
                f"{path.parent} ({exc.strerror or type(exc).__name__}); set --database-url or "
                "CONTEXTDELTA_DATABASE_URL to a SQLite file in a writable folder"
            ) from None
        with opened as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return
    if engine.dialect.name == "postgresql":
        key = zlib.crc32(b"contextdelta-migrations")
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            connection.commit()
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                connection.commit()
        return
    yield


def upgrade_database(target: Engine | str) -> UpgradeReport:
    """Bring the database at ``target`` (an engine or a URL) to the head revision; see the module docstring."""
    if isinstance(target, Engine) and target.dialect.name == "sqlite" and sqlite_path(target.url) is None:
        engine = target  # in-memory: a second engine would be a different database
    else:
        engine = create_store_engine(target.url if isinstance(target, Engine) else target, foreign_keys=False)
    where = redact_database_url(engine.url)
    path = sqlite_path(engine.url)
    if path is not None and path.is_dir():
        if engine is not target:
            engine.dispose()
        raise StoreUrlError(
            f"cannot open the trace store {where}: {path} is a folder, not a database file; set --database-url or "
            "CONTEXTDELTA_DATABASE_URL to a file in it, e.g. "
            f"sqlite:///{path / 'contextdelta.db'} (the folder is left as it is)"
        )
    try:
        with _migration_lock(engine):
            head = head_revision()
            # a plain read: another writer's transaction (a run storing episodes) must not make it wait
            with engine.execution_options(**{READ_ONLY: True}).connect() as connection:
                tables = _tables(connection)
                before = MigrationContext.configure(connection).get_current_revision()
                connection.rollback()
            ours = STORE_TABLES & set(tables)
            if before is not None:
                found = "versioned"
                if before not in revisions():
                    raise StoreError(
                        f"{where} is at revision {before!r}, which this version of contextdelta does not know "
                        f"(its head is {head!r}); upgrade contextdelta"
                    )
            elif not ours:
                found = "fresh"
            else:
                found = "unversioned"
                before = recognise_revision(tables)
                if before is None:
                    raise StoreError(
                        f"{where} holds trace-store tables ({', '.join(sorted(ours))}) without a version table, and "
                        "they match no known revision; refusing to touch them"
                    )
                with engine.connect() as connection:
                    command.stamp(alembic_config(connection), before)
                    connection.commit()
            if before != head:
                with engine.connect() as connection:
                    command.upgrade(alembic_config(connection), "head")
                    connection.commit()
            return UpgradeReport(found=found, before=before, after=head)
    except CommandError as exc:
        raise StoreError(f"migrating {where} failed: {exc}") from exc
    except (SQLAlchemyError, OSError) as exc:  # not a database, unreadable, or the server is down
        problem = database_problem(exc)
        if "file is not a database" in problem:  # SQLite: some other file at the store's path, the user's mistake
            raise StoreUrlError(
                f"cannot open the trace store {where}: {problem}; set --database-url or CONTEXTDELTA_DATABASE_URL "
                "to the trace store or to a new file (this one is left as it is)"
            ) from None
        raise StoreError(f"cannot open the trace store {where}: {problem}") from None
    finally:
        if engine is not target:
            engine.dispose()
