"""Turning run-directory records into store rows: one run group, one episode with its steps and events.

Ingestion is idempotent: an episode is keyed by (run group, run id) and carries the SHA-256 of its canonical
JSON, so importing the same run directory twice changes nothing, and an episode whose record changed (a
re-graded run, or a failed trial re-run by ``--retry-failed``) is replaced whole. The row is the episode's current
record; the attempts it superseded are summarised in ``superseded_attempts`` (their records stay in
``raw_runs.jsonl``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import JSON, Boolean, CursorResult, Table, delete, insert, select, type_coerce
from sqlalchemy.orm import Session
from sqlalchemy.types import NullType

from contextdelta.canonical import sha256_hex
from contextdelta.rundir import VERDICT_COLUMNS as TASK_RESULT_VERDICT_COLUMNS
from contextdelta.rundir import EpisodeRecord, RunManifest
from contextdelta.settings import redact_url
from contextdelta.store._models import EpisodeRow, MutationRow, RunGroupRow, StepRow, ToolEventRow


@dataclass(frozen=True)
class FailureAttribution:
    """What the store keeps of an episode's attribution: one failure mode and its cause chain (JSON)."""

    failure_mode: str | None
    cause: dict[str, Any] | None = None


Attributor = Callable[[EpisodeRecord], FailureAttribution]
"""Classifies one episode (the failure-atlas classifier); None-mode for a success."""

VERDICT_COLUMNS = tuple(name for name in TASK_RESULT_VERDICT_COLUMNS if name in EpisodeRow.__table__.columns)
"""The episodes' verdict columns: null for a failed trial (migration 0005)."""


def failure_attribution(record: EpisodeRecord) -> FailureAttribution:
    """The failure-atlas classifier's answer for one episode (``contextdelta.attribution``), as stored.

    A classifier error never blocks ingestion: the episode is stored without a failure mode and the cause says
    what went wrong.
    """
    from contextdelta.attribution import attribute_episode

    try:
        attribution = attribute_episode(record)
    except Exception as exc:  # the store keeps the episode either way
        return FailureAttribution(None, {"error": f"attribution failed: {type(exc).__name__}: {exc}"})
    if attribution is None:
        return FailureAttribution(None, None)
    return FailureAttribution(attribution.mode.value, attribution.model_dump(mode="json"))


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def record_sha256(record: EpisodeRecord) -> str:
    """The SHA-256 of an episode's canonical JSON: equal records give equal hashes."""
    return sha256_hex(record.canonical_text())  # = content_hash(record.model_dump(mode="json")), computed once


def upsert_run_group(session: Session, manifest: RunManifest, source_path: str | None) -> RunGroupRow:
    """Insert or refresh the run group row from its manifest (status and counts change while a run goes on)."""
    row = session.get(RunGroupRow, manifest.run_group_id)
    values: dict[str, Any] = {
        "status": manifest.status.value,
        "created_at": manifest.created_at,
        "updated_at": manifest.updated_at,
        "finished_at": manifest.finished_at,
        "provider_kind": manifest.provider.kind,
        "base_url": redact_url(manifest.provider.base_url),
        "model": manifest.provider.model,
        "summary_model": manifest.provider.summary_model,
        "temperature": manifest.provider.temperature,
        "seed": manifest.seed,
        "repeats": manifest.repeats,
        "strategies": list(manifest.strategies),
        "protection_modes": list(manifest.protection_modes),
        "suite_sha256": manifest.hashes.suite_sha256,
        "harness_sha256": manifest.hashes.harness_sha256,
        "planned": manifest.counts.planned,
        "finished": manifest.counts.finished,
        "succeeded": manifest.counts.succeeded,
        "failed": manifest.counts.failed,
        "manifest": manifest.model_dump(mode="json"),
        "ingested_at": utc_now(),
    }
    if source_path is not None:
        values["source_path"] = source_path
    if row is None:
        row = RunGroupRow(id=manifest.run_group_id, **values)
        session.add(row)
    else:
        for name, value in values.items():
            setattr(row, name, value)
    return row


