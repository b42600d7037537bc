"""The trace store: a SQLAlchemy database holding run groups, episodes, steps, tool events, hidden mutations and
the recording proxy's request/response pairs. SQLite by default (``CONTEXTDELTA_DATABASE_URL``), any SQLAlchemy
URL works (PostgreSQL through psycopg). Migrations (Alembic, ``migrations/``) apply when the store is opened.

    store = open_store()                      # migrates to head
    store.import_run(Path("results/RUN_ID"))  # idempotent
"""

from contextdelta.store._engine import StoreError, StoreUrlError, create_store_engine, redact_database_url
from contextdelta.store._ingest import Attributor, FailureAttribution, failure_attribution, record_sha256
from contextdelta.store._migrate import (
    UpgradeReport,
    alembic_config,
    current_revision,
    head_revision,
    migrations_dir,
    recognise_revision,
    revisions,
    upgrade_database,
)
from contextdelta.store._models import (
    Base,
    EpisodeRow,
    MutationRow,
    ProxyTraceRow,
    RunGroupRow,
    StepRow,
    ToolEventRow,
)
from contextdelta.store._store import ImportReport, ProxyTrace, Store, StoreRecorder, StoreWriter, open_store

__all__ = [
    "Attributor",
    "Base",
    "EpisodeRow",
    "FailureAttribution",
    "ImportReport",
    "MutationRow",
    "ProxyTrace",
    "ProxyTraceRow",
    "RunGroupRow",
    "StepRow",
    "Store",
    "StoreError",
    "StoreRecorder",
    "StoreUrlError",
    "StoreWriter",
    "ToolEventRow",
    "UpgradeReport",
    "alembic_config",
    "create_store_engine",
    "current_revision",
    "failure_attribution",
    "head_revision",
    "migrations_dir",
    "open_store",
    "recognise_revision",
    "record_sha256",
    "redact_database_url",
    "revisions",
    "upgrade_database",
]
