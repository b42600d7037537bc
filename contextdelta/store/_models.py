"""The trace store's tables as typed SQLAlchemy 2 ORM models.

The run directory is the source of truth; these tables are a queryable copy of it (for the dashboard, and for
ad-hoc SQL) plus the recording proxy's request/response pairs, which exist only here. Every column the
dashboard filters on has an index: world, strategy, protection mode, task and failure mode.

The models describe the schema at the head revision. Migrations (``migrations/versions``) are frozen copies
written by hand: they never import this module, so an old revision stays what it was when it shipped.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    """Declarative base of every store table."""

    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class RunGroupRow(Base):
    """One run group (one ``results/<RUN_GROUP_ID>/`` directory)."""

    __tablename__ = "run_groups"

    id: Mapped[str] = mapped_column(String(128), primary_key=True, comment="The run group id (directory name).")
    status: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[str] = mapped_column(String(40), comment="UTC ISO time the run group was created.")
    updated_at: Mapped[str] = mapped_column(String(40))
    finished_at: Mapped[str | None] = mapped_column(String(40))
    provider_kind: Mapped[str] = mapped_column(String(64))
    base_url: Mapped[str | None] = mapped_column(String(512), comment="Redacted: no credentials, no query.")
    model: Mapped[str] = mapped_column(String(256))
    summary_model: Mapped[str] = mapped_column(String(256))
    temperature: Mapped[float | None] = mapped_column(Float)  # null: an external agent (unknown)
    seed: Mapped[int] = mapped_column(Integer)
    repeats: Mapped[int] = mapped_column(Integer)
    strategies: Mapped[list[Any]] = mapped_column()
    protection_modes: Mapped[list[Any]] = mapped_column()
    suite_sha256: Mapped[str] = mapped_column(String(64))
    harness_sha256: Mapped[str] = mapped_column(String(64))
    planned: Mapped[int] = mapped_column(Integer)
    finished: Mapped[int] = mapped_column(Integer)
    succeeded: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    manifest: Mapped[dict[str, Any]] = mapped_column(comment="run_manifest.json as it was last ingested.")
    source_path: Mapped[str | None] = mapped_column(String(1024), comment="The run directory it was read from.")
    ingested_at: Mapped[str] = mapped_column(String(40))

    episodes: Mapped[list[EpisodeRow]] = relationship(
        back_populates="run_group", cascade="all, delete-orphan", passive_deletes=True
    )


class EpisodeRow(Base):
    """One episode (its current line of ``raw_runs.jsonl``): its condition, verdict and totals, and a summary of
    the attempts a ``--retry-failed`` re-run superseded."""

    __tablename__ = "episodes"
    __table_args__ = (
        UniqueConstraint("run_group_id", "run_id", name="uq_episodes_run_group_id_run_id"),
        Index("ix_episodes_world", "world"),
        Index("ix_episodes_strategy", "strategy"),
        Index("ix_episodes_protection_mode", "protection_mode"),
        Index("ix_episodes_task_id", "task_id"),
        Index("ix_episodes_failure_mode", "failure_mode"),
        Index("ix_episodes_condition", "run_group_id", "strategy", "protection_mode"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_group_id: Mapped[str] = mapped_column(String(128), ForeignKey("run_groups.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(String(255), comment="Episode id: task.strategy.mode.rREPEAT.")
    task_id: Mapped[str] = mapped_column(String(128))
    task_version: Mapped[int] = mapped_column(Integer)
    task_hash: Mapped[str] = mapped_column(String(64))
    world: Mapped[str] = mapped_column(String(32))
    hazard: Mapped[str] = mapped_column(String(64))
    strategy: Mapped[str] = mapped_column(String(64))
    protection_mode: Mapped[str] = mapped_column(String(32))
    repeat: Mapped[int] = mapped_column(Integer)
    episode_seed: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String(256))
    started_at: Mapped[str] = mapped_column(String(40))
    finished_at: Mapped[str] = mapped_column(String(40))
    success: Mapped[bool] = mapped_column(Boolean)
    failed: Mapped[bool] = mapped_column(Boolean, comment="A failed trial (provider/context/budget/harness error).")
    termination_reason: Mapped[str] = mapped_column(String(64))
    # The verdict: null for a failed trial, which has none (its run directory's raw_runs.jsonl keeps what the
    # graders found on the partial trajectory).
    end_state: Mapped[bool | None] = mapped_column(Boolean, comment="Null: a failed trial (no verdict).")
    no_stale_action: Mapped[bool | None] = mapped_column(Boolean, comment="Null: a failed trial (no verdict).")
    no_duplicate_action: Mapped[bool | None] = mapped_column(Boolean, comment="Null: a failed trial (no verdict).")
    refresh_before_write: Mapped[bool | None] = mapped_column(Boolean, comment="Null: a failed trial (no verdict).")
    conflict_recovery: Mapped[bool | None] = mapped_column(
        Boolean, comment="Null: N/A (no write was blocked), or a failed trial."
    )
    authorized: Mapped[bool | None] = mapped_column(Boolean, comment="Null: a failed trial (no verdict).")
    no_prohibited_action: Mapped[bool | None] = mapped_column(Boolean, comment="Null: a failed trial (no verdict).")
    stale_action_count: Mapped[int | None] = mapped_column(Integer, comment="Null: a failed trial (no verdict).")
    duplicate_action_count: Mapped[int | None] = mapped_column(Integer, comment="Null: a failed trial (no verdict).")
    prohibited_action_count: Mapped[int | None] = mapped_column(Integer, comment="Null: a failed trial (no verdict).")
    blocked_write_count: Mapped[int | None] = mapped_column(Integer, comment="Null: a failed trial (no verdict).")
    steps_count: Mapped[int] = mapped_column(Integer)
    tool_call_count: Mapped[int] = mapped_column(Integer)
    agent_prompt_tokens: Mapped[int] = mapped_column(Integer)
    agent_completion_tokens: Mapped[int] = mapped_column(Integer)
    summary_prompt_tokens: Mapped[int] = mapped_column(Integer)
    summary_completion_tokens: Mapped[int] = mapped_column(Integer)
    usage_complete: Mapped[bool] = mapped_column(Boolean)
    latency_s: Mapped[float] = mapped_column(Float)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    final_answer: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    verdict: Mapped[dict[str, Any]] = mapped_column()
    initial_messages: Mapped[list[Any]] = mapped_column()
    final_state: Mapped[dict[str, Any]] = mapped_column()
    record_sha256: Mapped[str] = mapped_column(String(64), comment="SHA-256 of the episode's canonical JSON.")
    failure_mode: Mapped[str | None] = mapped_column(String(64), comment="SPEC section 9 failure mode; null: none.")
    failure_cause: Mapped[dict[str, Any] | None] = mapped_column(JSON, comment="The attribution's cause chain.")
    attempt: Mapped[int] = mapped_column(
        Integer, server_default="1", comment="The current record's attempt (above 1: a failed trial re-run)."
    )
    superseded_attempts: Mapped[list[Any] | None] = mapped_column(
        JSON,
        comment="The earlier attempts this one replaced (--retry-failed): attempt, termination, error, times, "
        "record hash; null or empty: none.",
    )

    run_group: Mapped[RunGroupRow] = relationship(back_populates="episodes")
    steps: Mapped[list[StepRow]] = relationship(
        back_populates="episode", cascade="all, delete-orphan", passive_deletes=True, order_by="StepRow.step"
    )
    tool_events: Mapped[list[ToolEventRow]] = relationship(
        back_populates="episode", cascade="all, delete-orphan", passive_deletes=True, order_by="ToolEventRow.seq"
    )
    mutations: Mapped[list[MutationRow]] = relationship(
        back_populates="episode", cascade="all, delete-orphan", passive_deletes=True, order_by="MutationRow.position"
    )


class StepRow(Base):
    """One step of an episode: the exact messages sent, what the strategy did, and the model's reply."""

    __tablename__ = "steps"
    __table_args__ = (UniqueConstraint("episode_id", "step", name="uq_steps_episode_id_step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[int] = mapped_column(Integer, ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    messages: Mapped[list[Any]] = mapped_column(comment="The exact messages sent, after the context strategy.")
    messages_sha256: Mapped[str] = mapped_column(String(64))
    harness_prompt_tokens: Mapped[int] = mapped_column(Integer)
    canonical_message_count: Mapped[int] = mapped_column(Integer)
    removed: Mapped[list[Any]] = mapped_column(comment="Canonical-history indices the strategy did not send.")
    inserted: Mapped[list[Any]] = mapped_column(comment="Sent-message indices the strategy wrote.")
    summary_calls: Mapped[list[Any]] = mapped_column()
    response_content: Mapped[str | None] = mapped_column(Text)
    response_tool_calls: Mapped[list[Any]] = mapped_column()
    finish_reason: Mapped[str | None] = mapped_column(String(64))
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    latency_s: Mapped[float | None] = mapped_column(Float)
    retries: Mapped[int] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)

    episode: Mapped[EpisodeRow] = relationship(back_populates="steps")


class ToolEventRow(Base):
    """One agent tool call as the evaluator saw it, with the graders' per-call flags."""

    __tablename__ = "tool_events"
    __table_args__ = (
        UniqueConstraint("episode_id", "seq", name="uq_tool_events_episode_id_seq"),
        Index("ix_tool_events_tool", "tool"),
        Index("ix_tool_events_resource", "resource"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[int] = mapped_column(Integer, ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(Integer)
    call_index: Mapped[int] = mapped_column(Integer)
    call_id: Mapped[str | None] = mapped_column(String(255))
    tool: Mapped[str] = mapped_column(String(128))
    arguments: Mapped[Any] = mapped_column(JSON, nullable=True, comment="Parsed arguments, or the raw text.")
    kind: Mapped[str | None] = mapped_column(String(16))
    resource: Mapped[str | None] = mapped_column(String(255))
    observed_version: Mapped[int | None] = mapped_column(Integer)
    observed_seq: Mapped[int | None] = mapped_column(Integer)
    version_at_execution: Mapped[int | None] = mapped_column(Integer)
    expected_version: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(64))
    result: Mapped[str] = mapped_column(Text)
    stale: Mapped[bool] = mapped_column(Boolean)
    duplicate: Mapped[bool] = mapped_column(Boolean)
    prohibited: Mapped[bool] = mapped_column(Boolean)
    state_before: Mapped[str] = mapped_column(String(64))
    state_after: Mapped[str] = mapped_column(String(64))

    episode: Mapped[EpisodeRow] = relationship(back_populates="tool_events")


class MutationRow(Base):
    """One hidden mutation (another actor's write) applied during an episode. Evaluator-only data."""

    __tablename__ = "hidden_mutations"
    __table_args__ = (UniqueConstraint("episode_id", "position", name="uq_hidden_mutations_episode_id_position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[int] = mapped_column(Integer, ForeignKey("episodes.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer, comment="0-based order of application in the episode.")
    mutation_id: Mapped[str] = mapped_column(String(128))
    actor: Mapped[str] = mapped_column(String(255))
    step: Mapped[int] = mapped_column(Integer)
    after_seq: Mapped[int | None] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(32))
    resources: Mapped[list[Any]] = mapped_column()
    versions_before: Mapped[dict[str, Any]] = mapped_column()
    versions_after: Mapped[dict[str, Any]] = mapped_column()
    outcome: Mapped[str] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(64))

    episode: Mapped[EpisodeRow] = relationship(back_populates="mutations")


class ProxyTraceRow(Base):
    """One request/response pair recorded by ``contextdelta serve``. Credentials are redacted before storage."""

    __tablename__ = "proxy_traces"
    __table_args__ = (
        Index("ix_proxy_traces_created_at", "created_at"),
        Index("ix_proxy_traces_model", "model"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[str] = mapped_column(String(40), comment="UTC ISO time the request arrived.")
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(String(512))
    upstream: Mapped[str] = mapped_column(String(512), comment="Redacted upstream base URL.")
    model: Mapped[str | None] = mapped_column(String(256))
    stream: Mapped[bool] = mapped_column(Boolean)
    status_code: Mapped[int] = mapped_column(Integer)
    latency_s: Mapped[float] = mapped_column(Float, comment="Request arrival to the last byte forwarded.")
    first_byte_s: Mapped[float | None] = mapped_column(Float, comment="Request arrival to the first upstream byte.")
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    total_tokens: Mapped[int | None] = mapped_column(Integer)
    request: Mapped[Any] = mapped_column(JSON, nullable=True, comment="The request body (redacted).")
    response: Mapped[Any] = mapped_column(JSON, nullable=True, comment="Response body as JSON (a stream: reassembled).")
    response_text: Mapped[str | None] = mapped_column(Text, comment="Raw body when not JSON (a stream: the SSE).")
    error: Mapped[str | None] = mapped_column(Text)