EpisodeValues = tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]
"""An episode's row values, then those of its steps, tool events and hidden mutations (without ``episode_id``)."""


def attempt_summary(record: EpisodeRecord) -> dict[str, Any]:
    """What the store keeps of a superseded attempt (its full record stays in ``raw_runs.jsonl``)."""
    return {
        "attempt": record.attempt,
        "termination_reason": record.trace.termination.value,
        "error": record.trace.error,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "steps": record.trace.step_count,
        "record_sha256": record_sha256(record),
    }


def episode_values(
    record: EpisodeRecord,
    attribution: FailureAttribution | None,
    digest: str | None = None,
    superseded: Sequence[EpisodeRecord] = (),
) -> EpisodeValues:
    """The column values of an episode (its current record, with a summary of the ``superseded`` attempts) and of
    its steps, tool events and hidden mutations."""
    v, trace, totals = record.verdict, record.trace, record.trace.totals
    flags = {f.seq: f for f in v.event_flags}
    episode: dict[str, Any] = dict(
        run_group_id=record.run_group_id,
        run_id=record.run_id,
        task_id=record.task_id,
        task_version=record.task_version,
        task_hash=record.task_hash,
        world=record.world,
        hazard=record.hazard,
        strategy=record.strategy,
        protection_mode=record.protection_mode,
        repeat=record.repeat,
        episode_seed=record.episode_seed,
        model=trace.model,
        started_at=record.started_at,
        finished_at=record.finished_at,
        success=v.success,
        failed=record.failed,
        termination_reason=trace.termination.value,
        end_state=v.end_state,
        no_stale_action=v.no_stale_action,
        no_duplicate_action=v.no_duplicate_action,
        refresh_before_write=v.refresh_before_write,
        conflict_recovery=v.conflict_recovery,
        authorized=v.authorized,
        no_prohibited_action=v.no_prohibited_action,
        stale_action_count=v.stale_action_count,
        duplicate_action_count=v.duplicate_action_count,
        prohibited_action_count=v.prohibited_action_count,
        blocked_write_count=v.blocked_write_count,
        steps_count=trace.step_count,
        tool_call_count=totals.tool_calls,
        agent_prompt_tokens=totals.agent_usage.prompt_tokens,
        agent_completion_tokens=totals.agent_usage.completion_tokens,
        summary_prompt_tokens=totals.summary_usage.prompt_tokens,
        summary_completion_tokens=totals.summary_usage.completion_tokens,
        usage_complete=totals.usage_complete,
        latency_s=totals.latency_s,
        cost_usd=record.cost_usd,
        final_answer=trace.final_answer,
        error=trace.error,
        verdict=v.model_dump(mode="json"),
        initial_messages=list(trace.initial_messages),
        final_state=trace.evaluator.final_state,
        record_sha256=digest or record_sha256(record),
        failure_mode=attribution.failure_mode if attribution else None,
        failure_cause=attribution.cause if attribution else None,
        attempt=record.attempt,
        superseded_attempts=[attempt_summary(r) for r in superseded] or None,
    )
    if record.failed:  # no verdict: the graders' findings on the partial trajectory stay in `verdict` only
        episode.update(dict.fromkeys(VERDICT_COLUMNS))
    steps: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    mutations: list[dict[str, Any]] = []
    for step in trace.steps:
        response = step.response
        steps.append(
            dict(
                step=step.step,
                messages=list(step.messages),
                messages_sha256=step.messages_sha256,
                harness_prompt_tokens=step.harness_prompt_tokens,
                canonical_message_count=step.context.canonical_message_count,
                removed=list(step.context.removed),
                inserted=list(step.context.inserted),
                summary_calls=[c.model_dump(mode="json") for c in step.context.summary_calls],
                response_content=response.content if response else None,
                response_tool_calls=[c.model_dump(mode="json") for c in response.tool_calls] if response else [],
                finish_reason=response.finish_reason if response else None,
                prompt_tokens=response.usage.prompt_tokens if response and response.usage else None,
                completion_tokens=response.usage.completion_tokens if response and response.usage else None,
                latency_s=response.latency_s if response else None,
                retries=response.retries if response else 0,
                note=step.note,
                error=step.error,
            )
        )
    for event in trace.tool_events():
        flag = flags.get(event.seq)
        events.append(
            dict(
                seq=event.seq,
                step=event.step,
                call_index=event.index,
                call_id=event.call_id,
                tool=event.tool,
                arguments=event.arguments,
                kind=event.kind.value if event.kind else None,
                resource=event.resource,
                observed_version=event.observed_version,
                observed_seq=event.observed_seq,
                version_at_execution=event.version_at_execution,
                expected_version=event.expected_version,
                outcome=event.outcome.value,
                error_code=event.error_code,
                result=event.result,
                stale=bool(flag and flag.stale),
                duplicate=bool(flag and flag.duplicate),
                prohibited=bool(flag and flag.prohibited),
                state_before=event.state_before,
                state_after=event.state_after,
            )
        )
    for position, mutation in enumerate(trace.mutation_events()):
        mutations.append(
            dict(
                position=position,
                mutation_id=mutation.mutation_id,
                actor=mutation.actor,
                step=mutation.step,
                after_seq=mutation.after_seq,
                trigger=mutation.trigger,
                resources=list(mutation.resources),
                versions_before=dict(mutation.versions_before),
                versions_after=dict(mutation.versions_after),
                outcome=mutation.outcome.value,
                error_code=mutation.error_code,
            )
        )
    return episode, steps, events, mutations


