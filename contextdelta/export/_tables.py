"""The run directory as flat tables, one per record type: what ``contextdelta export --format parquet`` writes and
``docs/run-directory.md`` documents (both from `TABLES`, so the documented columns are the written ones).

Pure functions of the manifest and the episodes: no file is read or written here. Values are Python scalars
(``None`` for unknown); nested values (tool arguments, tool calls, version maps) are canonical JSON text, so every
column has one type. An external agent's episode has no messages (its model's view is unknown): it has no
``messages`` rows and ``context`` ``unknown`` in ``episodes``, never invented messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from contextdelta.canonical import canonical_json
from contextdelta.replay import message_content
from contextdelta.rundir import (
    ATTEMPT_COLUMN,
    ATTEMPT_COLUMN_DOC,
    CONTROL_COLUMN,
    CONTROL_COLUMN_DOC,
    TASK_RESULT_COLUMN_DOCS,
    ColumnType,
    EpisodeRecord,
    RunManifest,
    task_result_values,
    tool_event_records,
)

Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """One column of a table: its name, type and meaning."""

    name: str
    type: ColumnType | None
    """None: JSON text (a nested value), stored as a string."""
    description: str

    @property
    def type_name(self) -> str:
        return "string (JSON)" if self.type is None else self.type


@dataclass(frozen=True)
class TableSpec:
    """One exported table: its name (the file is ``<name>.parquet``), what a row is, its columns, its rows."""

    name: str
    description: str
    columns: tuple[Column, ...]
    rows: Callable[[RunManifest, Sequence[EpisodeRecord]], Iterator[Row]]
    superseded: bool = False
    """Rows of the superseded attempts (``--retry-failed``), not of the episodes' current records."""


