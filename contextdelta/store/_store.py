"""The trace store: open (and migrate) a database, ingest run directories and episodes, record proxy traces."""

from __future__ import annotations

import contextlib
import logging
import queue
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event, func, select
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from contextdelta._words import plural
from contextdelta.rundir import EpisodeRecord, RunDirectory, RunEnd, RunManifest, RunStart
from contextdelta.settings import load_settings
from contextdelta.store._engine import (
    READ_ONLY,
    StoreError,
    create_store_engine,
    database_problem,
    redact_database_url,
    sqlite_path,
)
from contextdelta.store._ingest import (
    Attributor,
    EpisodeValues,
    delete_episodes,
    episode_values,
    failure_attribution,
    first_difference,
    record_sha256,
    same_value,
    stored_episode_values,
    upsert_episode,
    upsert_run_group,
)
from contextdelta.store._migrate import UpgradeReport, upgrade_database
from contextdelta.store._models import EpisodeRow, ProxyTraceRow

log = logging.getLogger(__name__)

T = TypeVar("T")
WRITE_ATTEMPTS = 5
REPAIRS_NAMED = 3
"""How many repaired episodes an import report names (with their first differing column)."""
CHECK_CHUNK = 64
"""Episodes whose stored rows are read back and compared per query."""


@dataclass
class ImportReport:
    """What importing one run directory did."""

    run_group_id: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    repaired: int = 0
    """Episodes whose record was stored but whose rows differed from it (edited in the database, or written by a
    faulty version): replaced by the record's rows."""
    repairs: list[str] = field(default_factory=list)
    """``RUN_ID: table.column`` of each repaired episode's first differing column, in order."""
    removed: list[str] = field(default_factory=list)
    """Run ids of the episodes the store held for the run group that its run directory does not (inserted by hand):
    deleted."""

    @property
    def total(self) -> int:
        return self.added + self.updated + self.repaired + self.unchanged

    def counts(self) -> str:
        """``N added, N updated, N repaired, N unchanged`` (then ``, N removed`` when some were)."""
        text = f"{self.added} added, {self.updated} updated, {self.repaired} repaired, {self.unchanged} unchanged"
        return text + (f", {len(self.removed)} removed" if self.removed else "")

    def repairs_named(self) -> str | None:
        """The first repaired episodes with their first differing column, and the first removed ones (None: none
        repaired or removed)."""
        parts = []
        if self.repairs:
            more = len(self.repairs) - REPAIRS_NAMED
            shown = "; ".join(self.repairs[:REPAIRS_NAMED]) + (f"; and {more} more" if more > 0 else "")
            parts.append(
                f"repaired {plural(len(self.repairs), 'episode')} whose rows differed from raw_runs.jsonl: {shown}"
            )
        if self.removed:
            more = len(self.removed) - REPAIRS_NAMED
            shown = ", ".join(self.removed[:REPAIRS_NAMED]) + (f" and {more} more" if more > 0 else "")
            parts.append(
                f"removed {plural(len(self.removed), 'episode')} of the run group not in raw_runs.jsonl: {shown}"
            )
        return "; ".join(parts) or None


@dataclass
class ProxyTrace:
    """One request/response pair seen by the recording proxy, already redacted."""

    created_at: str
    method: str
    path: str
    upstream: str
    status_code: int
    latency_s: float
    stream: bool = False
    model: str | None = None
    first_byte_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    request: Any = None
    response: Any = None
    response_text: str | None = None
    error: str | None = None


EpisodeKey = tuple[str, tuple[str, ...]]
"""An episode as stored: the SHA-256 of its current record and of each attempt it superseded, in order."""


def episode_key(record: EpisodeRecord, superseded: Sequence[EpisodeRecord]) -> EpisodeKey:
    return record_sha256(record), tuple(record_sha256(earlier) for earlier in superseded)