def episode_row(record: EpisodeRecord, attribution: FailureAttribution | None, digest: str | None = None) -> EpisodeRow:
    """The episode with its steps, tool events and hidden mutations as ORM objects, ready to add to a session."""
    episode, steps, events, mutations = episode_values(record, attribution, digest)
    row = EpisodeRow(**episode)
    row.steps.extend(StepRow(**values) for values in steps)
    row.tool_events.extend(ToolEventRow(**values) for values in events)
    row.mutations.extend(MutationRow(**values) for values in mutations)
    return row


def _table(model: type[Any]) -> Table:
    """A mapped class's table, for SQL Core statements."""
    return cast(Table, model.__table__)


def _json_value(value: Any) -> Any:
    """A JSON column's value selected without its type: SQLite gives the text (parsed here; an
    :class:`Unreadable` when it is not JSON), PostgreSQL's driver the parsed value."""
    if not isinstance(value, str | bytes):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return Unreadable(value)


def _delete_episode_ids(session: Session, ids: Sequence[int]) -> None:
    # Children first: SQLite may run with foreign keys off (then ON DELETE CASCADE does nothing).
    for table in (StepRow, ToolEventRow, MutationRow):
        session.execute(delete(table).where(table.episode_id.in_(list(ids))))
    session.execute(delete(EpisodeRow).where(EpisodeRow.id.in_(list(ids))))
    session.flush()


def delete_episodes(session: Session, run_group_id: str, run_ids: Sequence[str]) -> None:
    """Delete the episodes ``run_ids`` of a run group with their steps, tool events and mutations."""
    ids = session.scalars(
        select(EpisodeRow.id).where(EpisodeRow.run_group_id == run_group_id, EpisodeRow.run_id.in_(list(run_ids)))
    ).all()
    if ids:
        _delete_episode_ids(session, ids)


