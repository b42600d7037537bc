"""The trace store: run groups, episodes, steps, tool events, hidden mutations and proxy traces.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_groups",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
        sa.Column("finished_at", sa.String(40), nullable=True),
        sa.Column("provider_kind", sa.String(64), nullable=False),
        sa.Column("base_url", sa.String(512), nullable=True),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("summary_model", sa.String(256), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("repeats", sa.Integer(), nullable=False),
        sa.Column("strategies", sa.JSON(), nullable=False),
        sa.Column("protection_modes", sa.JSON(), nullable=False),
        sa.Column("suite_sha256", sa.String(64), nullable=False),
        sa.Column("harness_sha256", sa.String(64), nullable=False),
        sa.Column("planned", sa.Integer(), nullable=False),
        sa.Column("finished", sa.Integer(), nullable=False),
        sa.Column("succeeded", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.Column("source_path", sa.String(1024), nullable=True),
        sa.Column("ingested_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "episodes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "run_group_id",
            sa.String(128),
            sa.ForeignKey("run_groups.id", ondelete="CASCADE", name="fk_episodes_run_group_id_run_groups"),
            nullable=False,
        ),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("task_version", sa.Integer(), nullable=False),
        sa.Column("task_hash", sa.String(64), nullable=False),
        sa.Column("world", sa.String(32), nullable=False),
        sa.Column("hazard", sa.String(64), nullable=False),
        sa.Column("strategy", sa.String(64), nullable=False),
        sa.Column("protection_mode", sa.String(32), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("episode_seed", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("finished_at", sa.String(40), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("failed", sa.Boolean(), nullable=False),
        sa.Column("termination_reason", sa.String(64), nullable=False),
        sa.Column("end_state", sa.Boolean(), nullable=False),
        sa.Column("no_stale_action", sa.Boolean(), nullable=False),
        sa.Column("no_duplicate_action", sa.Boolean(), nullable=False),
        sa.Column("refresh_before_write", sa.Boolean(), nullable=False),
        sa.Column("conflict_recovery", sa.Boolean(), nullable=True),
        sa.Column("authorized", sa.Boolean(), nullable=False),
        sa.Column("no_prohibited_action", sa.Boolean(), nullable=False),
        sa.Column("stale_action_count", sa.Integer(), nullable=False),
        sa.Column("duplicate_action_count", sa.Integer(), nullable=False),
        sa.Column("prohibited_action_count", sa.Integer(), nullable=False),
        sa.Column("blocked_write_count", sa.Integer(), nullable=False),
        sa.Column("steps_count", sa.Integer(), nullable=False),
        sa.Column("tool_call_count", sa.Integer(), nullable=False),
        sa.Column("agent_prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("agent_completion_tokens", sa.Integer(), nullable=False),
        sa.Column("summary_prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("summary_completion_tokens", sa.Integer(), nullable=False),
        sa.Column("usage_complete", sa.Boolean(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("final_answer", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("verdict", sa.JSON(), nullable=False),
        sa.Column("initial_messages", sa.JSON(), nullable=False),
        sa.Column("final_state", sa.JSON(), nullable=False),
        sa.Column("record_sha256", sa.String(64), nullable=False),
        sa.UniqueConstraint("run_group_id", "run_id", name="uq_episodes_run_group_id_run_id"),
    )
    for column in ("world", "strategy", "protection_mode", "task_id"):
        op.create_index(f"ix_episodes_{column}", "episodes", [column])
    op.create_index("ix_episodes_condition", "episodes", ["run_group_id", "strategy", "protection_mode"])
    op.create_table(
        "steps",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "episode_id",
            sa.Integer(),
            sa.ForeignKey("episodes.id", ondelete="CASCADE", name="fk_steps_episode_id_episodes"),
            nullable=False,
        ),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("messages_sha256", sa.String(64), nullable=False),
        sa.Column("harness_prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("canonical_message_count", sa.Integer(), nullable=False),
        sa.Column("removed", sa.JSON(), nullable=False),
        sa.Column("inserted", sa.JSON(), nullable=False),
        sa.Column("summary_calls", sa.JSON(), nullable=False),
        sa.Column("response_content", sa.Text(), nullable=True),
        sa.Column("response_tool_calls", sa.JSON(), nullable=False),
        sa.Column("finish_reason", sa.String(64), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("latency_s", sa.Float(), nullable=True),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.UniqueConstraint("episode_id", "step", name="uq_steps_episode_id_step"),
    )
    op.create_index("ix_steps_episode_id", "steps", ["episode_id"])
    op.create_table(
        "tool_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "episode_id",
            sa.Integer(),
            sa.ForeignKey("episodes.id", ondelete="CASCADE", name="fk_tool_events_episode_id_episodes"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("call_index", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(255), nullable=True),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=True),
        sa.Column("resource", sa.String(255), nullable=True),
        sa.Column("observed_version", sa.Integer(), nullable=True),
        sa.Column("observed_seq", sa.Integer(), nullable=True),
        sa.Column("version_at_execution", sa.Integer(), nullable=True),
        sa.Column("expected_version", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("stale", sa.Boolean(), nullable=False),
        sa.Column("duplicate", sa.Boolean(), nullable=False),
        sa.Column("prohibited", sa.Boolean(), nullable=False),
        sa.Column("state_before", sa.String(64), nullable=False),
        sa.Column("state_after", sa.String(64), nullable=False),
        sa.UniqueConstraint("episode_id", "seq", name="uq_tool_events_episode_id_seq"),
    )
    op.create_index("ix_tool_events_episode_id", "tool_events", ["episode_id"])
    op.create_index("ix_tool_events_tool", "tool_events", ["tool"])
    op.create_index("ix_tool_events_resource", "tool_events", ["resource"])
    op.create_table(
        "hidden_mutations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "episode_id",
            sa.Integer(),
            sa.ForeignKey("episodes.id", ondelete="CASCADE", name="fk_hidden_mutations_episode_id_episodes"),
            nullable=False,
        ),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("mutation_id", sa.String(128), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("after_seq", sa.Integer(), nullable=True),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("versions_before", sa.JSON(), nullable=False),
        sa.Column("versions_after", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.UniqueConstraint("episode_id", "position", name="uq_hidden_mutations_episode_id_position"),
    )
    op.create_index("ix_hidden_mutations_episode_id", "hidden_mutations", ["episode_id"])
    op.create_table(
        "proxy_traces",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("path", sa.String(512), nullable=False),
        sa.Column("upstream", sa.String(512), nullable=False),
        sa.Column("model", sa.String(256), nullable=True),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("total_tokens", sa.Integer(), nullable=True),
        sa.Column("request", sa.JSON(), nullable=True),
        sa.Column("response", sa.JSON(), nullable=True),
        sa.Column("response_text", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
    )
    op.create_index("ix_proxy_traces_created_at", "proxy_traces", ["created_at"])
    op.create_index("ix_proxy_traces_model", "proxy_traces", ["model"])


def downgrade() -> None:
    for table in ("proxy_traces", "hidden_mutations", "tool_events", "steps", "episodes", "run_groups"):
        op.drop_table(table)