def _json(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


# ---- episodes ----------------------------------------------------------------------------------------------------

_EPISODE_EXTRA = (
    Column("run_group_id", "string", "The run group (the run directory's name)."),
    Column("model", "string", "The model the episode's agent called (the manifest's provider model)."),
    Column(
        "cached_prompt_tokens",
        "int",
        "Prompt tokens (agent and summary) the provider reported as served from its cache; empty: not reported.",
    ),
    Column(
        "cache_write_tokens",
        "int",
        "Prompt tokens the provider reported as written to its cache; empty: not reported.",
    ),
    Column("context", "string", "recorded (the messages sent are in the messages table) or unknown (external agent)."),
)
EPISODE_COLUMNS: tuple[Column, ...] = (
    *(Column(name, kind, text) for name, (kind, text) in TASK_RESULT_COLUMN_DOCS.items()),
    Column(CONTROL_COLUMN, *CONTROL_COLUMN_DOC),
    Column(ATTEMPT_COLUMN, *ATTEMPT_COLUMN_DOC),
    *_EPISODE_EXTRA,
)


def _reported(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def episode_rows(manifest: RunManifest, records: Sequence[EpisodeRecord]) -> Iterator[Row]:
    for record in records:
        totals = record.trace.totals
        yield {
            **task_result_values(record),
            "run_group_id": record.run_group_id,
            "model": manifest.provider.model,
            "cached_prompt_tokens": _reported(totals.agent_usage.cached_tokens, totals.summary_usage.cached_tokens),
            "cache_write_tokens": _reported(
                totals.agent_usage.cache_write_tokens, totals.summary_usage.cache_write_tokens
            ),
            "context": "unknown" if record.trace.external is not None else "recorded",
        }


# ---- steps -------------------------------------------------------------------------------------------------------

STEP_COLUMNS: tuple[Column, ...] = (
    Column("run_id", "string", "The episode."),
    Column("step", "int", "1-based step number (the k-th model call)."),
    Column("messages", "int", "Messages sent at this step, after the context strategy (0: unknown, external)."),
    Column("messages_sha256", "string", "SHA-256 of the canonical JSON of the messages sent."),
    Column("harness_prompt_tokens", "int", "Harness-side token count of the messages sent (tool schemas excluded)."),
    Column("history_messages", "int", "Messages in the canonical (full) history before the call."),
    Column("removed", "int", "History messages the strategy did not send verbatim."),
    Column("inserted", "int", "Sent messages the strategy wrote (summary, digest, placeholder)."),
    Column("prompt_tokens", "int", "Provider-reported prompt tokens of the agent call; empty: none reported."),
    Column("completion_tokens", "int", "Provider-reported completion tokens; empty: none reported."),
    Column("cached_tokens", "int", "Prompt tokens served from the provider's cache; empty: not reported."),
    Column("cache_write_tokens", "int", "Prompt tokens written to the provider's cache; empty: not reported."),
    Column("latency_s", "float", "Seconds on the wire of the call; empty when it failed."),
    Column("finish_reason", "string", "As the provider returned it."),
    Column("tool_calls", "int", "Tool calls the model made at this step."),
    Column("summary_calls", "int", "Summary-model calls made for this step's context."),
    Column("error", "string", "Why the step failed, when it did."),
    Column("note", "string", "Harness remark (e.g. an empty reply that was nudged)."),
)


def step_rows(manifest: RunManifest, records: Sequence[EpisodeRecord]) -> Iterator[Row]:
    for record in records:
        for step in record.trace.steps:
            response = step.response
            usage = response.usage if response is not None else None
            yield {
                "run_id": record.run_id,
                "step": step.step,
                "messages": len(step.messages),
                "messages_sha256": step.messages_sha256,
                "harness_prompt_tokens": step.harness_prompt_tokens,
                "history_messages": step.context.canonical_message_count,
                "removed": len(step.context.removed),
                "inserted": len(step.context.inserted),
                "prompt_tokens": usage.prompt_tokens if usage else None,
                "completion_tokens": usage.completion_tokens if usage else None,
                "cached_tokens": usage.cached_tokens if usage else None,
                "cache_write_tokens": usage.cache_write_tokens if usage else None,
                "latency_s": response.latency_s if response is not None else None,
                "finish_reason": response.finish_reason if response is not None else None,
                "tool_calls": len(step.tool_calls),
                "summary_calls": len(step.context.summary_calls),
                "error": step.error,
                "note": step.note,
            }


# ---- messages ----------------------------------------------------------------------------------------------------

MESSAGE_COLUMNS: tuple[Column, ...] = (
    Column("run_id", "string", "The episode."),
    Column("step", "int", "The step whose request sent this message."),
    Column("index", "int", "Position in that request's messages, from 0."),
    Column("role", "string", "system, user, assistant or tool."),
    Column("content", "string", "The message text (content parts joined); empty for a tool-call-only message."),
    Column(
        "tool_calls",
        None,
        'The assistant message\'s tool calls as sent ([{"id", "type", "function": {"name", "arguments"}}]).',
    ),
    Column("tool_call_id", "string", "For a tool message: the call it answers."),
    Column("inserted", "bool", "Written by the context strategy (a summary, digest or placeholder), not history."),
)


def message_rows(manifest: RunManifest, records: Sequence[EpisodeRecord]) -> Iterator[Row]:
    for record in records:
        for step in record.trace.steps:
            inserted = set(step.context.inserted)
            for index, message in enumerate(step.messages):
                yield {
                    "run_id": record.run_id,
                    "step": step.step,
                    "index": index,
                    "role": message.get("role"),
                    "content": message_content(message),
                    "tool_calls": _json(message.get("tool_calls")),
                    "tool_call_id": message.get("tool_call_id"),
                    "inserted": index in inserted,
                }


# ---- tool events and hidden mutations ----------------------------------------------------------------------------

TOOL_EVENT_COLUMNS: tuple[Column, ...] = (
    Column("run_id", "string", "The episode."),
    Column("step", "int", "The step of the call."),
    Column("seq", "int", "The call's number in the episode, from 0."),
    Column("index", "int", "The call's position among its step's calls."),
    Column("tool", "string", "The tool called."),
    Column("arguments", None, "The arguments (an object), or the raw text when it was not valid JSON."),
    Column("kind", "string", "read or write; empty for an invalid call."),
    Column("resource", "string", "The resource a write targets (world/kind/id)."),
    Column("observed_version", "int", "The version the agent last observed of that resource; empty: never seen."),
    Column("version_at_execution", "int", "The resource's version when the call ran."),
    Column("expected_version", "int", "The expected_version the agent sent (freshness_contract)."),
    Column("outcome", "string", "executed, blocked, rejected, forbidden or invalid."),
    Column("error_code", "string", "The tool error's code, when it failed."),
    Column("stale", "bool", "A stale write (no_stale_action)."),
    Column("duplicate", "bool", "A duplicate write (no_duplicate_action)."),
    Column("prohibited", "bool", "A task-prohibited call that reached the endpoint."),
)


def tool_event_rows(manifest: RunManifest, records: Sequence[EpisodeRecord]) -> Iterator[Row]:
    for record in records:
        for event in tool_event_records(record):
            row = event.model_dump(mode="json")
            row["arguments"] = canonical_json(row["arguments"])
            yield row


MUTATION_COLUMNS: tuple[Column, ...] = (
    Column("run_id", "string", "The episode."),
    Column("mutation_id", "string", "The task's hidden mutation id."),
    Column("actor", "string", "The other actor who wrote."),
    Column("step", "int", "The agent step during or before which it applied."),
    Column("after_seq", "int", "seq of the agent call it followed; empty for a before_step trigger."),
    Column("trigger", "string", "after_tool_call, after_observation or before_step."),
    Column("resources", None, "The resources it wrote (a list)."),
    Column("versions_before", None, "Each resource's version before it (an object)."),
    Column("versions_after", None, "Each resource's version after it (an object)."),
    Column("outcome", "string", "executed, or why it did not apply."),
    Column("error_code", "string", "The error's code, when it did not apply."),
)


def mutation_rows(manifest: RunManifest, records: Sequence[EpisodeRecord]) -> Iterator[Row]:
    for record in records:
        for m in record.trace.mutation_events():
            yield {
                "run_id": record.run_id,
                "mutation_id": m.mutation_id,
                "actor": m.actor,
                "step": m.step,
                "after_seq": m.after_seq,
                "trigger": m.trigger,
                "resources": canonical_json(m.resources),
                "versions_before": canonical_json(m.versions_before),
                "versions_after": canonical_json(m.versions_after),
                "outcome": m.outcome.value,
                "error_code": m.error_code,
            }


TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "episodes",
        "One row per episode: the `task_results.csv` columns with their types, then the run, model, cache and "
        "context columns.",
        EPISODE_COLUMNS,
        episode_rows,
    ),
    TableSpec(
        "superseded_attempts",
        "One row per superseded attempt: an earlier attempt of an episode that `run-benchmark --resume ID "
        "--retry-failed` ran again (a line of `raw_runs.jsonl`, kept as evidence and counted nowhere), with the "
        "episodes table's columns (`attempt` tells the attempts apart). With the episodes table, one row per line "
        "of `raw_runs.jsonl`; the other tables hold the current records only.",
        EPISODE_COLUMNS,
        episode_rows,
        superseded=True,
    ),
    TableSpec("steps", "One row per step (model call) of every episode.", STEP_COLUMNS, step_rows),
    TableSpec(
        "messages",
        "One row per message sent at each step (the context the model saw, after the strategy); none for an "
        "external agent's episodes, whose context is unknown.",
        MESSAGE_COLUMNS,
        message_rows,
    ),
    TableSpec(
        "tool_events",
        "One row per agent tool call: the `tool_events.jsonl` lines.",
        TOOL_EVENT_COLUMNS,
        tool_event_rows,
    ),
    TableSpec(
        "mutations",
        "One row per hidden mutation (another actor's write) applied during an episode; evaluator-only data.",
        MUTATION_COLUMNS,
        mutation_rows,
    ),
)
"""Every exported table, in order."""


def table_rows(spec: TableSpec, manifest: RunManifest, records: Sequence[EpisodeRecord]) -> list[Row]:
    """The rows of one table, records in run id order (then attempt), each with exactly the spec's columns;
    ``records``: the current records, or the superseded attempts for a ``superseded`` spec."""
    ordered = sorted(records, key=lambda r: (r.run_id, r.attempt))
    names = [c.name for c in spec.columns]
    return [{name: row.get(name) for name in names} for row in spec.rows(manifest, ordered)]