def upsert_episode(
    session: Session,
    record: EpisodeRecord,
    attributor: Attributor | None,
    superseded: Sequence[EpisodeRecord] = (),
    *,
    replace: bool = False,
) -> str:
    """Insert the episode (its current record, with the ``superseded`` attempts it replaced), replace it when its
    record or its superseded attempts changed (a failed trial re-run) or when told to (``replace``: its rows were
    found to differ from the record's), or leave it; returns added/updated/unchanged."""
    digest = record_sha256(record)
    earlier = [attempt_summary(r) for r in superseded] or None
    # superseded_attempts read raw: a hand-edited value that is not JSON is one to replace, not a crash
    existing = session.execute(
        select(
            EpisodeRow.id,
            EpisodeRow.record_sha256,
            EpisodeRow.failure_mode,
            type_coerce(EpisodeRow.superseded_attempts, NullType()).label("superseded_attempts"),
        ).where(EpisodeRow.run_group_id == record.run_group_id, EpisodeRow.run_id == record.run_id)
    ).one_or_none()
    if (
        not replace
        and existing is not None
        and existing.record_sha256 == digest
        and same_value(earlier, _json_value(existing.superseded_attempts))
    ):
        if existing.failure_mode is None and attributor is not None and not record.verdict.success:
            # rows stored before attribution existed (an older revision) get their failure mode on re-import
            attribution = attributor(record)
            if attribution.failure_mode is not None:
                row = session.get(EpisodeRow, existing.id)
                assert row is not None
                row.failure_mode, row.failure_cause = attribution.failure_mode, attribution.cause
        return "unchanged"
    if existing is not None:
        _delete_episode_ids(session, [existing.id])
    episode, steps, events, mutations = episode_values(
        record, attributor(record) if attributor else None, digest, superseded
    )
    inserted = session.execute(insert(_table(EpisodeRow)), episode)
    key = cast(CursorResult[Any], inserted).inserted_primary_key
    assert key is not None
    episode_id = key[0]
    # children as one executemany per table, in SQL Core: the ORM's unit of work (an object per step and per tool
    # call) and even its bulk INSERT cost more CPU than the rest of storing an episode
    for model, children in ((StepRow, steps), (ToolEventRow, events), (MutationRow, mutations)):
        if children:
            session.execute(insert(_table(model)), [{**values, "episode_id": episode_id} for values in children])
    return "added" if existing is None else "updated"


NOT_COMPARED = frozenset({"id", "episode_id", "failure_mode", "failure_cause"})
"""Columns a row comparison skips: keys the database assigns, and the classifier's attribution (derived at ingest
by the failure-atlas classifier of the day, not a field of the record)."""


def same_value(expected: Any, held: Any) -> bool:
    """Whether a stored value is the one ``episode_values`` derives. Strict about types a JSON or SQL round trip
    keeps (``true`` is not ``1``, ``"1"`` is not ``1``, a list is not an object); a number equals the same number
    as an int or a float (a Float column may read an integer back as a float, PostgreSQL's ``double precision``
    and SQLite's REAL both keep every float exactly); SQL NULL and JSON ``null`` are both None (SQLAlchemy reads
    both so); dicts compare by keys, not order (PostgreSQL's jsonb reorders them)."""
    if expected is None or held is None:
        return expected is None and held is None
    if isinstance(expected, bool) or isinstance(held, bool):
        return isinstance(expected, bool) and isinstance(held, bool) and expected == held
    if isinstance(expected, int | float) and isinstance(held, int | float):
        if isinstance(expected, float) and isinstance(held, float) and expected != expected:
            return held != held  # NaN
        return expected == held
    if isinstance(expected, dict) and isinstance(held, dict):
        return expected.keys() == held.keys() and all(same_value(v, held[k]) for k, v in expected.items())
    if isinstance(expected, list | tuple) and isinstance(held, list | tuple):
        return len(expected) == len(held) and all(same_value(e, h) for e, h in zip(expected, held, strict=True))
    return type(expected) is type(held) and bool(expected == held)


def _row_difference(table: str, expected: dict[str, Any], held: dict[str, Any]) -> str | None:
    for name, value in expected.items():
        if name in NOT_COMPARED:
            continue
        if name not in held:
            return f"{table}.{name} (missing)"
        if not same_value(value, held[name]):
            return f"{table}.{name}"
    return None