def episodes_of(records: Sequence[EpisodeRecord]) -> list[tuple[EpisodeRecord, list[EpisodeRecord]]]:
    """Every attempt of a run group's episodes as (current record, the attempts it superseded), by run id: the
    current record is the highest attempt."""
    attempts: dict[str, list[EpisodeRecord]] = {}
    for record in sorted(records, key=lambda r: r.attempt):
        attempts.setdefault(record.run_id, []).append(record)
    return [(every[-1], every[:-1]) for every in attempts.values()]


class _Pin(threading.local):
    connection: Connection | None = None


class DatabaseWatch:
    """Whether any connection but one has committed to a SQLite database since the watch began: SQLite's ``PRAGMA
    data_version``, read on that connection, changes when another connection commits and never for the
    connection's own commits."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.version = self._read()

    def _read(self) -> int:
        raw: Any = self.connection.connection.dbapi_connection
        return int(raw.execute("PRAGMA data_version").fetchone()[0])

    def untouched(self) -> bool:
        """True when nothing but the watched connection has committed since the watch began (False when the
        database cannot say)."""
        try:
            return self._read() == self.version
        except Exception:  # a connection that broke: nothing can be vouched for
            return False


class Store:
    """A trace-store database. :meth:`open` migrates it to head first (SPEC: migrations apply at startup)."""

    def __init__(self, engine: Engine, *, attributor: Attributor | None = None) -> None:
        self.engine = engine
        self.attributor = attributor
        self._pin = _Pin()
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._reader = sessionmaker(engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False)
        self.upgrade: UpgradeReport | None = None

    @classmethod
    def open(
        cls, url: str | None = None, *, upgrade: bool = True, attributor: Attributor | None = failure_attribution
    ) -> Store:
        """Open the store at ``url`` (default: ``CONTEXTDELTA_DATABASE_URL``), migrated to head unless told not to."""
        url = url or load_settings().database_url_for()
        report = upgrade_database(url) if upgrade else None
        try:
            store = cls(create_store_engine(url), attributor=attributor)
        except SQLAlchemyError as exc:
            raise StoreError(
                f"cannot open the trace store {redact_database_url(url)}: {database_problem(exc)}"
            ) from None
        store.upgrade = report
        return store

    @property
    def url(self) -> str:
        """The database URL with its password hidden."""
        return redact_database_url(self.engine.url)

    def close(self) -> None:
        self.engine.dispose()

    def recreate_if_deleted(self) -> bool:
        """When the SQLite file was deleted while open (its connections go on writing to the unlinked file, which
        nothing can read), close them and create the store anew at the same path, migrated to head; True when it
        did. Other databases: False."""
        path = sqlite_path(self.engine.url)
        if path is None or path.exists():
            return False
        self.engine.dispose()
        upgrade_database(self.engine.url.render_as_string(hide_password=False))
        return True

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- sessions -----------------------------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite), committed on success; on the calling thread's pinned
        connection when it has one (:meth:`pin`)."""
        pinned = self._pin.connection
        if pinned is None:
            with self._sessions.begin() as session:
                yield session
            return
        with self._sessions(bind=pinned) as session, session.begin():
            yield session

    def pin(self) -> DatabaseWatch | None:
        """Make every write transaction of the calling thread go through one connection, and watch the database
        through it (:class:`DatabaseWatch`): while the watch says untouched, the database holds exactly what that
        thread wrote on top of what it held before. SQLite files only (elsewhere None, and nothing is pinned)."""
        self.unpin()
        if sqlite_path(self.engine.url) is None:
            return None
        connection = self.engine.connect()
        try:
            watch = DatabaseWatch(connection)
        except Exception:
            connection.close()
            raise
        self._pin.connection = connection
        return watch

    def unpin(self) -> None:
        """Release the calling thread's pinned connection (:meth:`pin`), if any."""
        pinned, self._pin.connection = self._pin.connection, None
        if pinned is not None:
            with contextlib.suppress(Exception):  # a connection to a deleted or broken file: nothing to keep
                pinned.close()

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A read-only session that never takes SQLite's write lock."""
        with self._reader() as session:
            yield session

    def _write(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` in a write transaction, retrying a locked database or a lost insert race."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self.session() as session:
                    return work(session)
            except (OperationalError, IntegrityError) as exc:
                retryable = isinstance(exc, IntegrityError) or "locked" in str(exc).lower() or "busy" in str(exc)
                if not retryable or attempt == WRITE_ATTEMPTS:
                    raise
                log.debug("store write attempt %d failed (%s); retrying", attempt, type(exc).__name__)
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    # ---- ingestion ----------------------------------------------------------------------------------------

    def ingest_manifest(self, manifest: RunManifest, source_path: Path | str | None = None) -> None:
        """Insert or refresh one run group from its manifest."""
        path = str(source_path) if source_path is not None else None
        self._write(lambda s: upsert_run_group(s, manifest, path))

    def ingest_episode(self, record: EpisodeRecord, superseded: Sequence[EpisodeRecord] = ()) -> str:
        """Insert one episode's current record (its run group must exist), with the earlier attempts it superseded
        (``--retry-failed``); ``added``, ``updated`` or ``unchanged``."""
        return self.ingest_episodes([(record, superseded)])[0]

    def ingest_episodes(self, episodes: Sequence[tuple[EpisodeRecord, Sequence[EpisodeRecord]]]) -> list[str]:
        """:meth:`ingest_episode` of each (record, superseded) pair, in one transaction."""
        return self._write(lambda s: [upsert_episode(s, r, self.attributor, earlier) for r, earlier in episodes])

    def import_run(self, directory: RunDirectory | Path) -> ImportReport:
        """Load a run directory: its manifest and every episode of ``raw_runs.jsonl`` (each one's current record,
        with its superseded attempts). Idempotent; an episode whose stored rows differ from its record (edited in
        the database) is replaced and counted as repaired. StoreError, in one line, when the database fails (a store
        changed outside contextdelta: a table dropped, a column altered); the run directory is only read."""
        directory = directory if isinstance(directory, RunDirectory) else RunDirectory(directory)
        manifest = directory.read_manifest()
        attempts = directory.read_attempts()
        try:
            self.ingest_manifest(manifest, directory.path.resolve())
            episodes = [(record, attempts.attempts_of(record.run_id)[:-1]) for record in attempts.current]
            return self._sync(manifest.run_group_id, episodes, attribute_unchanged=True)
        except SQLAlchemyError as exc:
            raise StoreError(
                f"cannot import {directory.path} into the trace store {self.url}: {database_problem(exc)}; the run "
                "directory is unchanged (a store whose tables were changed outside contextdelta is not migrated back: "
                "set --database-url or CONTEXTDELTA_DATABASE_URL to a new file and import again)"
            ) from None

    def episode_digests(self, run_group_id: str) -> dict[str, str]:
        """Run id -> record SHA-256 of every episode the store holds for a run group."""
        query = select(EpisodeRow.run_id, EpisodeRow.record_sha256).where(EpisodeRow.run_group_id == run_group_id)
        with self.read_session() as session:
            return {run_id: digest for run_id, digest in session.execute(query)}

    def reconcile(
        self, run_group_id: str, records: Sequence[EpisodeRecord], *, trusted: Mapping[str, EpisodeKey] | None = None
    ) -> ImportReport:
        """Make the store hold exactly ``records`` of the run group as recorded (the run directory's episodes, every
        attempt): each episode's current record (its highest attempt) with the attempts it superseded; each one
        missing is inserted, each one whose record or superseded attempts differ replaced, each one whose rows
        (episode, steps, tool events, mutations) differ from those its record gives repaired, none duplicated (the
        store keys an episode by run group and run id). What a killed writer thread never wrote is thereby written
        on resume and when the run ends.

        ``trusted``: run id -> :func:`episode_key` of episodes known to be stored exactly as that key's records
        give them (written by a writer whose :class:`DatabaseWatch` says no one else has committed since); one
        whose key matches is counted unchanged without reading its rows back."""
        return self._sync(run_group_id, episodes_of(records), trusted=trusted)

    def _sync(
        self,
        run_group_id: str,
        episodes: Sequence[tuple[EpisodeRecord, Sequence[EpisodeRecord]]],
        *,
        attribute_unchanged: bool = False,
        trusted: Mapping[str, EpisodeKey] | None = None,
    ) -> ImportReport:
        """Store each (current record, superseded attempts) pair of a run group unless the store holds exactly the
        rows it gives (compared column by column, ``first_difference``; a ``trusted`` one, :meth:`reconcile`, is
        not read back). ``attribute_unchanged``: an unchanged episode stored without a failure mode gets one (rows
        of an older revision)."""
        report = ImportReport(run_group_id)
        if trusted:
            unread = [(r, earlier) for r, earlier in episodes if trusted.get(r.run_id) != episode_key(r, earlier)]
            report.unchanged = len(episodes) - len(unread)
        else:
            unread = list(episodes)
        for start in range(0, len(unread), CHECK_CHUNK):
            chunk = unread[start : start + CHECK_CHUNK]
            with self.read_session() as session:
                held = stored_episode_values(session, run_group_id, [record.run_id for record, _ in chunk])
            for record, superseded in chunk:
                stored = held.get(record.run_id)
                difference = None
                if stored is not None:
                    expected = episode_values(record, None, record_sha256(record), superseded)
                    difference = first_difference(expected, stored)
                    if not _same_record(expected, stored) and not _only_keys_differ(expected, stored):
                        stored = None  # another record, or other superseded attempts: replaced as "updated"
                if stored is None:
                    outcome = self.ingest_episode(record, superseded)
                elif difference is not None:
                    self._write(partial(_replace_episode, record=record, superseded=superseded, store=self))
                    outcome = "repaired"
                    report.repairs.append(f"{record.run_id}: {difference}")
                elif attribute_unchanged:
                    outcome = self.ingest_episode(record, superseded)
                else:
                    outcome = "unchanged"
                setattr(report, outcome, getattr(report, outcome) + 1)
        recorded = {record.run_id for record, _ in episodes}
        strays = sorted(set(self.episode_digests(run_group_id)) - recorded)
        if strays:
            self._write(lambda session: delete_episodes(session, run_group_id, strays))
            report.removed = strays
        return report

    def record_proxy_trace(self, trace: ProxyTrace) -> int:
        """Store one proxy request/response pair; returns its row id."""

        def add(session: Session) -> int:
            row = ProxyTraceRow(**trace.__dict__)
            session.add(row)
            session.flush()
            return row.id

        return self._write(add)

    # ---- queries ------------------------------------------------------------------------------------------

    def episode_count(self, run_group_id: str | None = None) -> int:
        query = select(func.count()).select_from(EpisodeRow)
        if run_group_id is not None:
            query = query.where(EpisodeRow.run_group_id == run_group_id)
        with self.read_session() as session:
            return int(session.execute(query).scalar_one())

    def proxy_traces(self) -> list[ProxyTraceRow]:
        """Every recorded proxy pair, oldest first."""
        with self.read_session() as session:
            return list(session.scalars(select(ProxyTraceRow).order_by(ProxyTraceRow.id)))


def _same_record(expected: EpisodeValues, stored: EpisodeValues) -> bool:
    """Whether the stored episode row is of the same record and superseded attempts (else it is replaced as an
    updated record, not repaired)."""
    return all(same_value(expected[0][name], stored[0].get(name)) for name in ("record_sha256", "superseded_attempts"))


def _replace_episode(
    session: Session, *, record: EpisodeRecord, superseded: Sequence[EpisodeRecord], store: Store
) -> str:
    return upsert_episode(session, record, store.attributor, superseded, replace=True)


def _only_keys_differ(expected: EpisodeValues, stored: EpisodeValues) -> bool:
    """Whether the stored rows are those of the record but for its record hash or superseded attempts (edited in
    the database: a repair, not another record)."""
    episode = {k: v for k, v in expected[0].items() if k not in ("record_sha256", "superseded_attempts")}
    return first_difference((episode, expected[1], expected[2], expected[3]), stored) is None


def open_store(url: str | None = None, *, attributor: Attributor | None = failure_attribution) -> Store:
    """Open and migrate the store; what the CLI, the proxy and the dashboard call at startup."""
    return Store.open(url, attributor=attributor)


_STOP = object()
BATCH_EPISODES = 32
"""At most this many queued episodes are written in one transaction by the background writer."""
CLOSE_STALL_S = 10.0
"""How long closing a store writer (the end of a run) waits while none of its statements completes (a SQLite file
whose write lock another process holds: each write waits up to the 30 s busy timeout, five times): past it, the
run ends without the episodes not yet written and says how to import them. A writer that makes progress is waited
for up to ``StoreWriter.close``'s ``timeout_s`` (120 s) in all."""
IMPORT_LATER = "`contextdelta db import RUN_ID`"


@dataclass(frozen=True)
class _Episode:
    """A queued episode: its record and the attempts it supersedes."""

    record: EpisodeRecord
    superseded: tuple[EpisodeRecord, ...] = ()


@dataclass(frozen=True)
class _Reconcile:
    run_group_id: str
    records: tuple[EpisodeRecord, ...]


@dataclass
class StoreWriter:
    """Writes a running benchmark's manifest and episodes to the store from a background thread, in the order
    queued (so a run group exists before its episodes).

    The run directory stays the source of truth: a store failure is reported once (``on_error``) and never stops
    the run (the episodes can be loaded later with ``contextdelta db import``). Call :meth:`close` to drain the
    queue.
    """

    store: Store
    on_error: Callable[[str], None] = lambda message: None
    written: int = 0
    reconciled: int = 0
    """Episodes a reconciliation inserted or replaced (ones an earlier, killed session never stored)."""
    errors: list[str] = field(default_factory=list)
    _queue: queue.Queue[Any] = field(default_factory=queue.Queue)
    import_hint: str = IMPORT_LATER
    """The command that loads the run directory into the store later, named when the writer cannot finish."""
    _manifest: tuple[RunManifest, Path | None] | None = None
    """The last manifest written (the run group row to write again into a store created anew)."""
    _thread: threading.Thread | None = None
    _progress_at: float = 0.0
    """``time.monotonic()`` when a statement of the store's last completed (what closing measures a stall by)."""
    _watch: DatabaseWatch | None = None
    """The database as the writer thread's pinned connection sees it (SQLite): untouched while only it commits."""
    _trusted: dict[str, EpisodeKey] = field(default_factory=dict)
    """What this writer stored or checked itself, by run id: while ``_watch`` says untouched, these episodes' rows
    are the ones their records give, and reconciling does not read them back."""

    def start(self) -> StoreWriter:
        if not event.contains(self.store.engine, "after_cursor_execute", self._progressed):
            event.listen(self.store.engine, "after_cursor_execute", self._progressed)
        self._thread = threading.Thread(target=self._work, name="contextdelta-store-writer", daemon=True)
        self._thread.start()
        return self

    def _progressed(self, *args: Any) -> None:
        self._progress_at = time.monotonic()

    def episode(self, record: EpisodeRecord, superseded: Sequence[EpisodeRecord] = ()) -> None:
        """Queue one finished episode (with the earlier attempts it supersedes)."""
        self._queue.put(_Episode(record, tuple(superseded)))

    def manifest(self, manifest: RunManifest, path: Path | None = None) -> None:
        """Queue a manifest (the run group's row: status and counts)."""
        self._queue.put((manifest, path))

    def reconcile(self, run_group_id: str, records: Sequence[EpisodeRecord]) -> None:
        """Queue a reconciliation of the run group with ``records`` (:meth:`Store.reconcile`)."""
        self._queue.put(_Reconcile(run_group_id, tuple(records)))

    def close(self, timeout_s: float = 120.0, stall_s: float = CLOSE_STALL_S) -> None:
        """Write everything queued, then stop the thread. Waits while the writer's statements complete, for
        ``timeout_s`` at most, and no more than ``stall_s`` (``CLOSE_STALL_S``) after the last one did (a database
        another process holds locked); then gives up, says what is missing and how to import it
        (``import_hint``), and leaves the thread to finish, or die with the process."""
        if self._thread is None:
            return
        self._queue.put(_STOP)
        started = time.monotonic()
        stalled = False
        while self._thread.is_alive():
            now = time.monotonic()
            stall_ends = max(self._progress_at, started) + stall_s
            if now >= started + timeout_s or now >= stall_ends:
                stalled = now >= stall_ends
                break
            self._thread.join(min(started + timeout_s, stall_ends) - now)
        if self._thread.is_alive():  # blocked on a database another writer holds locked, or a slow server
            waited = f"no write got through for {stall_s:g}s" if stalled else f"still writing after {timeout_s:g}s"
            self._fail(
                f"trace store {self.store.url}: {waited} (is another process holding the database locked?); stopped "
                "waiting, and the episodes not yet written are missing from it. The run directory is complete: load "
                f"it later with {self.import_hint}"
            )
        self._thread = None

    def _failed(self, exc: Exception) -> None:
        self._fail(
            f"trace store {self.store.url}: {type(exc).__name__}: {exc}; the run directory keeps every episode it "
            f"recorded, load it later with {self.import_hint}"
        )

    def _fail(self, message: str) -> None:
        if not self.errors:
            self.on_error(message)
        self.errors.append(message)

    def _work(self) -> None:
        try:
            self._watch = self.store.pin()
        except Exception:  # nothing pinned: the writes take pooled connections and reconciling reads everything
            self._watch = None
        try:
            self._drain()
        finally:
            self.store.unpin()
            self._watch = None
            self._trusted.clear()

    def _vouched(self) -> dict[str, EpisodeKey]:
        """The episodes reconciling need not read back: those this writer stored or checked itself, when no other
        connection has committed to the database since the writer began (else none)."""
        return self._trusted if self._watch is not None and self._watch.untouched() else {}

    def _drain(self) -> None:
        pending: Any = None  # an item taken while gathering a batch, handled next
        while True:
            item = pending if pending is not None else self._queue.get()
            pending = None
            if item is _STOP:
                return
            try:
                if isinstance(item, tuple):
                    manifest, path = item
                    self.store.ingest_manifest(manifest, path)
                    self._manifest = item
                    continue
                if isinstance(item, _Reconcile):
                    if self.store.recreate_if_deleted():
                        self.store.unpin()  # its connection wrote to the deleted file: nothing it wrote is there
                        self._watch = None
                        self._fail(
                            f"trace store {self.store.url}: its file was deleted while the run wrote to it; created "
                            "it again with this run's episodes (what it held of other runs is gone: load their run "
                            "directories with `contextdelta db import RUN_ID`)"
                        )
                        if self._manifest is not None:
                            self.store.ingest_manifest(*self._manifest)
                    report = self.store.reconcile(item.run_group_id, item.records, trusted=self._vouched())
                    self.reconciled += report.added + report.updated + report.repaired
                    self._trust(item.records)  # every one of them now stored as its record gives it
                    if report.repairs or report.removed:  # rows edited (or written wrong) while the run went on
                        log.warning("trace store %s: %s", self.store.url, report.repairs_named())
                    continue
                batch = [item]  # the episodes queued meanwhile go in the same transaction (one commit for all)
                while len(batch) < BATCH_EPISODES:
                    try:
                        following = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if not isinstance(following, _Episode):
                        pending = following
                        break
                    batch.append(following)
                self._write_batch(batch)
            except Exception as exc:  # the run directory is the source of truth: report, never stop the run
                self._failed(exc)

    def _write_batch(self, batch: list[_Episode]) -> None:
        if len(batch) > 1:
            try:
                outcomes = self.store.ingest_episodes([(e.record, e.superseded) for e in batch])
            except Exception:  # each episode again on its own, so one bad row loses only itself
                log.debug("store batch of %d episodes failed; writing them one by one", len(batch), exc_info=True)
            else:
                self.written += len(batch)
                for episode, outcome in zip(batch, outcomes, strict=True):
                    self._stored(episode, outcome)
                return
        for episode in batch:
            try:
                outcome = self.store.ingest_episode(episode.record, episode.superseded)
            except Exception as exc:  # reported; the other episodes are still written
                self._failed(exc)
            else:
                self.written += 1
                self._stored(episode, outcome)

    def _stored(self, episode: _Episode, outcome: str) -> None:
        """Trust an episode whose rows this writer wrote (``unchanged``: the store already held its record, rows
        this writer has not seen, left to reconciling to read)."""
        if outcome in ("added", "updated"):
            self._trusted[episode.record.run_id] = episode_key(episode.record, episode.superseded)
        else:
            self._trusted.pop(episode.record.run_id, None)

    def _trust(self, records: Sequence[EpisodeRecord]) -> None:
        for record, superseded in episodes_of(records):
            self._trusted[record.run_id] = episode_key(record, superseded)


class StoreRecorder:
    """The trace store as a run recorder (``contextdelta.rundir.Recorder``): the run group when the run opens, each
    episode as it finishes (written by a background thread, so the store never slows the episodes down), and the
    final manifest when it ends. On resume and at the end the store is reconciled with the run directory's
    episodes (a killed session's writer may have lost some). A store failure is reported through ``on_error`` and
    never stops the run."""

    def __init__(self, store: Store, on_error: Callable[[str], None] = lambda message: None) -> None:
        self.store = store
        self.writer = StoreWriter(store, on_error=on_error).start()
        self.attempts: dict[str, list[EpisodeRecord]] = {}
        """Every attempt recorded so far of each episode (earlier sessions' included), in order."""

    @classmethod
    def open(cls, database_url: str | None, on_error: Callable[[str], None]) -> StoreRecorder | None:
        """A recorder for the store at ``database_url`` (default: settings), or None, reported through
        ``on_error``, when it cannot be opened: the run goes on with the run directory only."""
        try:
            store = open_store(database_url)
        except Exception as exc:  # the run directory is the source of truth; the store is a copy
            on_error(
                f"trace store unavailable ({type(exc).__name__}: {exc}); episodes go to the run directory only, "
                "load them later with `contextdelta db import RUN_ID`"
            )
            return None
        return cls(store, on_error)

    def start(self, run: RunStart) -> None:
        for earlier in sorted([*run.superseded, *run.done], key=lambda r: r.attempt):
            self.attempts.setdefault(earlier.run_id, []).append(earlier)
        self.writer.import_hint = (
            f"`contextdelta db import {shlex.quote(str(run.path.resolve()))} --database-url "
            f"{shlex.quote(self.store.url)}`"
        )
        self.writer.manifest(run.manifest, run.path.resolve())
        if run.done:  # an earlier session may have been killed before its writer thread stored everything
            self.writer.reconcile(run.manifest.run_group_id, [*run.superseded, *run.done])

    def episode(self, record: EpisodeRecord) -> None:
        earlier = self.attempts.setdefault(record.run_id, [])
        self.writer.episode(record, list(earlier))  # a re-run of a failed trial replaces the stored attempt
        earlier.append(record)

    def finish(self, run: RunEnd) -> None:
        # the episodes first, reconciled with the run directory, then the run group row that counts them
        self.writer.reconcile(run.manifest.run_group_id, [*run.superseded, *run.records])
        self.writer.manifest(run.manifest, run.path.resolve())
        self.close()

    def close(self) -> None:
        """Drain the queue and close the store (idempotent)."""
        self.writer.close()
        self.store.close()