def first_difference(expected: EpisodeValues, held: EpisodeValues) -> str | None:
    """The first column where the rows the store holds for an episode (``held``: its episode row, then its steps,
    tool events and mutations in order) differ from those ``expected`` (``episode_values`` of its record), as
    ``table.column`` (with the child's key: ``steps[3].messages``); None when they are equal."""
    found = _row_difference("episodes", expected[0], held[0])
    if found is not None:
        return found
    for table, key, want, have in (
        ("steps", "step", expected[1], held[1]),
        ("tool_events", "seq", expected[2], held[2]),
        ("hidden_mutations", "position", expected[3], held[3]),
    ):
        rows = {row[key]: row for row in have}
        for row in want:
            stored = rows.pop(row[key], None)
            if stored is None:
                return f"{table}[{key}={row[key]}] (missing)"
            found = _row_difference(f"{table}[{key}={row[key]}]", row, stored)
            if found is not None:
                return found
        if rows or len(have) != len(want):  # a row not in the record (or a key stored twice)
            extra = min(rows) if rows else have[0][key]
            return f"{table}[{key}={extra}] (not in the record)"
    return None


@dataclass(frozen=True)
class Unreadable:
    """A stored value its column's type cannot read (SQLite keeps whatever was written: text in a JSON column that
    is not JSON); equal to nothing a record gives, so its episode is repaired."""

    raw: Any


def _raw_columns(table: Table, sqlite: bool) -> list[Any]:
    """The columns to select: on SQLite as stored (no type processing, which fails or coerces on hand-edited
    values: ``json.loads`` on text that is not JSON, ``bool(5)``), elsewhere through their types (the server
    checks them on write)."""
    if not sqlite:
        return list(table.c)
    return [type_coerce(column, NullType()).label(column.name) for column in table.c]


def _read_raw(table: Table, row: Any) -> dict[str, Any]:
    """A SQLite row read raw, as its column types would give it where that is what was written."""
    values = dict(row)
    for column in table.c:
        value = values[column.name]
        if value is None:
            continue
        if isinstance(column.type, JSON):
            values[column.name] = _json_value(value)
        elif isinstance(column.type, Boolean) and type(value) is int and value in (0, 1):
            values[column.name] = bool(value)
    return values


def stored_episode_values(session: Session, run_group_id: str, run_ids: Sequence[str]) -> dict[str, EpisodeValues]:
    """What the store holds for the episodes ``run_ids`` of a run group, shaped as ``episode_values`` (each row's
    columns by name; children in their key's order, ``episode_id`` included). Run ids it lacks are left out. A
    value its column's type cannot read is an :class:`Unreadable`."""
    sqlite = session.get_bind().dialect.name == "sqlite"

    def read(table: Table, row: Any) -> dict[str, Any]:
        return _read_raw(table, row) if sqlite else dict(row)

    episodes = _table(EpisodeRow)
    rows = session.execute(
        select(*_raw_columns(episodes, sqlite)).where(
            episodes.c.run_group_id == run_group_id, episodes.c.run_id.in_(list(run_ids))
        )
    ).mappings()
    held: dict[str, EpisodeValues] = {}
    by_id: dict[int, EpisodeValues] = {}
    for row in rows:
        values: EpisodeValues = (read(episodes, row), [], [], [])
        held[row["run_id"]] = by_id[row["id"]] = values
    if not by_id:
        return held
    for position, (model, key) in enumerate(((StepRow, "step"), (ToolEventRow, "seq"), (MutationRow, "position"))):
        table = _table(model)
        query = (
            select(*_raw_columns(table, sqlite))
            .where(table.c.episode_id.in_(list(by_id)))
            .order_by(table.c.episode_id, table.c[key])
        )
        for child in session.execute(query).mappings():
            cast(list[dict[str, Any]], by_id[child["episode_id"]][position + 1]).append(read(table, child))
    return held
